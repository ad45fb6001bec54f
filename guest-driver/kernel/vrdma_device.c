// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ib_device: attributes, the port, GIDs, user contexts, and
 * registration with the RDMA core.
 *
 * Link layer, two ways (docs/virtio-rdma.md 2.1):
 *
 * - With VIRTIO_RDMA_F_ROCE the port is RoCE v2, bound to the guest NIC
 *   whose MAC is config.mac (vrdma_netdev.c), like Soft-RoCE: the core
 *   builds the GID table from that netdev, creates the GSI QP (QP1) for the
 *   connection manager, and RDMA CM works. The driver translates the guest's
 *   source GID to the index of the same GID in the device's table.
 *
 * - Without it, the port is presented as an InfiniBand-link-layer port whose
 *   GID table is the device's (config space gids[]). The device assigns each
 *   VM its own RoCEv2 GIDs and interprets ah_attr.sgid_index as an index into
 *   exactly that table. No netdev is bound; the core asks query_gid, and
 *   sgid_index reaches the device unchanged. Address vectors must carry a
 *   GRH (perftest: -x <index>). No MAD/CM/SA capability is announced, so the
 *   core creates no QP0/QP1.
 */
#include <rdma/ib_addr.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "vrdma.h"

/* Bits the driver can honour, whatever else the device claims. */
#define VRDMA_DEVICE_CAP_FLAGS                                         \
	(IB_DEVICE_RC_RNR_NAK_GEN | IB_DEVICE_SYS_IMAGE_GUID |         \
	 IB_DEVICE_CURR_QP_STATE_MOD | IB_DEVICE_SHUTDOWN_PORT |       \
	 IB_DEVICE_BAD_PKEY_CNTR | IB_DEVICE_BAD_QKEY_CNTR)

static int vrdma_query_device(struct ib_device *ibdev,
			      struct ib_device_attr *attr,
			      struct ib_udata *udata)
{
	struct vrdma_dev *dev = to_vdev(ibdev);
	const struct virtio_rdma_resp_query_device *d = &dev->dev_attr;

	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = le64_to_cpu(d->fw_ver);
	attr->sys_image_guid = cpu_to_be64(le64_to_cpu(d->sys_image_guid));
	attr->max_mr_size = le64_to_cpu(d->max_mr_size);
	/* Page lists are in 4 KiB pages, whatever the device says. */
	attr->page_size_cap = PAGE_SIZE;
	attr->vendor_id = le32_to_cpu(d->vendor_id);
	attr->vendor_part_id = le32_to_cpu(d->vendor_part_id);
	attr->hw_ver = le32_to_cpu(d->hw_ver);
	attr->max_qp = le32_to_cpu(d->max_qp);
	attr->max_qp_wr = le32_to_cpu(d->max_qp_wr);
	attr->device_cap_flags = (le32_to_cpu(d->device_cap_flags) &
				  VRDMA_DEVICE_CAP_FLAGS) |
				 IB_DEVICE_PORT_ACTIVE_EVENT;
	attr->max_send_sge = le32_to_cpu(d->max_send_sge);
	attr->max_recv_sge = le32_to_cpu(d->max_recv_sge);
	attr->max_sge_rd = le32_to_cpu(d->max_sge_rd);
	attr->max_cq = le32_to_cpu(d->max_cq);
	attr->max_cqe = le32_to_cpu(d->max_cqe);
	attr->max_mr = le32_to_cpu(d->max_mr);
	attr->max_pd = le32_to_cpu(d->max_pd);
	attr->max_qp_rd_atom = le32_to_cpu(d->max_qp_rd_atom);
	attr->max_res_rd_atom = attr->max_qp_rd_atom * attr->max_qp;
	attr->max_qp_init_rd_atom = le32_to_cpu(d->max_qp_init_rd_atom);
	attr->atomic_cap = d->atomic_cap == IB_ATOMIC_HCA &&
			   virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_ATOMIC) ?
			   IB_ATOMIC_HCA : IB_ATOMIC_NONE;
	attr->max_ah = virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_UD) ?
		       le32_to_cpu(d->max_ah) : 0;
	if (virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_SRQ)) {
		attr->max_srq = le32_to_cpu(d->max_srq);
		attr->max_srq_wr = le32_to_cpu(d->max_srq_wr);
		attr->max_srq_sge = le32_to_cpu(d->max_srq_sge);
	}
	if (virtio_has_feature(dev->vdev, VIRTIO_RDMA_F_MW)) {
		/* Types 1 and 2B, as rxe (docs/virtio-rdma.md 4.7). */
		attr->device_cap_flags |= IB_DEVICE_MEM_WINDOW |
					  IB_DEVICE_MEM_WINDOW_TYPE_2B;
		attr->max_mw = le32_to_cpu(d->max_mw);
	}
	attr->max_pkeys = 1;
	attr->local_ca_ack_delay = d->local_ca_ack_delay;
	/*
	 * The local DMA lkey names guest-physical memory on the GSI QP, which
	 * exists with RoCE only (docs/virtio-rdma.md 4.6): the MAD layer's PD
	 * then needs no DMA MR.
	 */
	if (dev->roce)
		attr->kernel_cap_flags = IBK_LOCAL_DMA_LKEY;
	/*
	 * VIRTIO_RDMA_F_KERNEL (4.8): the local DMA lkey on kernel RC/UC QPs
	 * too, and fast registration (ULPs such as nvme-rdma refuse a device
	 * without IB_DEVICE_MEM_MGT_EXTENSIONS).
	 */
	if (dev->kernel_verbs) {
		attr->kernel_cap_flags |= IBK_LOCAL_DMA_LKEY;
		attr->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
		attr->max_fast_reg_page_list_len = dev->max_fr_pages;
	}
	return 0;
}

