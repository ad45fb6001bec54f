// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * virtio driver glue: binds virtio device 42, reads its config space, sets
 * up the control, event and doorbell queues and registers the RDMA device.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "vrdma.h"

/*
 * Under vhost-user every config read is a round trip to the backend, and
 * virtio-pci reads at most 4 bytes at a time: read the 256 bytes in 4-byte
 * words, once, and retry only if the device changed them meanwhile.
 */
int vrdma_read_config(struct vrdma_dev *dev)
{
	struct virtio_device *vdev = dev->vdev;
	struct virtio_rdma_config *cfg;
	u32 gen, old, off;
	unsigned long flags;

	cfg = kmalloc(sizeof(*cfg), GFP_KERNEL);
	if (!cfg)
		return -ENOMEM;
	gen = vdev->config->generation ? vdev->config->generation(vdev) : 0;
	do {
		old = gen;
		for (off = 0; off < sizeof(*cfg); off += 4)
			vdev->config->get(vdev, off, (u8 *)cfg + off, 4);
		gen = vdev->config->generation ?
			vdev->config->generation(vdev) : 0;
	} while (gen != old);

	if (le32_to_cpu(cfg->abi_version) != VIRTIO_RDMA_ABI_VERSION) {
		dev_err(&vdev->dev, "device ABI version %u, driver knows %u\n",
			le32_to_cpu(cfg->abi_version), VIRTIO_RDMA_ABI_VERSION);
		kfree(cfg);
		return -ENODEV;
	}
	if (cfg->num_gids > VIRTIO_RDMA_MAX_GIDS)
		cfg->num_gids = VIRTIO_RDMA_MAX_GIDS;
	spin_lock_irqsave(&dev->cfg_lock, flags);
	dev->cfg = *cfg;
	spin_unlock_irqrestore(&dev->cfg_lock, flags);
	kfree(cfg);
	return 0;
}

/* Port and GID events: re-read the config, then tell the RDMA core. */
static void vrdma_port_work(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, port_work);
	static const struct {
		u32 type;
		enum ib_event_type ib;
	} map[] = {
		{ VIRTIO_RDMA_EV_PORT_ACTIVE, IB_EVENT_PORT_ACTIVE },
		{ VIRTIO_RDMA_EV_PORT_ERR, IB_EVENT_PORT_ERR },
		{ VIRTIO_RDMA_EV_GID_CHANGE, IB_EVENT_GID_CHANGE },
	};
	struct ib_event ev = { .device = &dev->ib, .element.port_num = VRDMA_PORT };
	bool pending[ARRAY_SIZE(map)];
	u32 i;

	for (i = 0; i < ARRAY_SIZE(map); i++)
		pending[i] = test_and_clear_bit(map[i].type, &dev->port_events);
	if (vrdma_read_config(dev))
		dev_warn(&dev->vdev->dev, "config re-read failed\n");
	if (!READ_ONCE(dev->ib_registered))
		return;
	for (i = 0; i < ARRAY_SIZE(map); i++) {
		if (!pending[i])
			continue;
		ev.event = map[i].ib;
		ib_dispatch_event(&ev);
	}
}

static int vrdma_find_vqs(struct vrdma_dev *dev)
{
	u32 ndb = le32_to_cpu(dev->cfg.num_doorbell_queues), n, i;
	struct virtqueue **vqs;
	vq_callback_t **cbs;
	const char **names;
	int ret = -ENOMEM;

	if (ndb < 1 || ndb > VIRTIO_RDMA_MAX_DOORBELL_QUEUES)
		return -EINVAL;
	/* More doorbell queues than vCPUs buy nothing. */
	ndb = min_t(u32, ndb, num_possible_cpus());
	n = VIRTIO_RDMA_VQ_DOORBELL0 + ndb;
	vqs = kcalloc(n, sizeof(*vqs), GFP_KERNEL);
	cbs = kcalloc(n, sizeof(*cbs), GFP_KERNEL);
	names = kcalloc(n, sizeof(*names), GFP_KERNEL);
	if (!vqs || !cbs || !names)
		goto out;
	cbs[VIRTIO_RDMA_VQ_CTRL] = vrdma_ctrl_done;
	names[VIRTIO_RDMA_VQ_CTRL] = "ctrl";
	cbs[VIRTIO_RDMA_VQ_EVENT] = vrdma_event_cb;
	names[VIRTIO_RDMA_VQ_EVENT] = "event";
	/* Doorbell queues have no callback: used records are reclaimed lazily. */
	for (i = VIRTIO_RDMA_VQ_DOORBELL0; i < n; i++)
		names[i] = "doorbell";

	ret = virtio_find_vqs(dev->vdev, n, vqs, cbs, names, NULL);
	if (ret)
		goto out;
	dev->ctrl_vq = vqs[VIRTIO_RDMA_VQ_CTRL];
	dev->event_vq = vqs[VIRTIO_RDMA_VQ_EVENT];
	ret = vrdma_doorbell_init(dev, vqs + VIRTIO_RDMA_VQ_DOORBELL0, ndb);
out:
	kfree(vqs);
	kfree(cbs);
	kfree(names);
	return ret;
}

