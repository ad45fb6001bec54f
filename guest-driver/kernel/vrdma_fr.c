// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fast-registration MRs for kernel consumers (VIRTIO_RDMA_F_KERNEL,
 * docs/virtio-rdma.md 4.8): ib_alloc_mr(IB_MR_TYPE_MEM_REG), ib_map_mr_sg
 * and the IB_WR_REG_MR send WQE, as NVMe over RDMA, iSER or NFS/RDMA use
 * them for every I/O.
 *
 * - ALLOC_MR names a page list the driver keeps in guest-physically
 *   contiguous memory (kmalloc: 8-byte aligned, in the linear map); the
 *   device copies it when it executes a REG_MR WQE, so map_mr_sg only
 *   writes it, without a command.
 * - The ib_device has no DMA device (ib_uses_virt_dma()): the scatterlist's
 *   "DMA addresses" are kernel virtual addresses of the linear map. Each
 *   page ib_sg_to_pages() hands to set_page is translated to its
 *   guest-physical address; the MR's iova stays the kernel virtual address
 *   (the peer only ever sees iova and rkey, and the page offset is the
 *   same in both).
 * - The device's pages are 4 KiB (VIRTIO_RDMA_PAGE_SIZE): another
 *   mr->page_size is refused.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

static_assert(IB_WR_REG_MR == VIRTIO_RDMA_WR_REG_MR, "REG_MR opcode");
static_assert(IB_WC_REG_MR == VIRTIO_RDMA_WC_REG_MR, "REG_MR completion");

/* QUERY_DEVICE's max_fr_pages, else (an older device) config.max_mr_pages. */
u32 vrdma_query_max_fr_pages(const struct vrdma_dev *dev)
{
	u32 n = le32_to_cpu(dev->dev_attr.max_fr_pages);

	return n ? n : le32_to_cpu(dev->cfg.max_mr_pages);
}

struct ib_mr *vrdma_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			     u32 max_num_sg)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct virtio_rdma_req_alloc_mr req = {};
	struct virtio_rdma_resp_alloc_mr resp;
	struct vrdma_mr *mr;
	int ret;

	if (!dev->kernel_verbs || mr_type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > dev->max_fr_pages)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	/* kmalloc memory is physically contiguous and 8-byte aligned. */
	mr->page_list = kcalloc(max_num_sg, sizeof(*mr->page_list), GFP_KERNEL);
	if (!mr->page_list) {
		ret = -ENOMEM;
		goto err_free;
	}
	mr->max_pages = max_num_sg;
	req.pd_handle = cpu_to_le32(to_vpd(ibpd)->handle);
	req.max_pages = cpu_to_le32(max_num_sg);
	req.page_list = cpu_to_le64(virt_to_phys(mr->page_list));
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_ALLOC_MR, &req, sizeof(req),
			 NULL, 0, &resp, sizeof(resp));
	if (ret)
		goto err_list;
	mr->handle = le32_to_cpu(resp.mr_handle);
	mr->ibmr.lkey = le32_to_cpu(resp.lkey);
	mr->ibmr.rkey = le32_to_cpu(resp.rkey);
	mr->dev_lkey = mr->ibmr.lkey;
	return &mr->ibmr;

err_list:
	kfree(mr->page_list);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

/* dereg_mr of an ALLOC_MR MR. */
int vrdma_fr_dereg(struct vrdma_mr *mr)
{
	struct vrdma_dev *dev = to_vdev(mr->ibmr.device);
	int ret = vrdma_released(dev) ? 0 :
		  vrdma_destroy_handle(dev, VIRTIO_RDMA_CMD_DEREG_MR,
				       mr->handle);

	/* The device may still read the page list: keep it then. */
	if (ret && ret != -ENOENT && !vrdma_released(dev)) {
		dev_warn_ratelimited(&dev->vdev->dev,
				     "DEREG_MR %#x (fast-reg) failed (%d): page list kept\n",
				     mr->handle, ret);
		return 0;
	}
	kfree(mr->page_list);
	kfree(mr);
	return 0;
}

static int vrdma_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct vrdma_mr *mr = to_vmr(ibmr);
	u64 phys;

	if (mr->npages >= mr->max_pages)
		return -ENOMEM;
	if (vrdma_kva_to_phys(addr, VIRTIO_RDMA_PAGE_SIZE, &phys))
		return -EINVAL;
	mr->page_list[mr->npages++] = cpu_to_le64(phys);
	return 0;
}

/*
 * Writes the page list the next REG_MR WQE of this MR registers. The ULP
 * invalidates the MR (LOCAL_INV or a peer's SEND_WITH_INV) before it maps
 * it again, and the device copies the list when it executes REG_MR, so no
 * registration in flight reads a list being rewritten.
 */
int vrdma_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset)
{
	struct vrdma_mr *mr = to_vmr(ibmr);

	if (!mr->page_list || ibmr->page_size != VIRTIO_RDMA_PAGE_SIZE)
		return -EINVAL;
	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, vrdma_set_page);
}

/*
 * The REG_MR WQE (wr.mw's layout): the MR's new iova and length as
 * map_mr_sg set them, its current lkey, the new key and the access bits.
 * "Current" is the device's: the key byte of ALLOC_MR or of the last
 * REG_MR posted (SoftRnic, as rxe's rxe_reg_fast_mr, requires the MR's
 * key to match). ibmr.lkey already carries the new key byte: the ULP calls
 * ib_update_fast_reg_key() before posting. Called under the QP's SQ lock;
 * a REG_MR of one MR is posted on one QP at a time (the ULP's MR pools are
 * per QP). A REG_MR the device fails leaves its key unchanged while
 * dev_lkey moved on: ULPs tear the queue and its MRs down after such an
 * error.
 */
int vrdma_fr_reg_wqe(const struct ib_reg_wr *reg, struct rxe_send_wr *w)
{
	struct vrdma_mr *mr = to_vmr(reg->mr);
	u64 iova = mr->ibmr.iova, len = mr->ibmr.length;
	int access = reg->access & ~IB_ACCESS_OPTIONAL;

	if (!mr->page_list)
		return -EINVAL;
	if (access & ~VIRTIO_RDMA_ACCESS_SUPPORTED)
		return -EOPNOTSUPP;
	/* Never let the device read entries map_mr_sg did not write. */
	if (((iova & (VIRTIO_RDMA_PAGE_SIZE - 1)) + len +
	     VIRTIO_RDMA_PAGE_SIZE - 1) / VIRTIO_RDMA_PAGE_SIZE > mr->npages)
		return -EINVAL;
	w->wr.mw.addr = iova;
	w->wr.mw.length = len;
	w->wr.mw.mr_lkey = mr->dev_lkey;
	w->wr.mw.rkey = reg->key;
	w->wr.mw.access = access;
	mr->dev_lkey = (mr->dev_lkey & ~0xffu) | (reg->key & 0xff);
	return 0;
}
