// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Event queue: completion notifications and asynchronous errors. The
 * callback runs in interrupt context and calls the CQ's comp_handler (which
 * is what makes uverbs completion channels work) and the QP/SRQ/CQ event
 * handlers. Port and GID events need a config re-read, which sleeps, so they
 * go to a work item.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/virtio.h>

#include "vrdma.h"

/* Enough to ride out a burst; lost events are counted by the device. */
#define VRDMA_MAX_EVENT_BUFS 256u

static int vrdma_event_add(struct vrdma_dev *dev, struct virtio_rdma_event *ev)
{
	struct scatterlist sg;

	sg_init_one(&sg, ev, sizeof(*ev));
	return virtqueue_add_inbuf(dev->event_vq, &sg, 1, ev, GFP_ATOMIC);
}

int vrdma_event_init(struct vrdma_dev *dev)
{
	u32 i;
	int ret;

	dev->nevents = min(virtqueue_get_vring_size(dev->event_vq),
			   VRDMA_MAX_EVENT_BUFS);
	dev->events = kcalloc(dev->nevents, sizeof(*dev->events), GFP_KERNEL);
	if (!dev->events)
		return -ENOMEM;
	for (i = 0; i < dev->nevents; i++) {
		ret = vrdma_event_add(dev, &dev->events[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Called after the device was reset and the port work was flushed. */
void vrdma_event_cleanup(struct vrdma_dev *dev)
{
	kfree(dev->events);
	dev->events = NULL;
	xa_destroy(&dev->cqs);
	xa_destroy(&dev->qps);
	xa_destroy(&dev->srqs);
}

int vrdma_publish(struct vrdma_dev *dev, struct xarray *xa, u32 handle,
		  void *obj)
{
	return xa_insert(xa, handle, obj, GFP_KERNEL);
}

/* After this returns, no event handler runs for the object any more. */
void vrdma_unpublish(struct vrdma_dev *dev, struct xarray *xa, u32 handle)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->event_lock, flags);
	xa_erase(xa, handle);
	spin_unlock_irqrestore(&dev->event_lock, flags);
}

static void vrdma_cq_comp(struct vrdma_cq *cq)
{
	if (cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

static void vrdma_cq_event(struct vrdma_dev *dev, u32 handle)
{
	struct vrdma_cq *cq = xa_load(&dev->cqs, handle);
	struct ib_event ev = { .device = &dev->ib, .event = IB_EVENT_CQ_ERR };

	if (!cq || !cq->ibcq.event_handler)
		return;
	ev.element.cq = &cq->ibcq;
	cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
}

static void vrdma_qp_event(struct vrdma_dev *dev, u32 qpn,
			   enum ib_event_type type)
{
	struct vrdma_qp *qp = xa_load(&dev->qps, qpn);
	struct ib_event ev = { .device = &dev->ib, .event = type };

	if (!qp || !qp->ibqp.event_handler)
		return;
	ev.element.qp = &qp->ibqp;
	qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

static void vrdma_srq_event(struct vrdma_dev *dev, u32 handle)
{
	struct vrdma_srq *srq = xa_load(&dev->srqs, handle);
	struct ib_event ev = { .device = &dev->ib,
			       .event = IB_EVENT_SRQ_LIMIT_REACHED };

	if (!srq)
		return;
	/*
	 * The event disarms the limit (the device set its own to 0, as rxe
	 * and the InfiniBand specification do): ibv_query_srq must say 0
	 * until the application arms it again.
	 */
	WRITE_ONCE(srq->srq_limit, 0);
	if (!srq->ibsrq.event_handler)
		return;
	ev.element.srq = &srq->ibsrq;
	srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
}

/* Lost events may have been completions: wake every CQ, as hardware would. */
static void vrdma_wake_all_cqs(struct vrdma_dev *dev)
{
	struct vrdma_cq *cq;
	unsigned long idx;

	xa_for_each(&dev->cqs, idx, cq)
		vrdma_cq_comp(cq);
}

static void vrdma_handle_event(struct vrdma_dev *dev,
			       const struct virtio_rdma_event *ev)
{
	u32 type = le32_to_cpu(ev->type), handle = le32_to_cpu(ev->handle);
	struct vrdma_cq *cq;

	if (le32_to_cpu(ev->lost))
		vrdma_wake_all_cqs(dev);

	switch (type) {
	case VIRTIO_RDMA_EV_CQ_COMP:
		cq = xa_load(&dev->cqs, handle);
		if (cq)
			vrdma_cq_comp(cq);
		break;
	case VIRTIO_RDMA_EV_CQ_ERR:
		vrdma_cq_event(dev, handle);
		break;
	case VIRTIO_RDMA_EV_QP_FATAL:
		vrdma_qp_event(dev, handle, IB_EVENT_QP_FATAL);
		break;
	case VIRTIO_RDMA_EV_QP_REQ_ERR:
		vrdma_qp_event(dev, handle, IB_EVENT_QP_REQ_ERR);
		break;
	case VIRTIO_RDMA_EV_QP_ACCESS_ERR:
		vrdma_qp_event(dev, handle, IB_EVENT_QP_ACCESS_ERR);
		break;
	case VIRTIO_RDMA_EV_QP_LAST_WQE_REACHED:
		vrdma_qp_event(dev, handle, IB_EVENT_QP_LAST_WQE_REACHED);
		break;
	case VIRTIO_RDMA_EV_SQ_DRAINED:
		vrdma_qp_event(dev, handle, IB_EVENT_SQ_DRAINED);
		break;
	case VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED:
		vrdma_srq_event(dev, handle);
		break;
	case VIRTIO_RDMA_EV_PORT_ACTIVE:
	case VIRTIO_RDMA_EV_PORT_ERR:
	case VIRTIO_RDMA_EV_GID_CHANGE:
		set_bit(type, &dev->port_events);
		schedule_work(&dev->port_work);
		break;
	default:
		/* Unknown types come from a newer device: ignore them. */
		break;
	}
}

void vrdma_event_cb(struct virtqueue *vq)
{
	struct vrdma_dev *dev = vrdma_vq_dev(vq);
	struct virtio_rdma_event *ev, copy;
	unsigned long flags;
	unsigned int len;

	if (!dev)
		return;
	spin_lock_irqsave(&dev->event_lock, flags);
	do {
		virtqueue_disable_cb(vq);
		while ((ev = virtqueue_get_buf(vq, &len))) {
			/* Copy first: the buffer goes straight back. */
			copy = *ev;
			memset(ev, 0, sizeof(*ev));
			vrdma_event_add(dev, ev);
			if (len >= sizeof(copy))
				vrdma_handle_event(dev, &copy);
		}
	} while (!virtqueue_enable_cb(vq));
	virtqueue_kick(vq);
	spin_unlock_irqrestore(&dev->event_lock, flags);
}