/* Device attributes that are not in config space: one command each. */
static int vrdma_query_attrs(struct vrdma_dev *dev)
{
	struct virtio_rdma_req_query_port req = {
		.port_num = cpu_to_le32(VRDMA_PORT),
	};
	int ret;

	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_QUERY_DEVICE, NULL, 0, NULL, 0,
			 &dev->dev_attr, sizeof(dev->dev_attr));
	if (ret)
		return ret;
	return vrdma_exec(dev, VIRTIO_RDMA_CMD_QUERY_PORT, &req, sizeof(req),
			  NULL, 0, &dev->port_attr, sizeof(dev->port_attr));
}

static void vrdma_teardown(struct vrdma_dev *dev)
{
	struct virtio_device *vdev = dev->vdev;

	/* After reset the device owns no buffer of ours. */
	virtio_reset_device(vdev);
	cancel_work_sync(&dev->port_work);
	if (vdev->config->del_vqs)
		vdev->config->del_vqs(vdev);
	vrdma_doorbell_cleanup(dev);
	vrdma_event_cleanup(dev);
	vrdma_ctrl_cleanup(dev);
}

static int vrdma_probe(struct virtio_device *vdev)
{
	struct vrdma_dev *dev;
	int ret;

	dev = ib_alloc_device(vrdma_dev, ib);
	if (!dev)
		return -ENOMEM;
	dev->vdev = vdev;
	vdev->priv = dev;
	spin_lock_init(&dev->cfg_lock);
	spin_lock_init(&dev->event_lock);
	xa_init(&dev->cqs);
	xa_init(&dev->qps);
	xa_init(&dev->srqs);
	INIT_WORK(&dev->port_work, vrdma_port_work);

	ret = vrdma_read_config(dev);
	if (ret)
		goto err_free;
	ret = vrdma_ctrl_init(dev);
	if (ret)
		goto err_free;
	ret = vrdma_find_vqs(dev);
	if (ret)
		goto err_teardown;
	ret = vrdma_event_init(dev);
	if (ret)
		goto err_teardown;
	virtio_device_ready(vdev);
	/* The event buffers were added before DRIVER_OK: announce them now. */
	virtqueue_kick(dev->event_vq);

	ret = vrdma_query_attrs(dev);
	if (ret)
		goto err_teardown;
	ret = vrdma_register_ib(dev);
	if (ret)
		goto err_teardown;
	return 0;

err_teardown:
	vrdma_teardown(dev);
err_free:
	ib_dealloc_device(&dev->ib);
	vdev->priv = NULL;
	return ret;
}

static void vrdma_remove(struct virtio_device *vdev)
{
	struct vrdma_dev *dev = vdev->priv;

	/* Waits until every process has closed its uverbs context. */
	vrdma_unregister_ib(dev);
	vrdma_teardown(dev);
	ib_dealloc_device(&dev->ib);
}

/*
 * Event-index notification suppression saves little here: control commands
 * are synchronous and a busy device already suppresses doorbell kicks with
 * VRING_USED_F_NO_NOTIFY. It is off by default because a device that does
 * not republish avail_event after serving a queue gets no further kicks on
 * it (seen with the daemon's control queue: the second command hung).
 */
static bool event_idx;
module_param(event_idx, bool, 0444);
MODULE_PARM_DESC(event_idx, "negotiate VIRTIO_RING_F_EVENT_IDX (default off)");

static int vrdma_validate(struct virtio_device *vdev)
{
	if (!virtio_has_feature(vdev, VIRTIO_F_VERSION_1))
		return -ENODEV;
	if (!event_idx)
		__virtio_clear_bit(vdev, VIRTIO_RING_F_EVENT_IDX);
	if (!vdev->config->get) {
		dev_err(&vdev->dev, "config access disabled\n");
		return -EINVAL;
	}
	return 0;
}

static const unsigned int vrdma_features[] = {
	VIRTIO_RDMA_F_SRQ,
	VIRTIO_RDMA_F_UD,
	VIRTIO_RDMA_F_ATOMIC,
};

static const struct virtio_device_id vrdma_id_table[] = {
	{ VIRTIO_ID_RDMA, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static struct virtio_driver vrdma_driver = {
	.driver.name = KBUILD_MODNAME,
	.driver.owner = THIS_MODULE,
	.id_table = vrdma_id_table,
	.feature_table = vrdma_features,
	.feature_table_size = ARRAY_SIZE(vrdma_features),
	.validate = vrdma_validate,
	.probe = vrdma_probe,
	.remove = vrdma_remove,
};

module_virtio_driver(vrdma_driver);
MODULE_DEVICE_TABLE(virtio, vrdma_id_table);
MODULE_DESCRIPTION("virtio-rdma (vhost-rdma) guest driver, Soft-RoCE user ABI");
MODULE_LICENSE("Dual BSD/GPL");