/* RoCE: the active MTU is also bounded by the bound netdev's MTU. */
static enum ib_mtu vrdma_roce_mtu(struct vrdma_dev *dev, enum ib_mtu mtu)
{
	enum ib_mtu net_mtu;

	if (!READ_ONCE(dev->netdev_bound))
		return mtu;
	net_mtu = iboe_get_mtu(READ_ONCE(dev->netdev_mtu));
	return net_mtu && net_mtu < mtu ? net_mtu : mtu;
}

static int vrdma_query_port(struct ib_device *ibdev, u32 port,
			    struct ib_port_attr *attr)
{
	struct vrdma_dev *dev = to_vdev(ibdev);
	const struct virtio_rdma_resp_query_port *p = &dev->port_attr;
	unsigned long flags;

	/* The core zeroed attr. State, MTU and link come from the config,
	 * which port events refresh; the rest never changes. */
	attr->max_msg_sz = le32_to_cpu(p->max_msg_sz);
	attr->pkey_tbl_len = 1;
	if (dev->roce) {
		/* As rxe: connection manager, no LID, no subnet manager. */
		attr->port_cap_flags = IB_PORT_CM_SUP;
		attr->gid_tbl_len = VRDMA_ROCE_GID_TBL_LEN;
	} else {
		attr->port_cap_flags = le32_to_cpu(p->port_cap_flags);
		attr->gid_tbl_len = VIRTIO_RDMA_MAX_GIDS;
		attr->lid = le16_to_cpu(p->lid);
	}
	spin_lock_irqsave(&dev->cfg_lock, flags);
	attr->state = dev->cfg.port_state;
	attr->max_mtu = dev->cfg.max_mtu;
	attr->active_mtu = dev->cfg.active_mtu;
	attr->phys_mtu = ib_mtu_enum_to_int(dev->cfg.max_mtu);
	attr->active_speed = dev->cfg.active_speed;
	attr->active_width = dev->cfg.active_width;
	attr->phys_state = dev->cfg.phys_state;
	spin_unlock_irqrestore(&dev->cfg_lock, flags);
	if (dev->roce)
		attr->active_mtu = vrdma_roce_mtu(dev, attr->active_mtu);
	/*
	 * The backend is gone: so is the link, until a new incarnation. A
	 * RoCE port without its NIC cannot carry traffic either.
	 */
	if (vrdma_dead(dev) || !vrdma_port_usable(dev)) {
		attr->state = IB_PORT_DOWN;
		attr->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	}
	return 0;
}

