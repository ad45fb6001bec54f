// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared receive queues: one receive ring in librxe's layout. librxe posts
 * to it without a system call (the driver, for a kernel SRQ); the device
 * pulls WQEs as receives complete.
 * Resizing (IB_SRQ_MAX_WR) is not offered by the device.
 */
#include <linux/log2.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

int vrdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibsrq->device);
	struct vrdma_srq *srq = to_vsrq(ibsrq);
	struct ib_srq_attr *a = &init->attr;
	struct virtio_rdma_req_create_srq req = {};
	struct virtio_rdma_resp_create_srq resp;
	struct rxe_create_srq_resp uresp = {};
	__le64 *pages;
	u32 elem;
	int ret;

	if (!virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_SRQ))
		return -EOPNOTSUPP;
	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (udata && udata->outlen < sizeof(uresp))
		return -EINVAL;
	srq->kernel = !udata;
	spin_lock_init(&srq->lock);
	if (a->max_wr < 1 || a->max_wr > le32_to_cpu(dev->cfg.max_srq_wr) ||
	    a->max_sge > le32_to_cpu(dev->cfg.max_srq_sge) ||
	    a->srq_limit > a->max_wr)
		return -EINVAL;

	elem = roundup_pow_of_two(VIRTIO_RDMA_RECV_WQE_SGE_OFFSET +
				  a->max_sge * sizeof(struct rxe_sge));
	ret = vrdma_ring_alloc(&srq->ring, a->max_wr, elem);
	if (ret)
		return ret;
	pages = kvmalloc_array(srq->ring.npages, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		ret = -ENOMEM;
		goto err_ring;
	}
	vrdma_ring_fill_pages(&srq->ring, pages);
	req.pd_handle = cpu_to_le32(to_vpd(ibsrq->pd)->handle);
	req.max_wr = cpu_to_le32(a->max_wr);
	req.max_sge = cpu_to_le32(a->max_sge);
	req.srq_limit = cpu_to_le32(a->srq_limit);
	vrdma_ring_desc(&srq->ring, &req.ring);
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_CREATE_SRQ, &req, sizeof(req),
			 pages, srq->ring.npages, &resp, sizeof(resp));
	kvfree(pages);
	if (ret)
		goto err_ring;

	srq->handle = le32_to_cpu(resp.srq_handle);
	/* Never more than the ring holds, whatever the device answers. */
	srq->max_wr = min_t(u32, le32_to_cpu(resp.max_wr),
			    (1u << srq->ring.log2_num_elem) - 1);
	srq->max_sge = min_t(u32, le32_to_cpu(resp.max_sge),
			     (elem - VIRTIO_RDMA_RECV_WQE_SGE_OFFSET) /
				     sizeof(struct rxe_sge));
	srq->srq_limit = a->srq_limit;
	a->max_wr = srq->max_wr;
	a->max_sge = srq->max_sge;

	if (udata) {
		ret = vrdma_ring_insert(&srq->ring, udata, &uresp.mi);
		if (ret)
			goto err_destroy;
	}
	uresp.srq_num = srq->handle;
	ret = vrdma_publish(dev, &dev->srqs, srq->handle, srq);
	if (ret)
		goto err_destroy;
	if (udata) {
		ret = ib_copy_to_udata(udata, &uresp, sizeof(uresp));
		if (ret)
			goto err_unpublish;
	}
	return 0;

err_unpublish:
	vrdma_unpublish(dev, &dev->srqs, srq->handle);
err_destroy:
	if (!vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_SRQ,
				   srq->handle))
		return ret;
err_ring:
	vrdma_ring_free(&srq->ring);
	return ret;
}

int vrdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct vrdma_srq *srq = to_vsrq(ibsrq);
	struct virtio_rdma_req_modify_srq req = {
		.srq_handle = cpu_to_le32(srq->handle),
	};
	int ret;

	/* Resizing would need a new ring mapped into the process. */
	if (mask & IB_SRQ_MAX_WR)
		return -EOPNOTSUPP;
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > srq->max_wr)
		return -EINVAL;
	req.attr_mask = cpu_to_le32(VIRTIO_RDMA_SRQ_LIMIT);
	req.srq_limit = cpu_to_le32(attr->srq_limit);
	ret = vrdma_exec(to_vdev(ibsrq->device), VIRTIO_RDMA_CMD_MODIFY_SRQ,
			 &req, sizeof(req), NULL, 0, NULL, 0);
	if (!ret)
		WRITE_ONCE(srq->srq_limit, attr->srq_limit);
	return ret;
}

int vrdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct vrdma_srq *srq = to_vsrq(ibsrq);

	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	/* 0 once the limit event disarmed it (vrdma_event.c). */
	attr->srq_limit = READ_ONCE(srq->srq_limit);
	return 0;
}

int vrdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibsrq->device);
	struct vrdma_srq *srq = to_vsrq(ibsrq);

	vrdma_unpublish(dev, &dev->srqs, srq->handle);
	if (vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_SRQ, srq->handle))
		vrdma_ring_free(&srq->ring);
	return 0;
}

/* librxe writes SRQ WQEs into the ring; the driver does for kernel SRQs. */
int vrdma_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr)
{
	struct vrdma_srq *srq = to_vsrq(ibsrq);

	if (srq->kernel)
		return vrdma_kpost_srq_recv(srq, wr, bad_wr);
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	return 0;
}
