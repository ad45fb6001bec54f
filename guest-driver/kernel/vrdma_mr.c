// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory registration: pin exactly the MR's user pages and hand their
 * guest-physical addresses to the device, which maps only those pages.
 * Guest RAM is never registered as a whole, hence no DMA MR.
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
static int vrdma_check_access(int access)
{
	if ((access & ~IB_ACCESS_OPTIONAL) & ~VIRTIO_RDMA_ACCESS_SUPPORTED)
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

	ret = vrdma_check_access(access);
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
	req.access_flags = cpu_to_le32(access & VIRTIO_RDMA_ACCESS_SUPPORTED);
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

	/* Unpin only once the device has let go of the pages. */
	if (!vrdma_destroy_or_keep(to_vdev(ibmr->device),
				   VIRTIO_RDMA_CMD_DEREG_MR, mr->handle))
		return 0;
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/* Kernel ULPs are not supported: there is no whole-memory registration. */
struct ib_mr *vrdma_get_dma_mr(struct ib_pd *ibpd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}