static int vrdma_get_port_immutable(struct ib_device *ibdev, u32 port,
				    struct ib_port_immutable *imm)
{
	struct vrdma_dev *dev = to_vdev(ibdev);

	imm->pkey_tbl_len = 1;
	if (dev->roce) {
		imm->gid_tbl_len = VRDMA_ROCE_GID_TBL_LEN;
		imm->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
		imm->max_mad_size = IB_MGMT_MAD_SIZE;
	} else {
		imm->gid_tbl_len = VIRTIO_RDMA_MAX_GIDS;
		imm->core_cap_flags = RDMA_CORE_CAP_PROT_IB;
		imm->max_mad_size = 0;
	}
	return 0;
}

static enum rdma_link_layer vrdma_get_link_layer(struct ib_device *ibdev,
						 u32 port)
{
	return to_vdev(ibdev)->roce ? IB_LINK_LAYER_ETHERNET :
				      IB_LINK_LAYER_INFINIBAND;
}

/* Entries past num_gids read as zero, which the core treats as empty. */
static int vrdma_query_gid(struct ib_device *ibdev, u32 port, int index,
			   union ib_gid *gid)
{
	struct vrdma_dev *dev = to_vdev(ibdev);
	unsigned long flags;

	if (index < 0 || index >= VIRTIO_RDMA_MAX_GIDS)
		return -EINVAL;
	spin_lock_irqsave(&dev->cfg_lock, flags);
	if (index < dev->cfg.num_gids)
		memcpy(gid->raw, dev->cfg.gids[index], sizeof(gid->raw));
	else
		memset(gid->raw, 0, sizeof(gid->raw));
	spin_unlock_irqrestore(&dev->cfg_lock, flags);
	return 0;
}

static int vrdma_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			    u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	*pkey = 0xffff; /* the default partition, full membership */
	return 0;
}

/* librxe's context needs nothing from the driver: rings come per object. */
static int vrdma_alloc_ucontext(struct ib_ucontext *uctx,
				struct ib_udata *udata)
{
	return 0;
}

static void vrdma_dealloc_ucontext(struct ib_ucontext *uctx)
{
}

/*
 * Nothing of ours to do: the core zaps the user mappings of the rings and
 * destroys every object of the context itself. Having the op is what lets
 * ib_unregister_device() go on while processes still hold contexts (the
 * backend was lost, or the module is removed): they get
 * IBV_EVENT_DEVICE_FATAL and EIO from every later verb.
 */
static void vrdma_disassociate_ucontext(struct ib_ucontext *uctx)
{
}

static void vrdma_get_fw_str(struct ib_device *ibdev, char *str)
{
	struct vrdma_dev *dev = to_vdev(ibdev);

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%llu",
		 le64_to_cpu(dev->dev_attr.fw_ver));
}

