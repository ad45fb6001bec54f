// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs: an SQ ring and (without SRQ) an RQ ring in librxe's layout,
 * created, modified and queried through the control queue. For a user QP
 * librxe writes WQEs into the rings itself; its post_send system call with
 * no work requests becomes an SQ doorbell, and receives need no call at all
 * (the device pulls receive WQEs, docs/virtio-rdma.md 7.3). For a kernel QP
 * (no udata) the driver writes them (vrdma_kverbs.c). The GSI QP (QP1, the
 * MAD layer's, RoCE only) is a kernel QP of type VIRTIO_RDMA_QPT_GSI. With
 * VIRTIO_RDMA_F_KERNEL a kernel RC/UC QP is created with
 * VIRTIO_RDMA_QP_F_KERNEL (docs/virtio-rdma.md 4.8): its SGEs may name
 * guest-physical memory with the local DMA lkey. A QP whose rings user
 * space maps never gets the flag.
 */
#include <linux/log2.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

#define VRDMA_SGE_SIZE sizeof(struct rxe_sge)

static u32 vrdma_sq_elem_size(const struct ib_qp_cap *cap)
{
	return roundup_pow_of_two(VIRTIO_RDMA_SEND_WQE_SGE_OFFSET +
				  max_t(u32, cap->max_send_sge * VRDMA_SGE_SIZE,
					cap->max_inline_data));
}

static u32 vrdma_rq_elem_size(u32 max_sge)
{
	return roundup_pow_of_two(VIRTIO_RDMA_RECV_WQE_SGE_OFFSET +
				  max_sge * VRDMA_SGE_SIZE);
}

/* Limits from the device's config (already this VM's quotas). */
static int vrdma_qp_chk_init(struct vrdma_dev *dev,
			     const struct ib_qp_init_attr *init)
{
	const struct ib_qp_cap *cap = &init->cap;
	const struct virtio_rdma_config *cfg = &dev->cfg;

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
		break;
	case IB_QPT_UD:
		if (!virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_UD))
			return -EOPNOTSUPP;
		break;
	case IB_QPT_GSI:
		/* The MAD layer's QP1, on a RoCE port only (4.6). */
		if (!dev->roce || init->srq)
			return -EOPNOTSUPP;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags)
		return -EOPNOTSUPP;
	if (cap->max_send_wr > le32_to_cpu(cfg->max_qp_wr) ||
	    cap->max_send_sge > le32_to_cpu(cfg->max_send_sge) ||
	    cap->max_inline_data > le32_to_cpu(cfg->max_inline_data))
		return -EINVAL;
	if (!init->srq &&
	    (cap->max_recv_wr > le32_to_cpu(cfg->max_qp_wr) ||
	     cap->max_recv_sge > le32_to_cpu(cfg->max_recv_sge)))
		return -EINVAL;
	return 0;
}

static void vrdma_cap_to_dev(const struct ib_qp_cap *cap,
			     struct virtio_rdma_qp_cap *dst)
{
	dst->max_send_wr = cpu_to_le32(cap->max_send_wr);
	dst->max_recv_wr = cpu_to_le32(cap->max_recv_wr);
	dst->max_send_sge = cpu_to_le32(cap->max_send_sge);
	dst->max_recv_sge = cpu_to_le32(cap->max_recv_sge);
	dst->max_inline_data = cpu_to_le32(cap->max_inline_data);
	dst->reserved = 0;
}

static void vrdma_cap_from_dev(const struct virtio_rdma_qp_cap *src,
			       struct ib_qp_cap *cap)
{
	cap->max_send_wr = le32_to_cpu(src->max_send_wr);
	cap->max_recv_wr = le32_to_cpu(src->max_recv_wr);
	cap->max_send_sge = le32_to_cpu(src->max_send_sge);
	cap->max_recv_sge = le32_to_cpu(src->max_recv_sge);
	cap->max_inline_data = le32_to_cpu(src->max_inline_data);
}

/*
 * What librxe is told: the device's answer, capped by what the rings hold
 * (a device that rounds up must not make librxe overrun a slot).
 */
