// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Control queue: every verb that creates, changes or destroys an object is
 * one synchronous command. The device completes commands in order and the
 * driver issues one at a time, so a mutex and one set of buffers suffice.
 */
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/virtio.h>

#include "vrdma.h"

/* Generous: a TCG guest on a loaded host answers in about 0.1 ms. */
#define VRDMA_CTRL_TIMEOUT (30 * HZ)
/* How often a waiter looks whether the device died under it. */
#define VRDMA_CTRL_SLICE HZ

int vrdma_ctrl_init(struct vrdma_dev *dev)
{
	mutex_init(&dev->ctrl_lock);
	init_completion(&dev->ctrl_done);
	dev->ctrl = kzalloc(sizeof(*dev->ctrl), GFP_KERNEL);
	return dev->ctrl ? 0 : -ENOMEM;
}

void vrdma_ctrl_cleanup(struct vrdma_dev *dev)
{
	kfree(dev->ctrl);
	dev->ctrl = NULL;
}

void vrdma_ctrl_done(struct virtqueue *vq)
{
	struct vrdma_dev *dev = vrdma_vq_dev(vq);

	if (dev)
		complete(&dev->ctrl_done);
}

static int vrdma_status_to_errno(u32 status)
{
	switch (status) {
	case VIRTIO_RDMA_OK:
		return 0;
	case VIRTIO_RDMA_ERR_INVALID:
	case VIRTIO_RDMA_ERR_BAD_STATE:
		return -EINVAL;
	case VIRTIO_RDMA_ERR_UNSUPPORTED:
		return -EOPNOTSUPP;
	case VIRTIO_RDMA_ERR_NO_RESOURCE:
		return -ENOMEM;
	case VIRTIO_RDMA_ERR_BAD_HANDLE:
		return -ENOENT;
	case VIRTIO_RDMA_ERR_BUSY:
		return -EBUSY;
	case VIRTIO_RDMA_ERR_FAULT:
		return -EFAULT;
	case VIRTIO_RDMA_ERR_ACCESS:
		return -EACCES;
	default:
		return -EIO;
	}
}

/*
 * Page lists can be large (an MR of 1 GiB has 262144 entries), so they may
 * live in vmalloc memory; such a buffer needs one scatterlist entry per page.
 */
static u32 vrdma_sg_count(const void *buf, size_t len)
{
	if (!len)
		return 0;
	if (!is_vmalloc_addr(buf))
		return 1;
	return DIV_ROUND_UP(offset_in_page(buf) + len, PAGE_SIZE);
}

static void vrdma_sg_fill(struct scatterlist *sg, const void *buf, size_t len)
{
	if (!is_vmalloc_addr(buf)) {
		sg_set_buf(sg, buf, len);
		return;
	}
	while (len) {
		size_t off = offset_in_page(buf);
		size_t chunk = min_t(size_t, len, PAGE_SIZE - off);

		sg_set_page(sg, vmalloc_to_page(buf), chunk, off);
		buf += chunk;
		len -= chunk;
		sg = sg_next(sg);
	}
}

static int vrdma_submit_and_wait(struct vrdma_dev *dev,
				 struct scatterlist **sgs, u32 out, u32 in,
				 unsigned int *len)
{
	unsigned long deadline;
	void *token;
	int ret;

	reinit_completion(&dev->ctrl_done);
	ret = virtqueue_add_sgs(dev->ctrl_vq, sgs, out, in, dev->ctrl,
				GFP_KERNEL);
	if (ret)
		return ret;
	virtqueue_kick(dev->ctrl_vq);

	/*
	 * A callback may fire without our buffer (spurious): wait again. The
	 * wait is cut in slices so that a device that needs reset (backend
	 * lost: it will never answer) fails the command within a slice.
	 */
	deadline = jiffies + VRDMA_CTRL_TIMEOUT;
	for (;;) {
		token = virtqueue_get_buf(dev->ctrl_vq, len);
		if (token)
			break;
		/* The config interrupt of a dead device completes ctrl_done. */
		if (vrdma_dead(dev))
			return -EIO; /* the device was or will be reset */
		if (wait_for_completion_timeout(&dev->ctrl_done,
						VRDMA_CTRL_SLICE))
			continue;
		/* A silent slice: ask the device itself, in case. */
		if (vrdma_check_dead(dev))
			return -EIO;
		if (time_before(jiffies, deadline))
			continue;
		/* Tell a lost interrupt from a device that never answered. */
		token = virtqueue_get_buf(dev->ctrl_vq, len);
		if (token) {
			dev_warn(&dev->vdev->dev,
				 "control answer arrived without an interrupt\n");
			break;
		}
		/* The buffers stay the device's: never reuse them. */
		dev->ctrl_broken = true;
		dev_err(&dev->vdev->dev, "control command timed out\n");
		return -ETIMEDOUT;
	}
	if (token != dev->ctrl || *len < sizeof(dev->ctrl->resp_hdr))
		return -EIO;
	return 0;
}

