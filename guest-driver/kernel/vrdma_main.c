// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * virtio driver glue: binds virtio device 42, reads its config space, sets
 * up the control, event and doorbell queues and registers the RDMA device.
 *
 * Backend loss (docs/virtio-rdma.md 6.1): the device sets
 * DEVICE_NEEDS_RESET and raises a config interrupt. The driver fails
 * waiting and new commands (-EIO), dispatches IB_EVENT_DEVICE_FATAL,
 * resets the device and unregisters the ib_device (the core disassociates
 * user contexts: they get IBV_EVENT_DEVICE_FATAL and EIO). It then polls
 * the config space until the backend is back and makes a new incarnation:
 * features again, queues, a new ib_device.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/workqueue.h>

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
		/* A RoCE port without its NIC stays down (vrdma_netdev.c). */
		if (map[i].ib == IB_EVENT_PORT_ACTIVE && !vrdma_port_usable(dev))
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
	/* Kernel consumers (docs/virtio-rdma.md 4.8, vrdma_fr.c). */
	dev->kernel_verbs = virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_KERNEL);
	dev->max_fr_pages = dev->kernel_verbs ? vrdma_query_max_fr_pages(dev) : 0;
	if (dev->kernel_verbs && !dev->max_fr_pages) {
		dev_warn(&dev->vdev->dev, "VIRTIO_RDMA_F_KERNEL without fast-registration pages: not used\n");
		dev->kernel_verbs = false;
	}
	return vrdma_exec(dev, VIRTIO_RDMA_CMD_QUERY_PORT, &req, sizeof(req),
			  NULL, 0, &dev->port_attr, sizeof(dev->port_attr));
}

static void vrdma_teardown(struct vrdma_dev *dev)
{
	struct virtio_device *vdev = dev->vdev;

	/* After reset the device owns no buffer of ours. */
	virtio_reset_device(vdev);
	smp_store_release(&dev->released, true);
	cancel_work_sync(&dev->port_work);
	cancel_work_sync(&dev->kwork);
	if (vdev->config->del_vqs)
		vdev->config->del_vqs(vdev);
	vrdma_doorbell_cleanup(dev);
	vrdma_event_cleanup(dev);
	vrdma_ctrl_cleanup(dev);
}

/*
 * Makes one incarnation: config, queues, DRIVER_OK, the two queries, the
 * ib_device. The device is past FEATURES_OK. Called with vv->lock held.
 */
static int vrdma_start(struct vrdma_virtio *vv)
{
	struct virtio_device *vdev = vv->vdev;
	struct vrdma_dev *dev;
	int ret;

	dev = ib_alloc_device(vrdma_dev, ib);
	if (!dev)
		return -ENOMEM;
	dev->vdev = vdev;
	dev->vv = vv;
	spin_lock_init(&dev->cfg_lock);
	spin_lock_init(&dev->event_lock);
	xa_init(&dev->cqs);
	xa_init(&dev->qps);
	xa_init(&dev->srqs);
	INIT_WORK(&dev->port_work, vrdma_port_work);
	vrdma_kwork_init(dev);
	vrdma_netdev_init(dev);

	ret = vrdma_read_config(dev);
	if (ret)
		goto err_free;
	ret = vrdma_ctrl_init(dev);
	if (ret)
		goto err_free;
	/* Queue callbacks find the incarnation through vv. */
	WRITE_ONCE(vv->dev, dev);
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
	WRITE_ONCE(vv->dev, NULL);
err_free:
	vrdma_ctrl_cleanup(dev);
	ib_dealloc_device(&dev->ib);
	return ret;
}

/* Takes an incarnation down for good. Called with vv->lock held. */
static void vrdma_destroy(struct vrdma_dev *dev)
{
	struct vrdma_virtio *vv = dev->vv;

	/*
	 * With a live device the objects of user contexts are destroyed
	 * with commands; after a reset (backend lost) without.
	 */
	vrdma_unregister_ib(dev);
	vrdma_teardown(dev);
	WRITE_ONCE(vv->dev, NULL);
	ib_dealloc_device(&dev->ib);
}