static void vrdma_cap_clamp(struct vrdma_qp *qp, struct ib_qp_cap *cap)
{
	u32 sq_room = (1u << qp->sq.log2_elem_size) -
		      VIRTIO_RDMA_SEND_WQE_SGE_OFFSET;

	cap->max_send_wr = min_t(u32, cap->max_send_wr,
				 (1u << qp->sq.log2_num_elem) - 1);
	cap->max_send_sge = min_t(u32, cap->max_send_sge,
				  sq_room / VRDMA_SGE_SIZE);
	cap->max_inline_data = min_t(u32, cap->max_inline_data, sq_room);
	if (qp->has_srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
		return;
	}
	cap->max_recv_wr = min_t(u32, cap->max_recv_wr,
				 (1u << qp->rq.log2_num_elem) - 1);
	cap->max_recv_sge = min_t(u32, cap->max_recv_sge,
				  ((1u << qp->rq.log2_elem_size) -
				   VIRTIO_RDMA_RECV_WQE_SGE_OFFSET) /
					  VRDMA_SGE_SIZE);
}

static int vrdma_qp_alloc_rings(struct vrdma_qp *qp,
				const struct ib_qp_init_attr *init)
{
	int ret;

	ret = vrdma_ring_alloc(&qp->sq, init->cap.max_send_wr,
			       vrdma_sq_elem_size(&init->cap));
	if (ret)
		return ret;
	if (init->srq)
		return 0;
	ret = vrdma_ring_alloc(&qp->rq, init->cap.max_recv_wr,
			       vrdma_rq_elem_size(init->cap.max_recv_sge));
	if (ret)
		vrdma_ring_free(&qp->sq);
	return ret;
}

static void vrdma_qp_free_rings(struct vrdma_qp *qp)
{
	vrdma_ring_free(&qp->sq);
	vrdma_ring_free(&qp->rq);
}

static int vrdma_qp_create_on_dev(struct vrdma_dev *dev, struct vrdma_qp *qp,
				  const struct ib_qp_init_attr *init,
				  struct virtio_rdma_resp_create_qp *resp)
{
	struct virtio_rdma_req_create_qp req = {};
	u32 npages = qp->sq.npages + qp->rq.npages;
	__le64 *pages;
	int ret;

	req.pd_handle = cpu_to_le32(to_vpd(qp->ibqp.pd)->handle);
	req.send_cq_handle = cpu_to_le32(to_vcq(init->send_cq)->handle);
	req.recv_cq_handle = cpu_to_le32(to_vcq(init->recv_cq)->handle);
	req.srq_handle = cpu_to_le32(init->srq ? to_vsrq(init->srq)->handle : 0);
	/* IB_QPT_* == IBV_QPT_* for RC/UC/UD; IB_QPT_GSI is 1 as in the ABI. */
	req.qp_type = init->qp_type == IB_QPT_GSI ? VIRTIO_RDMA_QPT_GSI :
						     init->qp_type;
	req.sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	if (qp->local_dma && init->qp_type != IB_QPT_GSI)
		req.flags = VIRTIO_RDMA_QP_F_KERNEL;
	vrdma_cap_to_dev(&init->cap, &req.cap);
	vrdma_ring_desc(&qp->sq, &req.sq);
	if (!init->srq)
		vrdma_ring_desc(&qp->rq, &req.rq);

	pages = kvmalloc_array(npages, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	vrdma_ring_fill_pages(&qp->sq, pages);
	if (!init->srq)
		vrdma_ring_fill_pages(&qp->rq, pages + qp->sq.npages);
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_CREATE_QP, &req, sizeof(req),
			 pages, npages, resp, sizeof(*resp));
	kvfree(pages);
	return ret;
}

/* The device's QPN: 24 bits, never 0; 1 is the GSI QP's and only its. */
static int vrdma_check_qpn(const struct ib_qp_init_attr *init, u32 qpn)
{
	if (init->qp_type == IB_QPT_GSI)
		return qpn == VIRTIO_RDMA_GSI_QPN ? 0 : -EIO;
	return qpn && qpn != VIRTIO_RDMA_GSI_QPN && qpn <= 0xffffff ? 0 : -EIO;
}

int vrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct virtio_rdma_resp_create_qp resp;
	struct rxe_create_qp_resp uresp = {};
	int ret;

	if (udata && udata->outlen < sizeof(uresp))
		return -EINVAL;
	/* Only the kernel has a GSI QP. */
	if (udata && init->qp_type == IB_QPT_GSI)
		return -EOPNOTSUPP;
	ret = vrdma_qp_chk_init(dev, init);
	if (ret)
		return ret;
	qp->kernel = !udata;
	qp->local_dma = qp->kernel &&
			(init->qp_type == IB_QPT_GSI ||
			 (dev->kernel_verbs && (init->qp_type == IB_QPT_RC ||
						init->qp_type == IB_QPT_UC)));
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_lock);
	INIT_LIST_HEAD(&qp->pending);
	INIT_LIST_HEAD(&qp->kwork_link);
	ret = vrdma_qp_alloc_rings(qp, init);
	if (ret)
		return ret;
	ret = vrdma_qp_create_on_dev(dev, qp, init, &resp);
	if (ret)
		goto err_rings;

	ibqp->qp_num = le32_to_cpu(resp.qpn);
	ret = vrdma_check_qpn(init, ibqp->qp_num);
	if (ret) {
		dev_err(&dev->vdev->dev, "device answered QPN %#x for a type %d QP\n",
			ibqp->qp_num, init->qp_type);
		goto err_destroy;
	}
	qp->has_srq = init->srq != NULL;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	vrdma_cap_from_dev(&resp.cap, &qp->cap);
	vrdma_cap_clamp(qp, &qp->cap);
	/* uverbs returns init->cap to librxe, which sizes its checks by it. */
	init->cap = qp->cap;

	if (udata) {
		ret = vrdma_ring_insert(&qp->sq, udata, &uresp.sq_mi);
		if (ret)
			goto err_destroy;
		if (!init->srq) {
			ret = vrdma_ring_insert(&qp->rq, udata, &uresp.rq_mi);
			if (ret)
				goto err_destroy;
		}
	}
	ret = vrdma_publish(dev, &dev->qps, ibqp->qp_num, qp);
	if (ret)
		goto err_destroy;
	if (udata) {
		ret = ib_copy_to_udata(udata, &uresp, sizeof(uresp));
		if (ret)
			goto err_unpublish;
	}
	return 0;

err_unpublish:
	vrdma_unpublish(dev, &dev->qps, ibqp->qp_num);
err_destroy:
	if (!vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_QP,
				   le32_to_cpu(resp.qpn)))
		return ret;
err_rings:
	vrdma_qp_free_rings(qp);
	return ret;
}

int vrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);

	vrdma_unpublish(dev, &dev->qps, ibqp->qp_num);
	if (qp->kernel)
		vrdma_kqp_drop_pending(dev, qp);
	if (vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_QP, ibqp->qp_num))
		vrdma_qp_free_rings(qp);
	return 0;
}

/* IB_QP_* attribute bits are the IBV_QP_* values the ABI uses. */
static int vrdma_qp_attr_to_dev(struct vrdma_dev *dev,
				const struct ib_qp_attr *a, int mask,
				struct virtio_rdma_qp_attr *d)
{
	int ret;

