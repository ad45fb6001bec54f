// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory registration: pin exactly the MR's user pages and hand their
 * guest-physical addresses to the device, which maps only those pages.
 * Guest RAM is never registered as a whole, hence no DMA MR. And memory
 * windows (VIRTIO_RDMA_F_MW), which only name an MR's pages.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/scatterlist.h>
#include <rdma/ib_umem.h>

#include "vrdma.h"

/*
 * Optional access bits (relaxed ordering) may be ignored, per the verbs
 * contract; anything else beyond the IBV_ACCESS_* basics is refused.
 */
static u32 vrdma_mr_access(struct vrdma_dev *dev)
{
	return VIRTIO_RDMA_ACCESS_SUPPORTED |
	       (virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_MW) ?
		VIRTIO_RDMA_ACCESS_MW_BIND : 0);
}

static int vrdma_check_access(struct vrdma_dev *dev, int access)
{
	if ((access & ~IB_ACCESS_OPTIONAL) & ~vrdma_mr_access(dev))
		return -EOPNOTSUPP;
	return 0;
}

static __le64 *vrdma_umem_pages(struct ib_umem *umem, u32 *npages)
{
	struct sg_page_iter it;
	__le64 *pages;
	size_t n = ib_umem_num_pages(umem), i = 0;

	if (n > U32_MAX)
		return ERR_PTR(-EINVAL);
	pages = kvmalloc_array(n, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return ERR_PTR(-ENOMEM);
	/*
	 * Walk the pinned CPU pages rather than DMA blocks: the device is
	 * addressed by guest-physical address (no VIRTIO_F_ACCESS_PLATFORM),
	 * as the virtqueues themselves are.
	 */
	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (i == n)
			break;
		pages[i++] = cpu_to_le64(page_to_phys(sg_page_iter_page(&it)));
	}
	if (i != n) {
		kvfree(pages);
		return ERR_PTR(-EFAULT);
	}
	*npages = n;
	return pages;
}

struct ib_mr *vrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 virt_addr, int access, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibpd->device);
	struct virtio_rdma_req_reg_mr req = {};
	struct virtio_rdma_resp_reg_mr resp;
	struct vrdma_mr *mr;
	__le64 *pages;
	u32 npages = 0;
	int ret;

	ret = vrdma_check_access(dev, access);
	if (ret)
		return ERR_PTR(ret);
	if (!length || length > le64_to_cpu(dev->cfg.max_mr_size))
		return ERR_PTR(-EINVAL);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free;
	}
	if (ib_umem_num_pages(mr->umem) > le32_to_cpu(dev->cfg.max_mr_pages)) {
		ret = -EINVAL;
		goto err_umem;
	}
	pages = vrdma_umem_pages(mr->umem, &npages);
	if (IS_ERR(pages)) {
		ret = PTR_ERR(pages);
		goto err_umem;
	}

	req.pd_handle = cpu_to_le32(to_vpd(ibpd)->handle);
	req.access_flags = cpu_to_le32(access & vrdma_mr_access(dev));
	req.iova = cpu_to_le64(virt_addr);
	req.length = cpu_to_le64(length);
	req.first_page_offset = cpu_to_le32(ib_umem_offset(mr->umem));
	req.npages = cpu_to_le32(npages);
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_REG_MR, &req, sizeof(req),
			 pages, npages, &resp, sizeof(resp));
	kvfree(pages);
	if (ret)
		goto err_umem;

	mr->handle = le32_to_cpu(resp.mr_handle);
	mr->ibmr.lkey = le32_to_cpu(resp.lkey);
	mr->ibmr.rkey = le32_to_cpu(resp.rkey);
	mr->ibmr.iova = virt_addr;
	mr->ibmr.length = length;
	return &mr->ibmr;

err_umem:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

int vrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct vrdma_mr *mr = to_vmr(ibmr);
	struct vrdma_dev *dev = to_vdev(ibmr->device);
	int ret;

	if (mr->page_list)
		return vrdma_fr_dereg(mr); /* ALLOC_MR's (vrdma_fr.c) */
	/* A device that was reset holds nothing: no command needed. */
	ret = vrdma_released(dev) ? 0 :
	      vrdma_destroy_handle(dev, VIRTIO_RDMA_CMD_DEREG_MR, mr->handle);

	/*
	 * With windows bound to the MR the device refuses (EINVAL) and the MR
	 * stays registered, as on rxe (IBA 10.6.7.2.6): the caller sees the
	 * error and the core keeps the object (and retries at close, after
	 * the windows).
	 */
	if (ret == -EINVAL && !vrdma_released(dev))
		return ret;
	/* Unpin only once the device has let go of the pages. */
	if (ret && ret != -ENOENT && !vrdma_released(dev)) {
		dev_warn_ratelimited(&dev->vdev->dev,
				     "DEREG_MR %#x failed (%d): memory kept\n",
				     mr->handle, ret);
		return 0;
	}
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

int vrdma_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibmw->device);
	struct vrdma_mw *mw = container_of(ibmw, struct vrdma_mw, ibmw);
	struct virtio_rdma_req_alloc_mw req = {};
	struct virtio_rdma_resp_alloc_mw resp;
	int ret;

	if (!virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_MW))
		return -EOPNOTSUPP;
	req.pd_handle = cpu_to_le32(to_vpd(ibmw->pd)->handle);
	req.type = cpu_to_le32(ibmw->type);  /* IB_MW_TYPE_1 1, _2 2 */
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_ALLOC_MW, &req, sizeof(req),
			 NULL, 0, &resp, sizeof(resp));
	if (ret)
		return ret;
	mw->handle = le32_to_cpu(resp.mw_handle);
	ibmw->rkey = le32_to_cpu(resp.rkey);
	return 0;
}

int vrdma_dealloc_mw(struct ib_mw *ibmw)
{
	struct vrdma_mw *mw = container_of(ibmw, struct vrdma_mw, ibmw);

	/* A window holds no guest pages: nothing to keep if the device fails. */
	vrdma_destroy_or_keep(to_vdev(ibmw->device), VIRTIO_RDMA_CMD_DEALLOC_MW,
			      mw->handle);
	return 0;
}

/*
 * No whole-memory registration: kernel consumers name memory with the
 * local DMA lkey (VIRTIO_RDMA_F_KERNEL) and fast-registration MRs
 * (vrdma_fr.c).
 */
struct ib_mr *vrdma_get_dma_mr(struct ib_pd *ibpd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}
