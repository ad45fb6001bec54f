// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Rings: each SQ, RQ, SRQ and CQ is one vmalloc_user buffer laid out as a
 * struct rxe_queue_buf (librxe's layout, unchanged). User space maps it with
 * mmap at an offset cookie from the rdma_user_mmap_entry table; the device
 * gets the guest-physical address of each of its pages. So a work request
 * travels from librxe to the device with no copy and no system call.
 *
 * Lifetime: the buffer is freed by mmap_free, i.e. after the object was
 * destroyed on the device (the device no longer touches the pages) and its
 * mmap entry was removed. Pages still mapped in a process stay allocated
 * until munmap because remap_vmalloc_range took a reference on each.
 */
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "vrdma.h"

static_assert(PAGE_SIZE == VIRTIO_RDMA_PAGE_SIZE,
	      "ring and MR page lists are in 4 KiB pages");
static_assert(offsetof(struct rxe_queue_buf, data) == VIRTIO_RDMA_RING_HDR_SIZE,
	      "ring header size");

/* depth usable entries need depth + 1 slots (one slot stays empty). */
int vrdma_ring_alloc(struct vrdma_ring *ring, u32 depth, u32 elem_size)
{
	u32 num = roundup_pow_of_two(depth + 1);
	struct vrdma_mmap_entry *entry;
	size_t bytes;

	memset(ring, 0, sizeof(*ring));
	if (!is_power_of_2(elem_size) ||
	    ilog2(num) > VIRTIO_RDMA_MAX_RING_LOG2_ELEMS)
		return -EINVAL;
	bytes = VIRTIO_RDMA_RING_HDR_SIZE + (size_t)num * elem_size;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry)
		return -ENOMEM;
	ring->size = PAGE_ALIGN(bytes);
	/* Zeroed and VM_USERMAP, as remap_vmalloc_range requires. */
	entry->buf = vmalloc_user(ring->size);
	if (!entry->buf) {
		kfree(entry);
		return -ENOMEM;
	}
	ring->entry = entry;
	ring->buf = entry->buf;
	ring->npages = ring->size >> PAGE_SHIFT;
	ring->log2_num_elem = ilog2(num);
	ring->log2_elem_size = ilog2(elem_size);
	ring->buf->log2_elem_size = ring->log2_elem_size;
	ring->buf->index_mask = num - 1;
	return 0;
}

/* Makes the ring mappable by the caller's process and fills mi for librxe. */
int vrdma_ring_insert(struct vrdma_ring *ring, struct ib_udata *udata,
		      struct mminfo *mi)
{
	struct vrdma_ucontext *uctx =
		rdma_udata_to_drv_context(udata, struct vrdma_ucontext, ibuc);
	int ret;

	ret = rdma_user_mmap_entry_insert(&uctx->ibuc, &ring->entry->rdma,
					  ring->size);
	if (ret)
		return ret;
	ring->inserted = true;
	mi->offset = rdma_user_mmap_get_offset(&ring->entry->rdma);
	mi->size = ring->size;
	return 0;
}

/* Only after the device has forgotten the ring. */
void vrdma_ring_free(struct vrdma_ring *ring)
{
	if (!ring->entry)
		return;
	if (ring->inserted) {
		rdma_user_mmap_entry_remove(&ring->entry->rdma);
	} else {
		vfree(ring->entry->buf);
		kfree(ring->entry);
	}
	ring->entry = NULL;
	ring->buf = NULL;
}

void vrdma_ring_fill_pages(const struct vrdma_ring *ring, __le64 *pages)
{
	const u8 *p = (const u8 *)ring->buf;
	u32 i;

	/*
	 * Guest-physical addresses: the device does not negotiate
	 * VIRTIO_F_ACCESS_PLATFORM, so, like the vrings themselves, it is
	 * addressed by physical address with no IOMMU translation.
	 */
	for (i = 0; i < ring->npages; i++)
		pages[i] = cpu_to_le64(page_to_phys(vmalloc_to_page(p + i * PAGE_SIZE)));
}

void vrdma_ring_desc(const struct vrdma_ring *ring,
		     struct virtio_rdma_ring_desc *desc)
{
	desc->log2_num_elem = cpu_to_le32(ring->log2_num_elem);
	desc->log2_elem_size = cpu_to_le32(ring->log2_elem_size);
	desc->npages = cpu_to_le32(ring->npages);
	desc->reserved = 0;
}

/* For a CQ: has the device produced anything the consumer has not taken? */
bool vrdma_ring_empty(const struct vrdma_ring *ring)
{
	u32 prod = smp_load_acquire(&ring->buf->producer_index);
	u32 cons = READ_ONCE(ring->buf->consumer_index);

	return prod == cons;
}

int vrdma_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rentry;
	struct vrdma_mmap_entry *entry;
	int ret;

	/* Checks VM_SHARED and that the length is the ring's exactly. */
	rentry = rdma_user_mmap_entry_get(uctx, vma);
	if (!rentry)
		return -EINVAL;
	entry = container_of(rentry, struct vrdma_mmap_entry, rdma);
	ret = remap_vmalloc_range(vma, entry->buf, 0);
	rdma_user_mmap_entry_put(rentry);
	return ret;
}

void vrdma_mmap_free(struct rdma_user_mmap_entry *rentry)
{
	struct vrdma_mmap_entry *entry =
		container_of(rentry, struct vrdma_mmap_entry, rdma);

	vfree(entry->buf);
	kfree(entry);
}
