// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The RoCE v2 port (VIRTIO_RDMA_F_ROCE, docs/virtio-rdma.md 2.1).
 *
 * The port belongs to the guest's own Ethernet NIC, the netdev whose MAC is
 * config.mac. A netdevice notifier binds it to port 1 with
 * ib_device_set_netdev() when it registers (registering the notifier replays
 * NETDEV_REGISTER for the netdevs that exist already) and unbinds it when it
 * goes away; while unbound the port reads DOWN. The RDMA core then builds the
 * port's GID table from that netdev's addresses and resolves MACs, routes and
 * RDMA CM addresses over it, as for Soft-RoCE.
 *
 * Source GIDs: the guest names one by its entry in the core's table; the
 * device knows only its own table (config.gids, the operator's GIDs). An AH
 * or QP path is sent with the index of the same GID there, and a guest GID
 * that is not a RoCE v2 GID of the device's table fails with -EINVAL
 * (an IPv6 link-local GID, an address the guest added itself, and every
 * RoCE v1 entry: the device sends RoCE v2 only).
 */
#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

/* True when the port may carry traffic: not RoCE, or RoCE and bound. */
bool vrdma_port_usable(struct vrdma_dev *dev)
{
	return !dev->roce || READ_ONCE(dev->netdev_bound);
}

static bool vrdma_netdev_matches(struct vrdma_dev *dev, struct net_device *ndev)
{
	u8 mac[ETH_ALEN];
	unsigned long flags;

	if (ndev->type != ARPHRD_ETHER || ndev->addr_len != ETH_ALEN)
		return false;
	spin_lock_irqsave(&dev->cfg_lock, flags);
	memcpy(mac, dev->cfg.mac, ETH_ALEN);
	spin_unlock_irqrestore(&dev->cfg_lock, flags);
	return !is_zero_ether_addr(mac) && ether_addr_equal(ndev->dev_addr, mac);
}

/* Called under RTNL. */
static void vrdma_netdev_bind(struct vrdma_dev *dev, struct net_device *ndev)
{
	int ret;

	ret = ib_device_set_netdev(&dev->ib, ndev, VRDMA_PORT);
	if (ret) {
		dev_warn(&dev->vdev->dev, "cannot bind %s to %s: %d\n",
			 netdev_name(ndev), dev_name(&dev->ib.dev), ret);
		return;
	}
	dev->netdev = ndev;
	WRITE_ONCE(dev->netdev_mtu, ndev->mtu);
	WRITE_ONCE(dev->netdev_bound, true);
	dev_info(&dev->vdev->dev, "%s port %u is RoCE v2 on %s\n",
		 dev_name(&dev->ib.dev), VRDMA_PORT, netdev_name(ndev));
	queue_work(system_long_wq, &dev->netdev_work);
}

/* Called under RTNL. The core drops the GIDs of an unregistering netdev. */
static void vrdma_netdev_unbind(struct vrdma_dev *dev)
{
	dev_info(&dev->vdev->dev, "%s: %s unbound, port down\n",
		 dev_name(&dev->ib.dev), netdev_name(dev->netdev));
	WRITE_ONCE(dev->netdev_bound, false);
	ib_device_set_netdev(&dev->ib, NULL, VRDMA_PORT);
	dev->netdev = NULL;
	queue_work(system_long_wq, &dev->netdev_work);
}

static int vrdma_netdev_event(struct notifier_block *nb, unsigned long event,
			      void *ptr)
{
	struct vrdma_dev *dev = container_of(nb, struct vrdma_dev, netdev_nb);
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);

	switch (event) {
	case NETDEV_REGISTER:
	case NETDEV_CHANGEADDR:
		if (!dev->netdev && vrdma_netdev_matches(dev, ndev))
			vrdma_netdev_bind(dev, ndev);
		else if (dev->netdev == ndev && !vrdma_netdev_matches(dev, ndev))
			vrdma_netdev_unbind(dev);
		break;
	case NETDEV_UNREGISTER:
		if (dev->netdev == ndev)
			vrdma_netdev_unbind(dev);
		break;
	case NETDEV_CHANGEMTU:
		if (dev->netdev == ndev)
			WRITE_ONCE(dev->netdev_mtu, ndev->mtu);
		break;
	default:
		break;
	}
	return NOTIFY_DONE;
}