static const struct ib_device_ops vrdma_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_RXE,
	.uverbs_abi_ver = VRDMA_UVERBS_ABI_VERSION,

	.alloc_mw = vrdma_alloc_mw,
	.alloc_pd = vrdma_alloc_pd,
	.alloc_ucontext = vrdma_alloc_ucontext,
	/* ibv_create_ah (uverbs CREATE_AH) needs create_user_ah. */
	.create_ah = vrdma_create_ah,
	.create_user_ah = vrdma_create_ah,
	.create_cq = vrdma_create_cq,
	.create_qp = vrdma_create_qp,
	.create_srq = vrdma_create_srq,
	.dealloc_mw = vrdma_dealloc_mw,
	.dealloc_pd = vrdma_dealloc_pd,
	.dealloc_ucontext = vrdma_dealloc_ucontext,
	.dereg_mr = vrdma_dereg_mr,
	.disassociate_ucontext = vrdma_disassociate_ucontext,
	.destroy_ah = vrdma_destroy_ah,
	.destroy_cq = vrdma_destroy_cq,
	.destroy_qp = vrdma_destroy_qp,
	.destroy_srq = vrdma_destroy_srq,
	.get_dev_fw_str = vrdma_get_fw_str,
	.get_dma_mr = vrdma_get_dma_mr,
	.get_link_layer = vrdma_get_link_layer,
	.get_port_immutable = vrdma_get_port_immutable,
	.mmap = vrdma_mmap,
	.mmap_free = vrdma_mmap_free,
	.modify_qp = vrdma_modify_qp,
	.modify_srq = vrdma_modify_srq,
	.poll_cq = vrdma_poll_cq,
	.post_recv = vrdma_post_recv,
	.post_send = vrdma_post_send,
	.post_srq_recv = vrdma_post_srq_recv,
	.query_device = vrdma_query_device,
	.query_gid = vrdma_query_gid,
	.query_pkey = vrdma_query_pkey,
	.query_port = vrdma_query_port,
	.query_qp = vrdma_query_qp,
	.query_srq = vrdma_query_srq,
	.reg_user_mr = vrdma_reg_user_mr,
	.req_notify_cq = vrdma_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, vrdma_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, vrdma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, vrdma_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, vrdma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, vrdma_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, vrdma_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, vrdma_ucontext, ibuc),
};

/* VIRTIO_RDMA_F_KERNEL only: without them the core refuses ib_alloc_mr. */
static const struct ib_device_ops vrdma_fr_ops = {
	.alloc_mr = vrdma_alloc_mr,
	.map_mr_sg = vrdma_map_mr_sg,
};

int vrdma_register_ib(struct vrdma_dev *dev)
{
	struct ib_device *ib = &dev->ib;
	int ret;

	ib->node_type = RDMA_NODE_IB_CA;
	ib->phys_port_cnt = VRDMA_PORT;
	ib->num_comp_vectors = 1;
	ib->local_dma_lkey = VIRTIO_RDMA_LOCAL_DMA_LKEY;
	ib->node_guid = cpu_to_be64(le64_to_cpu(dev->cfg.node_guid));
	ib->dev.parent = &dev->vdev->dev;
	strscpy(ib->node_desc, "virtio-rdma", sizeof(ib->node_desc));
	ib_set_device_ops(ib, &vrdma_dev_ops);
	if (dev->kernel_verbs)
		ib_set_device_ops(ib, &vrdma_fr_ops);
	/*
	 * The core leaves the data-path write() commands off unless a driver
	 * asks: librxe's send doorbell is POST_SEND with no work requests, and
	 * ibv_req_notify_cq is REQ_NOTIFY_CQ (rxe enables the same two).
	 */
	ib->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
			       BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);

	/*
	 * No DMA device: user memory is described to the device by physical
	 * page address (see vrdma_mr.c), so the core needs no DMA mapping.
	 * Kernel consumers' "DMA addresses" are then kernel virtual addresses
	 * (ib_uses_virt_dma()); the driver turns those of the GSI QP into
	 * guest-physical ones (vrdma_kverbs.c).
	 */
	ret = ib_register_device(ib, "vrdma%d", NULL);
	if (ret)
		return ret;
	dev->ib_registered = true;
	ret = vrdma_netdev_start(dev);
	if (ret) {
		vrdma_unregister_ib(dev);
		return ret;
	}
	return 0;
}

void vrdma_unregister_ib(struct vrdma_dev *dev)
{
	if (!dev->ib_registered)
		return;
	/* No port event may reach the core while it takes the device down. */
	vrdma_netdev_stop(dev);
	WRITE_ONCE(dev->ib_registered, false);
	cancel_work_sync(&dev->port_work);
	ib_unregister_device(&dev->ib);
	/* The kernel AHs the core destroyed from atomic context. */
	vrdma_kwork_flush(dev);
}
