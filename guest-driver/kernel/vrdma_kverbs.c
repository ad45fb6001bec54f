// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel verbs: QPs, CQs and SRQs created without udata (the MAD layer's
 * GSI QP and its CQ, kernel ULPs). Their rings are the same librxe-layout
 * rings the device reads for user space; here the driver writes the WQEs
 * and consumes the CQEs itself.
 *
 * - post_send/post_recv may run in atomic context: they take only
 *   spinlocks, and a doorbell that finds every doorbell queue full is rung
 *   again from dev->kwork instead of waiting.
 * - Indices: the driver keeps the ring geometry it allocated and never reads
 *   log2_elem_size or index_mask back from the (shared) header; a consumer
 *   index of the SQ/RQ or a producer index of the CQ that the device wrote
 *   outside [0, index_mask] is treated as "no progress".
 * - The GSI QP (docs/virtio-rdma.md 4.6): every SGE carries the local DMA
 *   lkey and a guest-physical address. The ib_device has no DMA device, so
 *   ib_dma_map_*() hands the MAD layer kernel virtual addresses
 *   (ib_uses_virt_dma()); they are translated here.
 * - With VIRTIO_RDMA_F_KERNEL (4.8) the same holds for kernel RC/UC QPs
 *   (qp->local_dma, created with VIRTIO_RDMA_QP_F_KERNEL): an SGE with the
 *   local DMA lkey is translated, one with an MR's lkey (a
 *   fast-registration MR, vrdma_fr.c) passes unchanged; REG_MR, LOCAL_INV
 *   and SEND_WITH_INV are posted, and their completions converted.
 * - A UD/GSI send naming an AH the device has not created yet (made in
 *   atomic context, vrdma_pd_ah.c) waits on qp->pending, as does every later
 *   send of that QP (post order is ring order); dev->kwork writes them once
 *   the AH exists. If its creation failed they complete with an error the
 *   driver makes itself (cq->sw_wcs), without the device.
 */
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

/*
 * Tracing kernel consumers' traffic (not the GSI QP's): the next
 * trace_kverbs send WQEs and CQEs are logged (kernel log, info), then it
 * stops. Written at run time: echo 200 >
 * /sys/module/virtio_rdma/parameters/trace_kverbs.
 */
static atomic_t vrdma_trace_left = ATOMIC_INIT(0);

static int vrdma_trace_set(const char *val, const struct kernel_param *kp)
{
	int n, ret = kstrtoint(val, 0, &n);

	if (ret)
		return ret;
	atomic_set(&vrdma_trace_left, n);
	return 0;
}

static int vrdma_trace_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&vrdma_trace_left));
}

static const struct kernel_param_ops vrdma_trace_ops = {
	.set = vrdma_trace_set,
	.get = vrdma_trace_get,
};
module_param_cb(trace_kverbs, &vrdma_trace_ops, NULL, 0644);
MODULE_PARM_DESC(trace_kverbs, "log this many more kernel send WQEs and CQEs");

static bool vrdma_trace(const struct vrdma_qp *qp)
{
	return qp && qp->ibqp.qp_type != IB_QPT_GSI &&
	       atomic_read(&vrdma_trace_left) > 0 &&
	       atomic_dec_return(&vrdma_trace_left) >= 0;
}

static void vrdma_trace_wqe(struct vrdma_qp *qp, const struct rxe_send_wqe *wqe)
{
	const struct rxe_send_wr *w = &wqe->wr;

	if (!vrdma_trace(qp))
		return;
	dev_info(&to_vdev(qp->ibqp.device)->vdev->dev,
		 "kqp %#x post op %#x flags %#x wr_id %#llx ex %#x rdma %#llx/%#x mw %#llx+%#llx lkey %#x key %#x acc %#x dma len %u nsge %u sge0 %#llx+%u lkey %#x\n",
		 qp->ibqp.qp_num, w->opcode, w->send_flags, w->wr_id,
		 w->ex.invalidate_rkey, w->wr.rdma.remote_addr, w->wr.rdma.rkey,
		 w->wr.mw.addr, w->wr.mw.length, w->wr.mw.mr_lkey, w->wr.mw.rkey,
		 w->wr.mw.access, wqe->dma.length, wqe->dma.num_sge,
		 wqe->dma.num_sge ? wqe->dma.sge[0].addr : 0,
		 wqe->dma.num_sge ? wqe->dma.sge[0].length : 0,
		 wqe->dma.num_sge ? wqe->dma.sge[0].lkey : 0);
}