/*
 * Runs one command: [hdr, req, page list] device-readable, then [resp_hdr,
 * resp] device-writable. req/resp may live anywhere (they are copied through
 * the DMA-able ctrl buffer); pages must be kmalloc or vmalloc memory.
 */
int vrdma_exec(struct vrdma_dev *dev, u32 cmd, const void *req, size_t req_len,
	       const __le64 *pages, u32 npages, void *resp, size_t resp_len)
{
	struct vrdma_ctrl_buf *c = dev->ctrl;
	struct scatterlist hdr_sg, req_sg, rhdr_sg, resp_sg, *page_sg = NULL;
	struct scatterlist *sgs[5];
	size_t pages_len = (size_t)npages * sizeof(__le64);
	u32 out = 0, in = 0, npage_sg;
	unsigned int used = 0;
	int ret;

	if (req_len > sizeof(c->req) || resp_len > sizeof(c->resp))
		return -EINVAL;
	npage_sg = vrdma_sg_count(pages, pages_len);
	if (npage_sg + 4 > virtqueue_get_vring_size(dev->ctrl_vq))
		return -E2BIG;
	if (npage_sg) {
		page_sg = kmalloc_array(npage_sg, sizeof(*page_sg), GFP_KERNEL);
		if (!page_sg)
			return -ENOMEM;
		sg_init_table(page_sg, npage_sg);
		vrdma_sg_fill(page_sg, pages, pages_len);
	}

	mutex_lock(&dev->ctrl_lock);
	if (dev->ctrl_broken || vrdma_dead(dev)) {
		ret = -EIO;
		goto out;
	}
	memset(c, 0, sizeof(*c));
	c->hdr.cmd = cpu_to_le32(cmd);
	memcpy(c->req, req, req_len);
	/* Until the device writes it, the answer is "failed". */
	c->resp_hdr.status = cpu_to_le32(~0u);

	sg_init_one(&hdr_sg, &c->hdr, sizeof(c->hdr));
	sgs[out++] = &hdr_sg;
	if (req_len) {
		sg_init_one(&req_sg, c->req, req_len);
		sgs[out++] = &req_sg;
	}
	if (page_sg)
		sgs[out++] = page_sg;
	sg_init_one(&rhdr_sg, &c->resp_hdr, sizeof(c->resp_hdr));
	sgs[out + in++] = &rhdr_sg;
	if (resp_len) {
		sg_init_one(&resp_sg, c->resp, resp_len);
		sgs[out + in++] = &resp_sg;
	}

	ret = vrdma_submit_and_wait(dev, sgs, out, in, &used);
	if (!ret)
		ret = vrdma_status_to_errno(le32_to_cpu(c->resp_hdr.status));
	/* A success that did not write the whole response is a device bug. */
	if (!ret && used < sizeof(c->resp_hdr) + resp_len)
		ret = -EIO;
	if (!ret && resp_len)
		memcpy(resp, c->resp, resp_len);
out:
	mutex_unlock(&dev->ctrl_lock);
	kfree(page_sg);
	return ret;
}

int vrdma_destroy_handle(struct vrdma_dev *dev, u32 cmd, u32 handle)
{
	struct virtio_rdma_req_handle req = { .handle = cpu_to_le32(handle) };

	return vrdma_exec(dev, cmd, &req, sizeof(req), NULL, 0, NULL, 0);
}

/*
 * Destroys an object whose memory (pinned pages, rings) the device may
 * touch. Returns true when that memory may be freed: the device let go,
 * never knew the handle, or was reset (after the backend was lost).
 * Otherwise the caller leaks the memory, because freeing pages a device
 * may still write would corrupt the guest; the RDMA
 * core is told the object is gone either way, so it can finish tearing down.
 */
bool vrdma_destroy_or_keep(struct vrdma_dev *dev, u32 cmd, u32 handle)
{
	int ret;

	/* A device that was reset holds nothing: no command needed. */
	if (vrdma_released(dev))
		return true;
	ret = vrdma_destroy_handle(dev, cmd, handle);
	if (!ret || ret == -ENOENT || vrdma_released(dev))
		return true;
	dev_warn_ratelimited(&dev->vdev->dev,
			     "command %u on handle %#x failed (%d): memory kept\n",
			     cmd, handle, ret);
	return false;
}
