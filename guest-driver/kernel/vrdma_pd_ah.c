// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protection domains and address handles: thin wrappers around device
 * commands. An AH's device handle is what librxe writes into a UD send
 * WQE's wr.ud.ah_num, so the device never reads an address vector from
 * guest-writable memory.
 */
#include <rdma/ib_verbs.h>

#include "vrdma.h"

int vrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrdma_pd *pd = to_vpd(ibpd);
	struct virtio_rdma_resp_create_pd resp;
	int ret;

	ret = vrdma_exec(to_vdev(ibpd->device), VIRTIO_RDMA_CMD_CREATE_PD,
			 NULL, 0, NULL, 0, &resp, sizeof(resp));
	if (ret)
		return ret;
	pd->handle = le32_to_cpu(resp.pd_handle);
	return 0;
}

int vrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	/* Nothing of the guest's hangs on a PD: a failure only leaks a handle. */
	vrdma_destroy_or_keep(to_vdev(ibpd->device), VIRTIO_RDMA_CMD_DESTROY_PD,
			      to_vpd(ibpd)->handle);
	return 0;
}

void vrdma_ah_attr_to_dev(const struct rdma_ah_attr *attr,
			  struct virtio_rdma_ah_attr *dst)
{
	memset(dst, 0, sizeof(*dst));
	dst->port_num = rdma_ah_get_port_num(attr);
	dst->sl = rdma_ah_get_sl(attr);
	dst->static_rate = rdma_ah_get_static_rate(attr);
	dst->dlid = cpu_to_le16(rdma_ah_get_dlid(attr));
	if (rdma_ah_get_ah_flags(attr) & IB_AH_GRH) {
		const struct ib_global_route *grh = rdma_ah_read_grh(attr);

		memcpy(dst->dgid, grh->dgid.raw, sizeof(dst->dgid));
		dst->flow_label = cpu_to_le32(grh->flow_label);
		dst->sgid_index = grh->sgid_index;
		dst->hop_limit = grh->hop_limit;
		dst->traffic_class = grh->traffic_class;
		dst->is_global = 1;
	}
	if (attr->type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(dst->dmac, attr->roce.dmac, sizeof(dst->dmac));
}

int vrdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		    struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibah->device);
	struct vrdma_ah *ah = to_vah(ibah);
	struct virtio_rdma_req_create_ah req = {
		.pd_handle = cpu_to_le32(to_vpd(ibah->pd)->handle),
	};
	struct virtio_rdma_resp_create_ah resp;
	int ret;

	if (!virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_UD))
		return -EOPNOTSUPP;
	/* A device command sleeps; atomic (kernel) AH creation cannot. */
	if (!(init_attr->flags & RDMA_CREATE_AH_SLEEPABLE))
		return -EOPNOTSUPP;
	vrdma_ah_attr_to_dev(init_attr->ah_attr, &req.attr);
	ret = vrdma_exec(dev, VIRTIO_RDMA_CMD_CREATE_AH, &req, sizeof(req),
			 NULL, 0, &resp, sizeof(resp));
	if (ret)
		return ret;
	ah->handle = le32_to_cpu(resp.ah_handle);

	if (udata) {
		struct rxe_create_ah_resp uresp = { .ah_num = ah->handle };

		ret = ib_copy_to_udata(udata, &uresp,
				       min(udata->outlen, sizeof(uresp)));
		if (ret) {
			vrdma_destroy_handle(dev, VIRTIO_RDMA_CMD_DESTROY_AH,
					     ah->handle);
			return ret;
		}
	}
	return 0;
}

int vrdma_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct vrdma_dev *dev = to_vdev(ibah->device);

	if (!(flags & RDMA_DESTROY_AH_SLEEPABLE)) {
		/* Cannot wait for the device here: the handle leaks on it. */
		dev_warn_ratelimited(&dev->vdev->dev,
				     "AH destroyed in atomic context\n");
		return 0;
	}
	vrdma_destroy_or_keep(dev, VIRTIO_RDMA_CMD_DESTROY_AH,
			      to_vah(ibah)->handle);
	return 0;
}
