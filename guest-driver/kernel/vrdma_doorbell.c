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
#include <linux/delay.h>
#include <linux/jiffies.h>

#include "vrdma.h"

/* How long a full set of doorbell queues may stall a poster. */
#define VRDMA_DB_WAIT (5 * HZ)

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

/* Returns true once the record is on some queue. */
static bool vrdma_try_doorbell(struct vrdma_dev *dev, u32 handle, u8 kind)
{
	u32 first = raw_smp_processor_id() % dev->ndbq, i;

	/* Try this vCPU's queue first, then the others. */
	for (i = 0; i < dev->ndbq; i++) {
		struct vrdma_dbq *q = &dev->dbq[(first + i) % dev->ndbq];
		unsigned long flags;
		bool posted, notify;

		spin_lock_irqsave(&q->lock, flags);
		posted = vrdma_dbq_post(q, handle, kind);
		/*
		 * Under polling the device suppresses notifications: no exit.
		 * A full queue is kicked anyway, in case the device went to
		 * sleep without reading it.
		 */
		notify = posted ? virtqueue_kick_prepare(q->vq) : true;
		spin_unlock_irqrestore(&q->lock, flags);
		if (notify)
			virtqueue_notify(q->vq);
		if (posted)
			return true;
	}
	return false;
}

/*
 * A doorbell must not be dropped: the device looks only at the rings that
 * doorbells name, so a lost one can leave posted work unseen (a perftest
 * with four QPs hung that way). When every queue is full the device is busy
 * draining them; a caller that may sleep waits for room. A caller that may
 * not gets false and must ring again from process context (kernel QPs do,
 * vrdma_kverbs.c).
 */
bool vrdma_ring_doorbell(struct vrdma_dev *dev, u32 handle, u8 kind,
			 bool may_sleep)
{
	unsigned long deadline = jiffies + VRDMA_DB_WAIT;

	/* A device that needs reset reads no ring: nothing to ring. */
	if (vrdma_dead(dev))
		return true;
	while (!vrdma_try_doorbell(dev, handle, kind)) {
		if (vrdma_dead(dev))
			return true;
		if (!may_sleep)
			return false;
		if (time_after(jiffies, deadline)) {
			atomic_inc(&dev->db_dropped);
			dev_warn_ratelimited(&dev->vdev->dev,
					     "doorbell queues full: %d dropped\n",
					     atomic_read(&dev->db_dropped));
			return false;
		}
		usleep_range(10, 50);
	}
	return true;
}