struct vrdma_pending_wqe {
	struct list_head link;
	struct vrdma_av *av;      /* a reference, or NULL */
	u32 size;
	u8 wqe[];                 /* struct rxe_send_wqe and its SGEs or data */
};

struct vrdma_sw_wc {
	struct list_head link;
	struct ib_wc wc;
};

static void *vrdma_ring_slot(const struct vrdma_ring *ring, u32 index)
{
	return (u8 *)ring->buf + VIRTIO_RDMA_RING_HDR_SIZE +
	       ((size_t)index << ring->log2_elem_size);
}

static u32 vrdma_ring_mask(const struct vrdma_ring *ring)
{
	return (1u << ring->log2_num_elem) - 1;
}

/* Entries the device has not consumed; a bad index counts as a full ring. */
static u32 vrdma_ring_used(const struct vrdma_ring *ring)
{
	u32 mask = vrdma_ring_mask(ring);
	u32 prod = ring->buf->producer_index;
	u32 cons = smp_load_acquire(&ring->buf->consumer_index);

	if (cons > mask)
		return mask;
	return (prod - cons) & mask;
}

/*
 * Kernel virtual address (ib_uses_virt_dma) -> guest-physical. A
 * scatterlist entry the core mapped (sg_virt of its pages) lies in the
 * linear map, where physically contiguous pages are virtually contiguous
 * and the other way round: both ends valid and as far apart physically as
 * virtually make the whole range one physical range. Anything else
 * (vmalloc, stacks, module data) is refused.
 */
int vrdma_kva_to_phys(u64 addr, u32 len, u64 *phys)
{
	void *p = (void *)(uintptr_t)addr;
	void *last = (u8 *)p + (len ? len - 1 : 0);

	if (!virt_addr_valid(p) || !virt_addr_valid(last) ||
	    virt_to_phys(last) - virt_to_phys(p) != (uintptr_t)last - (uintptr_t)p)
		return -EINVAL;
	*phys = virt_to_phys(p);
	return 0;
}

/* qp is NULL for an SRQ, which serves no GSI QP. */
static bool vrdma_is_gsi(const struct vrdma_qp *qp)
{
	return qp && qp->ibqp.qp_type == IB_QPT_GSI;
}

static int vrdma_fill_sges(struct vrdma_qp *qp, struct rxe_sge *dst,
			   const struct ib_sge *sg, int num, u32 *total)
{
	int i, ret;

	*total = 0;
	for (i = 0; i < num; i++) {
		dst[i].addr = sg[i].addr;
		dst[i].length = sg[i].length;
		dst[i].lkey = sg[i].lkey;
		if (vrdma_is_gsi(qp) && sg[i].lkey != VIRTIO_RDMA_LOCAL_DMA_LKEY)
			return -EINVAL;
		if (qp && qp->local_dma &&
		    sg[i].lkey == VIRTIO_RDMA_LOCAL_DMA_LKEY) {
			ret = vrdma_kva_to_phys(sg[i].addr, sg[i].length,
						&dst[i].addr);
			if (ret)
				return ret;
		}
		*total += sg[i].length;
	}
	return 0;
}

