// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protection domains and address handles. An AH's device handle is what
 * librxe (or the driver, for kernel QPs) writes into a UD send WQE's
 * wr.ud.ah_num, so the device never reads an address vector from
 * guest-writable memory.
 *
 * The kernel's connection manager creates and destroys AHs in atomic
 * context (cm_alloc_msg() under a spinlock, cm_free_msg() from a send
 * completion), where a control command cannot be waited for. Such an AH is
 * checked and answered at once and made on the device by a work item
 * (dev->kwork); a send naming it before then waits in the driver
 * (vrdma_kverbs.c). The device's AH (struct vrdma_av) is refcounted apart
 * from the ib_ah for that reason.
 */
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

int vrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrdma_pd *pd = to_vpd(ibpd);
	struct virtio_rdma_resp_create_pd resp;
	int ret;

	ret = vrdma_exec(to_vdev(ibpd->device), VIRTIO_RDMA_CMD_CREATE_PD,
			 NULL, 0, NULL, 0, &resp, sizeof(resp));
	if (ret)
		return ret;
	pd->handle = le32_to_cpu(resp.pd_handle);
	return 0;
}

int vrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);

	/*
	 * AHs of this PD destroyed in atomic context may still be on the
	 * device (dev->kwork): the device refuses a PD that AHs use.
	 */
	if (!udata)
		flush_work(&dev->kwork);
	/* Nothing of the guest's hangs on a PD: a failure only leaks a handle. */
	vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_PD,
			      to_vpd(ibpd)->handle);
	return 0;
}

int vrdma_ah_attr_to_dev(struct vrdma_dev *dev, const struct rdma_ah_attr *attr,
			 struct virtio_rdma_ah_attr *dst)
{
	memset(dst, 0, sizeof(*dst));
	dst->port_num = rdma_ah_get_port_num(attr);
	dst->sl = rdma_ah_get_sl(attr);
	dst->static_rate = rdma_ah_get_static_rate(attr);
	dst->dlid = cpu_to_le16(rdma_ah_get_dlid(attr));
	if (rdma_ah_get_ah_flags(attr) & IB_AH_GRH) {
		const struct ib_global_route *grh = rdma_ah_read_grh(attr);

		memcpy(dst->dgid, grh->dgid.raw, sizeof(dst->dgid));
		dst->flow_label = cpu_to_le32(grh->flow_label);
		dst->sgid_index = grh->sgid_index;
		dst->hop_limit = grh->hop_limit;
		dst->traffic_class = grh->traffic_class;
		dst->is_global = 1;
		/* RoCE: the same GID's index in the device's table. */
		if (dev->roce &&
		    vrdma_sgid_to_dev(dev, grh->sgid_attr, &dst->sgid_index))
			return -EINVAL;
	} else if (dev->roce) {
		return -EINVAL; /* RoCE addresses always carry a GRH */
	}
	if (attr->type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(dst->dmac, attr->roce.dmac, sizeof(dst->dmac));
	return 0;
}

void vrdma_av_get(struct vrdma_av *av)
{
	refcount_inc(&av->ref);
}

/*
 * The last reference destroys the device's AH: at once when the caller may
 * sleep, else from dev->kwork.
 */
void vrdma_av_put(struct vrdma_dev *dev, struct vrdma_av *av, bool may_sleep)
{
	struct vrdma_av_handle *h;
	unsigned long flags;

	if (!refcount_dec_and_test(&av->ref))
		return;
	if (av->handle && may_sleep) {
		vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_AH,
				      av->handle);
	} else if (av->handle && !vrdma_released(dev)) {
		h = kmalloc(sizeof(*h), GFP_ATOMIC);
		if (h) {
			h->handle = av->handle;
			spin_lock_irqsave(&dev->kwork_lock, flags);
			list_add_tail(&h->link, &dev->av_destroy);
			spin_unlock_irqrestore(&dev->kwork_lock, flags);
			queue_work(vrdma_wq, &dev->kwork);
		} else {
			dev_warn_ratelimited(&dev->vdev->dev,
					     "AH %#x leaked on the device\n",
					     av->handle);
		}
	}
	kfree(av);
}

static int vrdma_av_create_now(struct vrdma_dev *dev, struct vrdma_av *av)
{
	struct virtio_rdma_resp_create_ah resp;
	int ret;

	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_CREATE_AH, &av->req,
			 sizeof(av->req), NULL, 0, &resp, sizeof(resp));
	if (!ret && !le32_to_cpu(resp.ah_handle))
		ret = -EIO; /* handles are never 0 */
	if (!ret)
		av->handle = le32_to_cpu(resp.ah_handle);
	av->err = ret;
	smp_store_release(&av->done, true);
	return ret;
}

int vrdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		    struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibah->device);
	struct vrdma_ah *ah = to_vah(ibah);
	bool sleepable = init_attr->flags & RDMA_CREATE_AH_SLEEPABLE;
	struct vrdma_av *av;
	unsigned long flags;
	int ret;

	if (!virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_UD))
		return -EOPNOTSUPP;
	/* Only kernel AHs come from atomic context, and only with the GSI QP. */
	if (!sleepable && (udata || !dev->roce))
		return -EOPNOTSUPP;
	av = kzalloc(sizeof(*av), sleepable ? GFP_KERNEL : GFP_ATOMIC);
	if (!av)
		return -ENOMEM;
	refcount_set(&av->ref, 1);
	INIT_LIST_HEAD(&av->link);
	av->req.pd_handle = cpu_to_le32(to_vpd(ibah->pd)->handle);
	ret = vrdma_ah_attr_to_dev(dev, init_attr->ah_attr, &av->req.attr);
	if (ret)
		goto err_free;
	ah->av = av;

	if (!sleepable) {
		/* The work's reference: it creates the AH, then puts it. */
		vrdma_av_get(av);
		spin_lock_irqsave(&dev->kwork_lock, flags);
		list_add_tail(&av->link, &dev->av_create);
		spin_unlock_irqrestore(&dev->kwork_lock, flags);
		queue_work(vrdma_wq, &dev->kwork);
		return 0;
	}

	ret = vrdma_av_create_now(dev, av);
	if (ret)
		goto err_free;
	if (udata) {
		struct rxe_create_ah_resp uresp = { .ah_num = av->handle };

		ret = ib_copy_to_udata(udata, &uresp,
				       min(udata->outlen, sizeof(uresp)));
		if (ret) {
			vrdma_destroy_handle(dev, VIRTIO_RDMA_CMD_DESTROY_AH,
					     av->handle);
			goto err_free;
		}
	}
	return 0;

err_free:
	kfree(av);
	return ret;
}

int vrdma_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	vrdma_av_put(to_vdev(ibah->device), to_vah(ibah)->av,
		     flags & RDMA_DESTROY_AH_SLEEPABLE);
	return 0;
}

/*
 * dev->kwork: what kernel verbs in atomic context left for process context.
 * AHs are created first, so that the sends waiting for them go out next.
 */
static void vrdma_kwork(struct work_struct *work)
{
	struct vrdma_dev *dev = container_of(work, struct vrdma_dev, kwork);
	struct vrdma_av_handle *h;
	struct vrdma_av *av;
	struct vrdma_qp *qp;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&dev->kwork_lock, flags);
		av = list_first_entry_or_null(&dev->av_create, struct vrdma_av,
					      link);
		if (av)
			list_del_init(&av->link);
		spin_unlock_irqrestore(&dev->kwork_lock, flags);
		if (!av)
			break;
		if (vrdma_av_create_now(dev, av))
			dev_warn_ratelimited(&dev->vdev->dev,
					     "deferred CREATE_AH failed: %d\n",
					     av->err);
		vrdma_av_put(dev, av, true);
	}
	for (;;) {
		spin_lock_irqsave(&dev->kwork_lock, flags);
		qp = list_first_entry_or_null(&dev->kqp_work, struct vrdma_qp,
					      kwork_link);
		if (qp)
			list_del_init(&qp->kwork_link);
		spin_unlock_irqrestore(&dev->kwork_lock, flags);
		if (!qp)
			break;
		vrdma_kqp_flush(dev, qp);
	}
	for (;;) {
		spin_lock_irqsave(&dev->kwork_lock, flags);
		h = list_first_entry_or_null(&dev->av_destroy,
					     struct vrdma_av_handle, link);
		if (h)
			list_del(&h->link);
		spin_unlock_irqrestore(&dev->kwork_lock, flags);
		if (!h)
			break;
		vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_AH,
				      h->handle);
		kfree(h);
	}
}

void vrdma_kwork_init(struct vrdma_dev *dev)
{
	spin_lock_init(&dev->kwork_lock);
	INIT_LIST_HEAD(&dev->av_create);
	INIT_LIST_HEAD(&dev->av_destroy);
	INIT_LIST_HEAD(&dev->kqp_work);
	INIT_WORK(&dev->kwork, vrdma_kwork);
}

/* After ib_unregister_device(): every AH is gone; send what was deferred. */
void vrdma_kwork_flush(struct vrdma_dev *dev)
{
	flush_work(&dev->kwork);
}