/*
 * After a bind or unbind, outside RTNL: the core's GID table is built from
 * the netdev's addresses at registration and on address events only, so a
 * netdev bound later is rescanned; then the port event.
 */
static void vrdma_netdev_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev,
					     netdev_work);
	struct ib_event ev = { .device = &dev->ib,
			       .element.port_num = VRDMA_PORT };
	bool bound = READ_ONCE(dev->netdev_bound);

	if (!READ_ONCE(dev->ib_registered))
		return;
	if (bound)
		rdma_roce_rescan_device(&dev->ib);
	ev.event = bound && dev->cfg.port_state == IB_PORT_ACTIVE ?
		   IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR;
	ib_dispatch_event(&ev);
}

void vrdma_netdev_init(struct vrdma_dev *dev)
{
	dev->roce = virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_ROCE);
	INIT_WORK(&dev->netdev_work, vrdma_netdev_work);
	dev->netdev_nb.notifier_call = vrdma_netdev_event;
}

/* After ib_register_device(): binds the NIC if it exists already. */
int vrdma_netdev_start(struct vrdma_dev *dev)
{
	int ret;

	if (!dev->roce)
		return 0;
	if (is_zero_ether_addr(dev->cfg.mac))
		dev_warn(&dev->vdev->dev,
			 "RoCE offered without a MAC: the port stays down\n");
	ret = register_netdevice_notifier(&dev->netdev_nb);
	if (ret)
		return ret;
	dev->netdev_nb_registered = true;
	if (!READ_ONCE(dev->netdev_bound))
		dev_info(&dev->vdev->dev,
			 "%s: no netdev with MAC %pM yet, port down until it appears\n",
			 dev_name(&dev->ib.dev), dev->cfg.mac);
	return 0;
}

/* Before ib_unregister_device(): no bind, unbind or port event after it. */
void vrdma_netdev_stop(struct vrdma_dev *dev)
{
	if (!dev->netdev_nb_registered)
		return;
	/* Replays NETDEV_UNREGISTER: the netdev is unbound. */
	unregister_netdevice_notifier(&dev->netdev_nb);
	dev->netdev_nb_registered = false;
	cancel_work_sync(&dev->netdev_work);
}

/* The guest kernel's source GID -> the index of the same GID on the device. */
int vrdma_sgid_to_dev(struct vrdma_dev *dev, const struct ib_gid_attr *attr,
		      u8 *index)
{
	unsigned long flags;
	int ret = -EINVAL;
	u8 i;

	if (!attr || attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;
	spin_lock_irqsave(&dev->cfg_lock, flags);
	for (i = 0; i < dev->cfg.num_gids; i++) {
		if (!memcmp(dev->cfg.gids[i], attr->gid.raw, sizeof(attr->gid.raw))) {
			*index = i;
			ret = 0;
			break;
		}
	}
	spin_unlock_irqrestore(&dev->cfg_lock, flags);
	return ret;
}

/*
 * The way back, for query_qp: the device's index -> the guest kernel's
 * index of its RoCE v2 entry. -ENOENT when the guest has no such entry (the
 * address was removed from the NIC since).
 */
int vrdma_sgid_from_dev(struct vrdma_dev *dev, u8 dev_index, u8 *index)
{
	const struct ib_gid_attr *attr;
	union ib_gid gid;
	unsigned long flags;

	spin_lock_irqsave(&dev->cfg_lock, flags);
	if (dev_index >= dev->cfg.num_gids) {
		spin_unlock_irqrestore(&dev->cfg_lock, flags);
		return -ENOENT;
	}
	memcpy(gid.raw, dev->cfg.gids[dev_index], sizeof(gid.raw));
	spin_unlock_irqrestore(&dev->cfg_lock, flags);

	attr = rdma_find_gid_by_port(&dev->ib, &gid, IB_GID_TYPE_ROCE_UDP_ENCAP,
				     VRDMA_PORT, NULL);
	if (IS_ERR(attr))
		return -ENOENT;
	*index = attr->index;
	rdma_put_gid_attr(attr);
	return 0;
}