static int vrdma_check_send_opcode(struct vrdma_dev *dev, struct vrdma_qp *qp,
				   enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		return 0;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return qp->ibqp.qp_type == IB_QPT_RC ||
		       qp->ibqp.qp_type == IB_QPT_UC ? 0 : -EINVAL;
	case IB_WR_RDMA_READ:
		return qp->ibqp.qp_type == IB_QPT_RC ? 0 : -EINVAL;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		if (!virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_ATOMIC))
			return -EOPNOTSUPP;
		return qp->ibqp.qp_type == IB_QPT_RC ? 0 : -EINVAL;
	/* 4.7 (windows) and 4.8 (fast-registration MRs). */
	case IB_WR_LOCAL_INV:
	case IB_WR_SEND_WITH_INV:
		if (!dev->kernel_verbs &&
		    !virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_MW))
			return -EOPNOTSUPP;
		return qp->ibqp.qp_type == IB_QPT_RC ||
		       qp->ibqp.qp_type == IB_QPT_UC ? 0 : -EINVAL;
	case IB_WR_REG_MR:
		return qp->local_dma && qp->ibqp.qp_type != IB_QPT_GSI ?
		       0 : -EOPNOTSUPP;
	default:
		return -EOPNOTSUPP;
	}
}

/*
 * Builds a send WQE at wqe (a ring slot or a pending buffer of the SQ's
 * element size). IB_WR_* and IB_SEND_* have the values of IBV_WR_* and
 * IBV_SEND_* that librxe writes. *avp gets the UD/GSI AH's device object.
 */
static int vrdma_build_send_wqe(struct vrdma_dev *dev, struct vrdma_qp *qp,
				const struct ib_send_wr *wr,
				struct rxe_send_wqe *wqe, struct vrdma_av **avp)
{
	u32 room = (1u << qp->sq.log2_elem_size) - VIRTIO_RDMA_SEND_WQE_SGE_OFFSET;
	struct rxe_send_wr *w = &wqe->wr;
	u32 total = 0;
	int ret, i;

	*avp = NULL;
	ret = vrdma_check_send_opcode(dev, qp, wr->opcode);
	if (ret)
		return ret;
	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge)
		return -EINVAL;
	memset(wqe, 0, VIRTIO_RDMA_SEND_WQE_SGE_OFFSET);
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags & (IB_SEND_FENCE | IB_SEND_SIGNALED |
					  IB_SEND_SOLICITED | IB_SEND_INLINE);
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		w->ex.imm_data = wr->ex.imm_data;
	if (wr->opcode == IB_WR_SEND_WITH_INV ||
	    wr->opcode == IB_WR_LOCAL_INV)
		w->ex.invalidate_rkey = wr->ex.invalidate_rkey;

	switch (qp->ibqp.qp_type) {
	case IB_QPT_UD:
	case IB_QPT_GSI: {
		const struct ib_ud_wr *ud = ud_wr(wr);

		if (!ud->ah)
			return -EINVAL;
		*avp = to_vah(ud->ah)->av;
		w->wr.ud.remote_qpn = ud->remote_qpn & 0xffffff;
		/* Bit 31 set: the QP's own Q_Key (IB spec, C10-15). */
		if (vrdma_is_gsi(qp))
			w->wr.ud.remote_qkey = VIRTIO_RDMA_GSI_QKEY;
		else
			w->wr.ud.remote_qkey = (ud->remote_qkey & 0x80000000) ?
					       qp->qkey : ud->remote_qkey;
		w->wr.ud.pkey_index = ud->pkey_index;
		/* ah_num is written when the AH exists on the device. */
		break;
	}
	default:
		/* Work requests of their own: no SGEs, no data. */
		if (wr->opcode == IB_WR_REG_MR || wr->opcode == IB_WR_LOCAL_INV) {
			if (wr->num_sge)
				return -EINVAL;
			if (wr->opcode == IB_WR_REG_MR) {
				w->send_flags &= ~IB_SEND_INLINE;
				return vrdma_fr_reg_wqe(reg_wr(wr), w);
			}
			return 0;
		}
		if (wr->opcode == IB_WR_ATOMIC_CMP_AND_SWP ||
		    wr->opcode == IB_WR_ATOMIC_FETCH_AND_ADD) {
			const struct ib_atomic_wr *a = atomic_wr(wr);

			w->wr.atomic.remote_addr = a->remote_addr;
			w->wr.atomic.compare_add = a->compare_add;
			w->wr.atomic.swap = a->swap;
			w->wr.atomic.rkey = a->rkey;
		} else if (wr->opcode != IB_WR_SEND &&
			   wr->opcode != IB_WR_SEND_WITH_IMM &&
			   wr->opcode != IB_WR_SEND_WITH_INV) {
			w->wr.rdma.remote_addr = rdma_wr(wr)->remote_addr;
			w->wr.rdma.rkey = rdma_wr(wr)->rkey;
		}
		break;
	}

	if (wr->send_flags & IB_SEND_INLINE) {
		u8 *p = wqe->dma.inline_data;

		for (i = 0; i < wr->num_sge; i++) {
			if (total + wr->sg_list[i].length > qp->cap.max_inline_data ||
			    total + wr->sg_list[i].length > room)
				return -EINVAL;
			/* Kernel consumers' addresses are kernel virtual. */
			memcpy(p + total, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			total += wr->sg_list[i].length;
		}
	} else {
		ret = vrdma_fill_sges(qp, wqe->dma.sge, wr->sg_list,
				      wr->num_sge, &total);
		if (ret)
			return ret;
	}
	wqe->dma.length = total;
	wqe->dma.resid = total;
	wqe->dma.num_sge = wr->num_sge;
	return 0;
}

