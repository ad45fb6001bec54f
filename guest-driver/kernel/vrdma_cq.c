// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues: a ring of struct ib_uverbs_wc that the device produces
 * and librxe consumes with no system call, or, for a kernel CQ (no udata),
 * the driver's poll_cq (vrdma_kverbs.c).
 */
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

static_assert(sizeof(struct ib_uverbs_wc) <= VRDMA_CQE_SIZE, "CQE fits");

static int vrdma_notify_cmd(struct vrdma_dev *dev, struct vrdma_cq *cq,
			    bool solicited)
{
	struct virtio_rdma_req_notify_cq req = {
		.cq_handle = cpu_to_le32(cq->handle),
		.flags = cpu_to_le32(solicited ? VIRTIO_RDMA_NOTIFY_SOLICITED :
						 VIRTIO_RDMA_NOTIFY_NEXT_COMP),
	};

	return vrdma_exec(dev, VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ, &req,
			  sizeof(req), NULL, 0, NULL, 0);
}

/*
 * A kernel CQ armed in atomic context (ib_poll_handler() of IB_POLL_SOFTIRQ
 * CQs, nvme-rdma's and nvmet-rdma's): the CQ_ARM doorbell is asynchronous,
 * so a CQE the device writes after the consumer's last look at the ring
 * but before it reads the doorbell raises no event, and the consumer, which
 * stopped polling, would wait forever. Here the command arms the device
 * for certain; a CQE that came before it is seen in the ring, and the
 * consumer is called as an event would have.
 */
static void vrdma_cq_arm_work(struct work_struct *work)
{
	struct vrdma_cq *cq = container_of(work, struct vrdma_cq, arm_work);
	struct vrdma_dev *dev = to_vdev(cq->ibcq.device);
	int ret;

	ret = vrdma_notify_cmd(dev, cq, READ_ONCE(cq->arm_solicited));
	/*
	 * A failed arm makes the consumer poll (and arm) again, except on a
	 * dead device: that would spin until the fatal work unregisters it.
	 */
	if ((!vrdma_kcq_empty(cq) || (ret && !vrdma_dead(dev))) &&
	    cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

int vrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);
	struct virtio_rdma_req_create_cq req = {};
	struct virtio_rdma_resp_create_cq resp;
	struct rxe_create_cq_resp uresp = {};
	__le64 *pages;
	int ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > le32_to_cpu(dev->cfg.max_cqe))
		return -EINVAL;
	if (udata && udata->outlen < sizeof(uresp))
		return -EINVAL;
	cq->kernel = !udata;
	spin_lock_init(&cq->lock);
	INIT_LIST_HEAD(&cq->sw_wcs);
	INIT_WORK(&cq->arm_work, vrdma_cq_arm_work);

	ret = vrdma_ring_alloc(&cq->ring, attr->cqe, VRDMA_CQE_SIZE);
	if (ret)
		return ret;
	pages = kvmalloc_array(cq->ring.npages, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto err_ring;
	}
	vrdma_ring_fill_pages(&cq->ring, pages);
	vrdma_ring_desc(&cq->ring, &req.ring);
	req.cqe = cpu_to_le32(attr->cqe);
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_CREATE_CQ, &req, sizeof(req),
			 pages, cq->ring.npages, &resp, sizeof(resp));
	kvfree(pages);
	if (ret)
		goto err_ring;
	cq->handle = le32_to_cpu(resp.cq_handle);
	/* Never more than the ring holds, whatever the device answers. */
	ibcq->cqe = min_t(u32, le32_to_cpu(resp.cqe),
			  (1u << cq->ring.log2_num_elem) - 1);

	if (udata) {
		ret = vrdma_ring_insert(&cq->ring, udata, &uresp.mi);
		if (ret)
			goto err_destroy;
	}
	ret = vrdma_publish(dev, &dev->cqs, cq->handle, cq);
	if (ret)
		goto err_destroy;
	if (udata) {
		ret = ib_copy_to_udata(udata, &uresp, sizeof(uresp));
		if (ret)
			goto err_unpublish;
	}
	return 0;

err_unpublish:
	vrdma_unpublish(dev, &dev->cqs, cq->handle);
err_destroy:
	if (!vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_CQ, cq->handle))
		return ret;
err_ring:
	vrdma_ring_free(&cq->ring);
	return ret;
}

int vrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);

	vrdma_unpublish(dev, &dev->cqs, cq->handle);
	cancel_work_sync(&cq->arm_work);
	if (vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_CQ, cq->handle))
		vrdma_ring_free(&cq->ring);
	vrdma_kcq_free(cq);
	return 0;
}

/*
 * Arming goes through the control queue when the caller may sleep (always,
 * for uverbs; for kernel CQs, e.g. ib_cq_poll_work(), when preemptible):
 * when the command returns the device is armed, so a completion written
 * after the caller's last poll raises an event. A CQ_ARM doorbell is
 * asynchronous and would leave a window in which such a completion is
 * missed; it is used only from atomic context, where a kernel CQ's arm is
 * then made certain by arm_work.
 */
int vrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct vrdma_dev *dev = to_vdev(ibcq->device);
	struct vrdma_cq *cq = to_vcq(ibcq);
	bool solicited = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED;
	bool may_sleep = cq->kernel ? preemptible() :
				      in_task() && !irqs_disabled();
	int ret = 0;

	if (may_sleep) {
		ret = vrdma_notify_cmd(dev, cq, solicited);
		if (ret)
			return ret;
	} else if (cq->kernel) {
		vrdma_ring_doorbell(dev, cq->handle,
				    solicited ? VIRTIO_RDMA_DB_CQ_ARM_SOLICITED :
						VIRTIO_RDMA_DB_CQ_ARM,
				    false);
		WRITE_ONCE(cq->arm_solicited, solicited);
		queue_work(vrdma_wq, &cq->arm_work);
	} else if (!vrdma_ring_doorbell(dev, cq->handle,
					solicited ? VIRTIO_RDMA_DB_CQ_ARM_SOLICITED :
						    VIRTIO_RDMA_DB_CQ_ARM,
					false)) {
		atomic_inc(&dev->db_dropped);
		dev_warn_ratelimited(&dev->vdev->dev,
				     "doorbell queues full: CQ arm dropped\n");
		/* Make the caller poll again rather than wait forever. */
		return 1;
	}
	if (flags & IB_CQ_REPORT_MISSED_EVENTS) {
		if (cq->kernel ? !vrdma_kcq_empty(cq) :
				 !vrdma_ring_empty(&cq->ring))
			return 1;
	}
	return 0;
}

/* User CQs are polled by librxe from the shared ring, never through here. */
int vrdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct vrdma_cq *cq = to_vcq(ibcq);

	if (!cq->kernel)
		return -EOPNOTSUPP;
	return vrdma_kpoll_cq(cq, num_entries, wc);
}
