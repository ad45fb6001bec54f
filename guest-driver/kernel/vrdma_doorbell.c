// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Doorbell queues: an 8-byte record that says "look at this object's ring
 * again". One queue per vCPU (modulo the device's count) so vCPUs do not
 * contend; any object may be rung on any queue. The device reads producer
 * indices itself, so a dropped or duplicated doorbell never loses work.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/virtio.h>

#include "vrdma.h"

static int vrdma_dbq_init(struct vrdma_dbq *q, struct virtqueue *vq)
{
	u32 n = virtqueue_get_vring_size(vq), i;

	spin_lock_init(&q->lock);
	q->vq = vq;
	q->recs = kcalloc(n, sizeof(*q->recs), GFP_KERNEL);
	q->free = kcalloc(n, sizeof(*q->free), GFP_KERNEL);
	if (!q->recs || !q->free)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		q->free[i] = n - 1 - i;
	q->nfree = n;
	return 0;
}

int vrdma_doorbell_init(struct vrdma_dev *dev, struct virtqueue **vqs, u32 n)
{
	u32 i;
	int ret;

	dev->dbq = kcalloc(n, sizeof(*dev->dbq), GFP_KERNEL);
	if (!dev->dbq)
		return -ENOMEM;
	dev->ndbq = n;
	for (i = 0; i < n; i++) {
		ret = vrdma_dbq_init(&dev->dbq[i], vqs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Called after the device was reset: no record is in use any more. */
void vrdma_doorbell_cleanup(struct vrdma_dev *dev)
{
	u32 i;

	for (i = 0; dev->dbq && i < dev->ndbq; i++) {
		kfree(dev->dbq[i].recs);
		kfree(dev->dbq[i].free);
	}
	kfree(dev->dbq);
	dev->dbq = NULL;
}

/* Returns false when the queue is full. Caller holds q->lock. */
static bool vrdma_dbq_post(struct vrdma_dbq *q, u32 handle, u8 kind)
{
	struct virtio_rdma_doorbell *rec;
	struct scatterlist sg;
	unsigned int len;
	u16 idx;

	/* Reclaim what the device has read (it returns records at once). */
	while ((rec = virtqueue_get_buf(q->vq, &len)))
		q->free[q->nfree++] = rec - q->recs;
	if (!q->nfree)
		return false;

	idx = q->free[--q->nfree];
	rec = &q->recs[idx];
	rec->handle = cpu_to_le32(handle);
	rec->kind = kind;
	memset(rec->reserved, 0, sizeof(rec->reserved));
	sg_init_one(&sg, rec, sizeof(*rec));
	if (virtqueue_add_outbuf(q->vq, &sg, 1, rec, GFP_ATOMIC)) {
		q->free[q->nfree++] = idx;
		return false;
	}
	return true;
}

void vrdma_ring_doorbell(struct vrdma_dev *dev, u32 handle, u8 kind)
{
	u32 first = raw_smp_processor_id() % dev->ndbq, i;

	/* Try this vCPU's queue first, then the others. */
	for (i = 0; i < dev->ndbq; i++) {
		struct vrdma_dbq *q = &dev->dbq[(first + i) % dev->ndbq];
		unsigned long flags;
		bool posted, notify = false;

		spin_lock_irqsave(&q->lock, flags);
		posted = vrdma_dbq_post(q, handle, kind);
		if (posted)
			notify = virtqueue_kick_prepare(q->vq);
		spin_unlock_irqrestore(&q->lock, flags);
		/* Under polling the device suppresses notifications: no exit. */
		if (notify)
			virtqueue_notify(q->vq);
		if (posted)
			return;
	}
	/*
	 * Every queue holds unread records, so the device will look at its
	 * rings again when it reads them; count it for diagnosis only.
	 */
	atomic_inc(&dev->db_dropped);
}