/*
 * DEVICE_NEEDS_RESET: the backend went away and with it every object of
 * ours. Returns true when the device is dead (and marks it so): commands
 * and doorbells fail with -EIO from then on.
 */
bool vrdma_check_dead(struct vrdma_dev *dev)
{
	if (vrdma_dead(dev))
		return true;
	if (!(dev->vdev->config->get_status(dev->vdev) &
	      VIRTIO_CONFIG_S_NEEDS_RESET))
		return false;
	WRITE_ONCE(dev->dead, true);
	return true;
}

/*
 * Config-change interrupt (hard IRQ, under the virtio core's config lock).
 * Port and GID changes come as events, so only DEVICE_NEEDS_RESET matters
 * here; anything else is ignored. Fail what waits, recover in a work.
 */
static void vrdma_config_changed(struct virtio_device *vdev)
{
	struct vrdma_virtio *vv = vdev->priv;
	struct vrdma_dev *dev = READ_ONCE(vv->dev);

	if (!dev || !vrdma_check_dead(dev))
		return;
	complete(&dev->ctrl_done);
	queue_work(system_long_wq, &vv->fatal_work);
}

/* How often a driver whose device died looks whether the backend is back. */
#define VRDMA_REVIVE_POLL (HZ / 2)

static void vrdma_fatal_work(struct work_struct *work)
{
	struct vrdma_virtio *vv = container_of(work, struct vrdma_virtio,
					       fatal_work);
	struct virtio_device *vdev = vv->vdev;
	struct vrdma_dev *dev;

	mutex_lock(&vv->lock);
	dev = vv->dev;
	if (vv->removing || !dev || !vrdma_dead(dev))
		goto out;
	dev_err(&vdev->dev, "device needs reset (backend lost): %s is dead\n",
		dev_name(&dev->ib.dev));
	if (dev->ib_registered) {
		struct ib_event ev = {
			.device = &dev->ib,
			.event = IB_EVENT_DEVICE_FATAL,
			.element.port_num = VRDMA_PORT,
		};

		ib_dispatch_event(&ev);
	}
	/*
	 * Reset before the core destroys the user contexts' objects: then the
	 * device holds none of their pages, so they are freed without a
	 * command (vrdma_destroy_or_keep()).
	 */
	virtio_reset_device(vdev);
	smp_store_release(&dev->released, true);
	vrdma_destroy(dev);
	vv->revive_failed_logged = false;
	queue_delayed_work(system_long_wq, &vv->revive_work, VRDMA_REVIVE_POLL);
out:
	mutex_unlock(&vv->lock);
}

/* Without a backend the config space reads as zeros (abi_version 0). */
static bool vrdma_backend_present(struct virtio_device *vdev)
{
	__le32 v = 0;

	vdev->config->get(vdev, offsetof(struct virtio_rdma_config, abi_version),
			  &v, sizeof(v));
	return le32_to_cpu(v) != 0;
}