static void vrdma_kqp_queue_work(struct vrdma_dev *dev, struct vrdma_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->kwork_lock, flags);
	if (!qp->dying && list_empty(&qp->kwork_link))
		list_add_tail(&qp->kwork_link, &dev->kqp_work);
	spin_unlock_irqrestore(&dev->kwork_lock, flags);
	queue_work(vrdma_wq, &dev->kwork);
}

/* The SQ doorbell from any context; owed to dev->kwork if it cannot go. */
static void vrdma_kqp_doorbell(struct vrdma_dev *dev, struct vrdma_qp *qp)
{
	unsigned long flags;

	if (vrdma_ring_doorbell(dev, qp->ibqp.qp_num, VIRTIO_RDMA_DB_SQ, false))
		return;
	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->db_owed = true;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	vrdma_kqp_queue_work(dev, qp);
}

int vrdma_kpost_send(struct vrdma_qp *qp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr)
{
	struct vrdma_dev *dev = to_vdev(qp->ibqp.device);
	u32 elem = 1u << qp->sq.log2_elem_size;
	u32 mask = vrdma_ring_mask(&qp->sq);
	bool posted = false, defer = false;
	struct vrdma_pending_wqe *pw;
	struct rxe_send_wqe *wqe;
	struct vrdma_av *av;
	unsigned long flags;
	u32 prod;
	int ret = 0;

	if (vrdma_dead(dev)) {
		*bad_wr = wr;
		return -EIO;
	}
	spin_lock_irqsave(&qp->sq_lock, flags);
	prod = qp->sq.buf->producer_index & mask;
	for (; wr; wr = wr->next) {
		if (vrdma_ring_used(&qp->sq) + qp->npending + 1 >
		    min_t(u32, mask, qp->cap.max_send_wr)) {
			ret = -ENOMEM;
			break;
		}
		/* Build into the slot; move it aside if it must wait. */
		wqe = vrdma_ring_slot(&qp->sq, prod);
		ret = vrdma_build_send_wqe(dev, qp, wr, wqe, &av);
		if (ret)
			break;
		if (av && smp_load_acquire(&av->done) && av->err) {
			ret = av->err;
			break;
		}
		if (!list_empty(&qp->pending) ||
		    (av && !smp_load_acquire(&av->done))) {
			pw = kmalloc(struct_size(pw, wqe, elem), GFP_ATOMIC);
			if (!pw) {
				ret = -ENOMEM;
				break;
			}
			memcpy(pw->wqe, wqe, elem);
			pw->size = elem;
			pw->av = av;
			if (av)
				vrdma_av_get(av);
			list_add_tail(&pw->link, &qp->pending);
			qp->npending++;
			defer = true;
			continue;
		}
		if (av)
			wqe->wr.wr.ud.ah_num = av->handle;
		vrdma_trace_wqe(qp, wqe);
		prod = (prod + 1) & mask;
		/* The device reads a WQE only after its producer index. */
		smp_store_release(&qp->sq.buf->producer_index, prod);
		posted = true;
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (ret)
		*bad_wr = wr;
	if (posted)
		vrdma_kqp_doorbell(dev, qp);
	if (defer)
		vrdma_kqp_queue_work(dev, qp);
	return ret;
}

/* Puts a driver-made completion on the QP's send CQ and wakes it. */
static void vrdma_sw_complete(struct vrdma_qp *qp, u64 wr_id,
			      enum ib_wc_status status)
{
	struct vrdma_cq *cq = to_vcq(qp->ibqp.send_cq);
	struct vrdma_sw_wc *s;
	unsigned long flags;

	s = kzalloc(sizeof(*s), GFP_ATOMIC);
	if (!s)
		return;
	s->wc.wr_id = wr_id;
	s->wc.status = status;
	s->wc.opcode = IB_WC_SEND;
	s->wc.qp = &qp->ibqp;
	s->wc.port_num = VRDMA_PORT;
	spin_lock_irqsave(&cq->lock, flags);
	list_add_tail(&s->link, &cq->sw_wcs);
	spin_unlock_irqrestore(&cq->lock, flags);
	if (cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/*
 * dev->kwork, process context: writes the sends whose AH now exists, in
 * order, and rings what is owed. A send whose AH failed completes with an
 * error; one whose AH is still being made keeps the rest waiting.
 */
void vrdma_kqp_flush(struct vrdma_dev *dev, struct vrdma_qp *qp)
{
	u32 mask = vrdma_ring_mask(&qp->sq);
	struct vrdma_pending_wqe *pw, *tmp;
	LIST_HEAD(done);
	bool ring, again = false;
	unsigned long flags;
	u32 prod;

	spin_lock_irqsave(&qp->sq_lock, flags);
	prod = qp->sq.buf->producer_index & mask;
	list_for_each_entry_safe(pw, tmp, &qp->pending, link) {
		struct rxe_send_wqe *w = (struct rxe_send_wqe *)pw->wqe;

		if (pw->av && !smp_load_acquire(&pw->av->done)) {
			again = true;
			break;
		}
		list_move_tail(&pw->link, &done);
		qp->npending--;
		if (pw->av && pw->av->err) {
			vrdma_sw_complete(qp, w->wr.wr_id, IB_WC_LOC_QP_OP_ERR);
			continue;
		}
		if (pw->av)
			w->wr.wr.ud.ah_num = pw->av->handle;
		/* post_send kept ring + pending below the ring's size. */
		memcpy(vrdma_ring_slot(&qp->sq, prod), pw->wqe, pw->size);
		prod = (prod + 1) & mask;
		smp_store_release(&qp->sq.buf->producer_index, prod);
		qp->db_owed = true;
	}
	ring = qp->db_owed;
	qp->db_owed = false;
	spin_unlock_irqrestore(&qp->sq_lock, flags);

	list_for_each_entry_safe(pw, tmp, &done, link) {
		if (pw->av)
			vrdma_av_put(dev, pw->av, true);
		kfree(pw);
	}
	if (ring)
		vrdma_ring_doorbell(dev, qp->ibqp.qp_num, VIRTIO_RDMA_DB_SQ,
				    true);
	if (again)
		vrdma_kqp_queue_work(dev, qp);
}

/* destroy_qp: nothing of this QP may stay on dev->kwork. */
void vrdma_kqp_drop_pending(struct vrdma_dev *dev, struct vrdma_qp *qp)
{
	struct vrdma_pending_wqe *pw, *tmp;
	unsigned long flags;
	LIST_HEAD(drop);

	spin_lock_irqsave(&dev->kwork_lock, flags);
	qp->dying = true;
	list_del_init(&qp->kwork_link);
	spin_unlock_irqrestore(&dev->kwork_lock, flags);
	/* A flush that took the QP off the list before us ends first. */
	flush_work(&dev->kwork);
	spin_lock_irqsave(&qp->sq_lock, flags);
	list_splice_init(&qp->pending, &drop);
	qp->npending = 0;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	list_for_each_entry_safe(pw, tmp, &drop, link) {
		if (pw->av)
			vrdma_av_put(dev, pw->av, true);
		kfree(pw);
	}
}

static int vrdma_build_recv_wqe(struct vrdma_qp *qp, u32 max_sge, u32 elem,
				const struct ib_recv_wr *wr,
				struct rxe_recv_wqe *wqe)
{
	u32 total;
	int ret;

	if (wr->num_sge < 0 || wr->num_sge > max_sge ||
	    VIRTIO_RDMA_RECV_WQE_SGE_OFFSET +
	    wr->num_sge * sizeof(struct rxe_sge) > elem)
		return -EINVAL;
	memset(wqe, 0, VIRTIO_RDMA_RECV_WQE_SGE_OFFSET);
	wqe->wr_id = wr->wr_id;
	ret = vrdma_fill_sges(qp, wqe->dma.sge, wr->sg_list, wr->num_sge,
			      &total);
	if (ret)
		return ret;
	wqe->dma.length = total;
	wqe->dma.resid = total;
	wqe->dma.num_sge = wr->num_sge;
	return 0;
}

/*
 * An RQ's or (qp NULL) an SRQ's receives. They need no doorbell, but one
 * makes the device look now.
 */
static int vrdma_post_recv_ring(struct vrdma_dev *dev, struct vrdma_qp *qp,
				struct vrdma_ring *ring, spinlock_t *lock,
				u32 max_wr, u32 max_sge, u32 handle, u8 kind,
				const struct ib_recv_wr *wr,
				const struct ib_recv_wr **bad_wr)
{
	u32 mask = vrdma_ring_mask(ring), elem = 1u << ring->log2_elem_size;
	unsigned long flags;
	bool posted = false;
	u32 prod;
	int ret = 0;

	if (vrdma_dead(dev)) {
		*bad_wr = wr;
		return -EIO;
	}
	spin_lock_irqsave(lock, flags);
	prod = ring->buf->producer_index & mask;
	for (; wr; wr = wr->next) {
		if (vrdma_ring_used(ring) + 1 > min_t(u32, mask, max_wr)) {
			ret = -ENOMEM;
			break;
		}
		ret = vrdma_build_recv_wqe(qp, max_sge, elem, wr,
					   vrdma_ring_slot(ring, prod));
		if (ret)
			break;
		if (vrdma_trace(qp)) {
			const struct rxe_recv_wqe *w = vrdma_ring_slot(ring, prod);

			dev_info(&dev->vdev->dev,
				 "kqp %#x recv slot %u wr_id %#llx len %u nsge %u sge0 %#llx+%u sge1 %#llx+%u\n",
				 handle, prod, w->wr_id, w->dma.length,
				 w->dma.num_sge, w->dma.sge[0].addr,
				 w->dma.sge[0].length,
				 w->dma.num_sge > 1 ? w->dma.sge[1].addr : 0,
				 w->dma.num_sge > 1 ? w->dma.sge[1].length : 0);
		}
		prod = (prod + 1) & mask;
		smp_store_release(&ring->buf->producer_index, prod);
		posted = true;
	}
	spin_unlock_irqrestore(lock, flags);
	if (ret)
		*bad_wr = wr;
	if (posted)
		vrdma_ring_doorbell(dev, handle, kind, false);
	return ret;
}

int vrdma_kpost_recv(struct vrdma_qp *qp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr)
{
	if (qp->has_srq) {
		*bad_wr = wr;
		return -EINVAL;
	}
	return vrdma_post_recv_ring(to_vdev(qp->ibqp.device), qp, &qp->rq,
				    &qp->rq_lock, qp->cap.max_recv_wr,
				    qp->cap.max_recv_sge, qp->ibqp.qp_num,
				    VIRTIO_RDMA_DB_RQ, wr, bad_wr);
}

int vrdma_kpost_srq_recv(struct vrdma_srq *srq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	return vrdma_post_recv_ring(to_vdev(srq->ibsrq.device), NULL,
				    &srq->ring, &srq->lock, srq->max_wr,
				    srq->max_sge, srq->handle,
				    VIRTIO_RDMA_DB_SRQ, wr, bad_wr);
}

/* IBV_WC_* (what the device writes) -> IB_WC_*: same numbers, checked. */
static bool vrdma_wc_opcode(u32 op, enum ib_wc_opcode *out)
{
	switch (op) {
	case IB_WC_SEND:
	case IB_WC_RDMA_WRITE:
	case IB_WC_RDMA_READ:
	case IB_WC_COMP_SWAP:
	case IB_WC_FETCH_ADD:
	case IB_WC_LOCAL_INV:
	case IB_WC_REG_MR:         /* VIRTIO_RDMA_WC_REG_MR */
	case IB_WC_RECV:
	case IB_WC_RECV_RDMA_WITH_IMM:
		*out = op;
		return true;
	default:
		return false;
	}
}

/*
 * The device writes ibv_wc_flags values (what librxe hands to user space):
 * IBV_WC_GRH 1, WITH_IMM 2, IP_CSUM_OK 4, WITH_INV 8. The kernel's
 * IB_WC_WITH_INVALIDATE and IB_WC_IP_CSUM_OK are the other way round.
 */
#define VRDMA_UWC_GRH 0x1
#define VRDMA_UWC_WITH_IMM 0x2
#define VRDMA_UWC_IP_CSUM_OK 0x4
#define VRDMA_UWC_WITH_INV 0x8

static int vrdma_wc_flags(u32 uflags)
{
	int f = 0;

	if (uflags & VRDMA_UWC_GRH)
		f |= IB_WC_GRH;
	if (uflags & VRDMA_UWC_WITH_IMM)
		f |= IB_WC_WITH_IMM;
	if (uflags & VRDMA_UWC_IP_CSUM_OK)
		f |= IB_WC_IP_CSUM_OK;
	if (uflags & VRDMA_UWC_WITH_INV)
		f |= IB_WC_WITH_INVALIDATE;
	return f;
}

/*
 * A failed receive of a kernel consumer: the RQ slots still holding its
 * WQE (the ULP reposts it only after this completion), as the device was
 * given it, and the ring's indices.
 */
static void vrdma_log_recv_wqe(struct vrdma_dev *dev, struct vrdma_qp *qp,
			       u64 wr_id)
{
	const struct vrdma_ring *rq = &qp->rq;
	u32 i, n = 0;

	if (qp->has_srq || !rq->buf)
		return;
	for (i = 0; i <= vrdma_ring_mask(rq) && n < 2; i++) {
		const struct rxe_recv_wqe *w = vrdma_ring_slot(rq, i);

		if (w->wr_id != wr_id)
			continue;
		n++;
		dev_info_ratelimited(&dev->vdev->dev,
				     "kqp %#x: RQ slot %u (prod %u cons %u): len %u nsge %u sge0 %#llx+%u lkey %#x sge1 %#llx+%u lkey %#x\n",
				     qp->ibqp.qp_num, i, rq->buf->producer_index,
				     rq->buf->consumer_index, w->dma.length,
				     w->dma.num_sge, w->dma.sge[0].addr,
				     w->dma.sge[0].length, w->dma.sge[0].lkey,
				     w->dma.num_sge > 1 ? w->dma.sge[1].addr : 0,
				     w->dma.num_sge > 1 ? w->dma.sge[1].length : 0,
				     w->dma.num_sge > 1 ? w->dma.sge[1].lkey : 0);
	}
}

/* Returns false for a CQE naming no QP of ours (it is dropped). */
static bool vrdma_cqe_to_wc(struct vrdma_dev *dev,
			    const struct ib_uverbs_wc *u, struct ib_wc *wc)
{
	struct vrdma_qp *qp = xa_load(&dev->qps, u->qp_num);

	if (!qp)
		return false;
	/*
	 * A kernel consumer's failed work request (not a flush): ULPs recover
	 * quietly (nvme-rdma reconnects), so say what the device answered.
	 */
	if (u->status != IB_WC_SUCCESS && u->status != IB_WC_WR_FLUSH_ERR &&
	    qp->ibqp.qp_type != IB_QPT_GSI) {
		dev_info_ratelimited(&dev->vdev->dev,
				     "kqp %#x: CQE op %u status %u vendor_err %#x wr_id %#llx len %u\n",
				     u->qp_num, u->opcode, u->status,
				     u->vendor_err, u->wr_id, u->byte_len);
		if (u->opcode & IB_WC_RECV)
			vrdma_log_recv_wqe(dev, qp, u->wr_id);
	} else if (vrdma_trace(qp)) {
		dev_info(&dev->vdev->dev,
			 "kqp %#x cqe op %u status %u wr_id %#llx len %u flags %#x ex %#x\n",
			 u->qp_num, u->opcode, u->status, u->wr_id, u->byte_len,
			 u->wc_flags, u->ex.invalidate_rkey);
	}
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = u->wr_id;
	wc->status = u->status <= IB_WC_GENERAL_ERR ? u->status :
						      IB_WC_GENERAL_ERR;
	if (!vrdma_wc_opcode(u->opcode, &wc->opcode)) {
		wc->opcode = IB_WC_SEND;
		if (wc->status == IB_WC_SUCCESS)
			wc->status = IB_WC_GENERAL_ERR;
	}
	wc->vendor_err = u->vendor_err;
	wc->byte_len = u->byte_len;
	wc->qp = &qp->ibqp;
	wc->src_qp = u->src_qp & 0xffffff;
	wc->wc_flags = vrdma_wc_flags(u->wc_flags);
	/* One union; the flag says which it is (a received SEND_WITH_INV). */
	if (wc->wc_flags & IB_WC_WITH_INVALIDATE)
		wc->ex.invalidate_rkey = u->ex.invalidate_rkey;
	else
		wc->ex.imm_data = u->ex.imm_data;
	wc->pkey_index = u->pkey_index;
	wc->slid = u->slid;
	wc->sl = u->sl;
	wc->dlid_path_bits = u->dlid_path_bits;
	wc->port_num = VRDMA_PORT;
	/*
	 * RoCE: the 40 bytes in front of a UD/GSI payload hold the IPv4 or
	 * IPv6 header (docs/virtio-rdma.md 2.1); the core tells them apart
	 * itself (ib_get_net_type_by_grh()), so no network_hdr_type here.
	 */
	return true;
}

int vrdma_kpoll_cq(struct vrdma_cq *cq, int num_entries, struct ib_wc *wc)
{
	struct vrdma_dev *dev = to_vdev(cq->ibcq.device);
	u32 mask = vrdma_ring_mask(&cq->ring), prod, cons;
	struct ib_uverbs_wc cqe;
	struct vrdma_sw_wc *s;
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	while (n < num_entries &&
	       (s = list_first_entry_or_null(&cq->sw_wcs, struct vrdma_sw_wc,
					     link))) {
		list_del(&s->link);
		wc[n++] = s->wc;
		kfree(s);
	}
	cons = cq->ring.buf->consumer_index & mask;
	prod = smp_load_acquire(&cq->ring.buf->producer_index);
	if (prod > mask) {
		dev_warn_ratelimited(&dev->vdev->dev,
				     "CQ %#x: producer index %u out of range\n",
				     cq->handle, prod);
		prod = cons;
	}
	while (n < num_entries && cons != prod) {
		/* One copy out of the shared slot, then only the copy. */
		memcpy(&cqe, vrdma_ring_slot(&cq->ring, cons), sizeof(cqe));
		cons = (cons + 1) & mask;
		if (vrdma_cqe_to_wc(dev, &cqe, &wc[n]))
			n++;
		else
			dev_warn_ratelimited(&dev->vdev->dev,
					     "CQE for unknown QP %#x dropped\n",
					     cqe.qp_num);
	}
	/* The slots are free for the device once it reads this. */
	smp_store_release(&cq->ring.buf->consumer_index, cons);
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

bool vrdma_kcq_empty(struct vrdma_cq *cq)
{
	unsigned long flags;
	bool empty;

	spin_lock_irqsave(&cq->lock, flags);
	empty = list_empty(&cq->sw_wcs) && vrdma_ring_empty(&cq->ring);
	spin_unlock_irqrestore(&cq->lock, flags);
	return empty;
}

void vrdma_kcq_free(struct vrdma_cq *cq)
{
	struct vrdma_sw_wc *s, *tmp;

	list_for_each_entry_safe(s, tmp, &cq->sw_wcs, link)
		kfree(s);
	INIT_LIST_HEAD(&cq->sw_wcs);
}