	d->attr_mask = cpu_to_le32(mask);
	d->qp_state = a->qp_state;
	d->cur_qp_state = a->cur_qp_state;
	d->path_mtu = a->path_mtu;
	d->path_mig_state = a->path_mig_state;
	d->qkey = cpu_to_le32(a->qkey);
	d->rq_psn = cpu_to_le32(a->rq_psn & 0xffffff);
	d->sq_psn = cpu_to_le32(a->sq_psn & 0xffffff);
	d->dest_qp_num = cpu_to_le32(a->dest_qp_num & 0xffffff);
	d->qp_access_flags = cpu_to_le32(a->qp_access_flags &
					 VIRTIO_RDMA_ACCESS_SUPPORTED);
	d->pkey_index = cpu_to_le16(a->pkey_index);
	d->alt_pkey_index = cpu_to_le16(a->alt_pkey_index);
	d->en_sqd_async_notify = a->en_sqd_async_notify;
	d->sq_draining = 0;
	d->max_rd_atomic = a->max_rd_atomic;
	d->max_dest_rd_atomic = a->max_dest_rd_atomic;
	d->min_rnr_timer = a->min_rnr_timer;
	d->port_num = a->port_num;
	d->timeout = a->timeout;
	d->retry_cnt = a->retry_cnt;
	d->rnr_retry = a->rnr_retry;
	d->alt_port_num = a->alt_port_num;
	d->alt_timeout = a->alt_timeout;
	if (mask & IB_QP_AV) {
		ret = vrdma_ah_attr_to_dev(dev, &a->ah_attr, &d->ah_attr);
		if (ret)
			return ret;
	}
	if (mask & IB_QP_ALT_PATH) {
		ret = vrdma_ah_attr_to_dev(dev, &a->alt_ah_attr,
					   &d->alt_ah_attr);
		if (ret)
			return ret;
	}
	if (mask & IB_QP_CAP)
		vrdma_cap_to_dev(&a->cap, &d->cap);
	return 0;
}

int vrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct virtio_rdma_req_modify_qp *req;
	int ret;

	if (mask & ~VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED)
		return -EOPNOTSUPP;
	/* rxe's librxe sends no driver data with modify_qp. */
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	if (!req)
		return -ENOMEM;
	req->qpn = cpu_to_le32(ibqp->qp_num);
	ret = vrdma_qp_attr_to_dev(dev, attr, mask, &req->attr);
	if (ret)
		goto out;
	/*
	 * The device enforces the state machine; it is the only authority.
	 * (GSI: the MAD layer's RESET->INIT names PKEY_INDEX and QKEY only,
	 * which is what the device asks of QP1, docs/virtio-rdma.md 4.6.)
	 */
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_MODIFY_QP, req, sizeof(*req),
			 NULL, 0, NULL, 0);
	if (ret)
		goto out;
	if (mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IB_QP_STATE)
		WRITE_ONCE(qp->sq_open, attr->qp_state >= IB_QPS_RTS);
out:
	kfree(req);
	return ret;
}

static void vrdma_ah_attr_from_dev(struct ib_device *ibdev,
				   const struct virtio_rdma_ah_attr *s,
				   struct rdma_ah_attr *a)
{
	struct vrdma_dev *dev = to_vdev(ibdev);
	u8 sgid_index = s->sgid_index;
	union ib_gid dgid;

	memset(a, 0, sizeof(*a));
	/* The device's port_num is not trusted as an index into core tables. */
	a->type = rdma_ah_find_type(ibdev, VRDMA_PORT);
	rdma_ah_set_port_num(a, s->port_num);
	rdma_ah_set_sl(a, s->sl);
	rdma_ah_set_static_rate(a, s->static_rate);
	rdma_ah_set_dlid(a, le16_to_cpu(s->dlid));
	if (s->is_global) {
		/*
		 * RoCE: back to the guest kernel's index of the same GID. If the
		 * guest no longer has it (the address left the NIC), the
		 * device's index is all there is to report.
		 */
		if (dev->roce && vrdma_sgid_from_dev(dev, s->sgid_index,
						     &sgid_index))
			dev_warn_ratelimited(&dev->vdev->dev,
					     "query_qp: device GID %u is not in the port's table\n",
					     s->sgid_index);
		memcpy(dgid.raw, s->dgid, sizeof(dgid.raw));
		rdma_ah_set_grh(a, &dgid, le32_to_cpu(s->flow_label),
				sgid_index, s->hop_limit, s->traffic_class);
		if (a->type == RDMA_AH_ATTR_TYPE_ROCE)
			memcpy(a->roce.dmac, s->dmac, ETH_ALEN);
	}
}

int vrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init)
{
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct virtio_rdma_req_query_qp req = {
		.qpn = cpu_to_le32(ibqp->qp_num),
		.attr_mask = cpu_to_le32(mask & VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED),
	};
	struct virtio_rdma_resp_query_qp *resp;
	const struct virtio_rdma_qp_attr *d;
	int ret;

	/* 164 bytes: keep them off the kernel stack. */
	resp = kzalloc(sizeof(*resp), GFP_KERNEL);
	if (!resp)
		return -ENOMEM;
	ret = vrdma_exec(to_vdev(ibqp->device), VIRTIO_RDMA_CMD_QUERY_QP, &req,
			 sizeof(req), NULL, 0, resp, sizeof(*resp));
	if (ret)
		goto out;
	d = &resp->attr;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = d->qp_state;
	attr->cur_qp_state = d->cur_qp_state;
	attr->path_mtu = d->path_mtu;
	attr->path_mig_state = d->path_mig_state;
	attr->qkey = le32_to_cpu(d->qkey);
	attr->rq_psn = le32_to_cpu(d->rq_psn);
	attr->sq_psn = le32_to_cpu(d->sq_psn);
	attr->dest_qp_num = le32_to_cpu(d->dest_qp_num);
	attr->qp_access_flags = le32_to_cpu(d->qp_access_flags);
	attr->pkey_index = le16_to_cpu(d->pkey_index);
	attr->alt_pkey_index = le16_to_cpu(d->alt_pkey_index);
	attr->en_sqd_async_notify = d->en_sqd_async_notify;
	attr->sq_draining = d->sq_draining;
	attr->max_rd_atomic = d->max_rd_atomic;
	attr->max_dest_rd_atomic = d->max_dest_rd_atomic;
	attr->min_rnr_timer = d->min_rnr_timer;
	attr->port_num = d->port_num;
	attr->timeout = d->timeout;
	attr->retry_cnt = d->retry_cnt;
	attr->rnr_retry = d->rnr_retry;
	attr->alt_port_num = d->alt_port_num;
	attr->alt_timeout = d->alt_timeout;
	vrdma_ah_attr_from_dev(ibqp->device, &d->ah_attr, &attr->ah_attr);
	vrdma_ah_attr_from_dev(ibqp->device, &d->alt_ah_attr,
			       &attr->alt_ah_attr);
	/* What librxe was told at create time, not the device's raw caps. */
	attr->cap = qp->cap;

	memset(init, 0, sizeof(*init));
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->qp_type = ibqp->qp_type;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
out:
	kfree(resp);
	return ret;
}

/*
 * User QPs: the SQ doorbell. librxe has already written the WQEs into the
 * SQ ring and advanced its producer index; its post_send system call only
 * says "look again". Depending on the rdma-core version that call carries
 * no work requests or a copy of them; like rxe for user QPs, the copy is
 * ignored: the device reads the ring. Kernel QPs post here
 * (vrdma_kverbs.c).
 */
int vrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr)
{
	struct vrdma_dev *dev = to_vdev(ibqp->device);
	struct vrdma_qp *qp = to_vqp(ibqp);

	if (qp->kernel)
		return vrdma_kpost_send(qp, wr, bad_wr);
	/* The device died (backend lost): the work will never be done. */
	if (vrdma_dead(dev))
		return -EIO;
	/*
	 * Before RTS the send is refused as rxe refuses it: EINVAL from this
	 * doorbell call (librxe has already put the WQE in the ring; the device
	 * takes it once the QP is in RTS, as rxe would).
	 */
	if (!READ_ONCE(qp->sq_open))
		return -EINVAL;
	/* Called from the uverbs write() path: process context. */
	vrdma_ring_doorbell(dev, ibqp->qp_num, VIRTIO_RDMA_DB_SQ, true);
	return 0;
}

/* librxe writes receive WQEs into the RQ ring; the device pulls them. */
int vrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr)
{
	struct vrdma_qp *qp = to_vqp(ibqp);

	if (qp->kernel)
		return vrdma_kpost_recv(qp, wr, bad_wr);
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	return 0;
}