/* The status dance of the virtio core's probe, with the features it chose. */
static int vrdma_renegotiate(struct virtio_device *vdev)
{
	int ret;

	virtio_reset_device(vdev);
	virtio_add_status(vdev, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	virtio_add_status(vdev, VIRTIO_CONFIG_S_DRIVER);
	ret = vdev->config->finalize_features(vdev);
	if (ret)
		return ret;
	virtio_add_status(vdev, VIRTIO_CONFIG_S_FEATURES_OK);
	if (!(vdev->config->get_status(vdev) & VIRTIO_CONFIG_S_FEATURES_OK))
		return -ENODEV;
	return 0;
}

static void vrdma_revive_work(struct work_struct *work)
{
	struct vrdma_virtio *vv = container_of(to_delayed_work(work),
					       struct vrdma_virtio,
					       revive_work);
	struct virtio_device *vdev = vv->vdev;
	int ret;

	mutex_lock(&vv->lock);
	if (vv->removing || vv->dev)
		goto out;
	if (!vrdma_backend_present(vdev))
		goto again;
	ret = vrdma_renegotiate(vdev);
	if (!ret)
		ret = vrdma_start(vv);
	if (ret) {
		virtio_reset_device(vdev);
		if (!vv->revive_failed_logged)
			dev_warn(&vdev->dev, "backend is back, re-initialisation failed (%d): retrying\n",
				 ret);
		vv->revive_failed_logged = true;
		goto again;
	}
	dev_info(&vdev->dev, "backend is back: %s registered\n",
		 dev_name(&vv->dev->ib.dev));
	goto out;
again:
	queue_delayed_work(system_long_wq, &vv->revive_work, VRDMA_REVIVE_POLL);
out:
	mutex_unlock(&vv->lock);
}

static int vrdma_probe(struct virtio_device *vdev)
{
	struct vrdma_virtio *vv;
	int ret;

	vv = kzalloc(sizeof(*vv), GFP_KERNEL);
	if (!vv)
		return -ENOMEM;
	vv->vdev = vdev;
	mutex_init(&vv->lock);
	INIT_WORK(&vv->fatal_work, vrdma_fatal_work);
	INIT_DELAYED_WORK(&vv->revive_work, vrdma_revive_work);
	vdev->priv = vv;

	mutex_lock(&vv->lock);
	ret = vrdma_start(vv);
	mutex_unlock(&vv->lock);
	if (ret) {
		vdev->priv = NULL;
		kfree(vv);
	}
	return ret;
}

static void vrdma_remove(struct virtio_device *vdev)
{
	struct vrdma_virtio *vv = vdev->priv;

	/* The core disabled config interrupts: no new fatal_work comes. */
	mutex_lock(&vv->lock);
	vv->removing = true;
	mutex_unlock(&vv->lock);
	cancel_work_sync(&vv->fatal_work);
	cancel_delayed_work_sync(&vv->revive_work);

	mutex_lock(&vv->lock);
	if (vv->dev)
		vrdma_destroy(vv->dev); /* disassociates open user contexts */
	else
		virtio_reset_device(vdev);
	mutex_unlock(&vv->lock);
	vdev->priv = NULL;
	kfree(vv);
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
	VIRTIO_RDMA_F_ROCE,
	VIRTIO_RDMA_F_MW,
	VIRTIO_RDMA_F_KERNEL,
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
	.config_changed = vrdma_config_changed,
};

/*
 * The work kernel consumers may wait for (dev->kwork, a kernel CQ's
 * arm_work): storage ULPs flush it from their own WQ_MEM_RECLAIM
 * workqueues (nvmet-rdma destroys its QPs from nvmet-wq), which the kernel
 * allows only when the flushed work runs on a WQ_MEM_RECLAIM queue too.
 */
struct workqueue_struct *vrdma_wq;

static int __init vrdma_init(void)
{
	int ret;

	vrdma_wq = alloc_workqueue("virtio_rdma", WQ_MEM_RECLAIM | WQ_HIGHPRI, 0);
	if (!vrdma_wq)
		return -ENOMEM;
	ret = register_virtio_driver(&vrdma_driver);
	if (ret)
		destroy_workqueue(vrdma_wq);
	return ret;
}

static void __exit vrdma_exit(void)
{
	unregister_virtio_driver(&vrdma_driver);
	destroy_workqueue(vrdma_wq);
}

module_init(vrdma_init);
module_exit(vrdma_exit);
MODULE_DEVICE_TABLE(virtio, vrdma_id_table);
MODULE_DESCRIPTION("virtio-rdma (vhost-rdma) guest driver, Soft-RoCE user ABI");
MODULE_LICENSE("Dual BSD/GPL");
