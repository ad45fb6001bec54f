/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * virtio-rdma device ABI, version 1.
 *
 * This header is the single definition of every structure that crosses the
 * guest/host boundary of the vhost-rdma device. It is shared verbatim by the
 * guest kernel module (guest-driver/), the in-process test guest and the host
 * backend. docs/virtio-rdma.md is the prose specification; keep both true.
 *
 * Rules for everything below:
 *  - fixed-width little-endian fields (__le*), explicit padding, no pointers,
 *    no host-only types; every size and offset is checked at compile time at
 *    the bottom of this file;
 *  - reserved fields are written as zero by the driver and ignored by the
 *    device unless a future feature bit gives them meaning;
 *  - work and completion queues are NOT defined here: they use the Linux
 *    Soft-RoCE user ABI (rdma/rdma_user_rxe.h: struct rxe_queue_buf,
 *    struct rxe_send_wqe, struct rxe_recv_wqe) and struct ib_uverbs_wc
 *    (rdma/ib_user_verbs.h) unchanged, so that the stock rdma-core provider
 *    librxe can drive them from guest user space.
 */
#ifndef VHOST_RDMA_ABI_VIRTIO_RDMA_H_
#define VHOST_RDMA_ABI_VIRTIO_RDMA_H_

#include <linux/types.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

/* ------------------------------------------------------------------------ */
/* Identity                                                                  */
/* ------------------------------------------------------------------------ */

#define VIRTIO_ID_RDMA 42 /* reserved for RDMA by the virtio specification */
#define VIRTIO_RDMA_PCI_VENDOR_ID 0x1af4
#define VIRTIO_RDMA_PCI_DEVICE_ID (0x1040 + VIRTIO_ID_RDMA) /* 0x106a */
#define VIRTIO_RDMA_ABI_VERSION 1

/* Device-specific feature bits (virtio reserves 0..23 for the device). */
#define VIRTIO_RDMA_F_SRQ 0       /* shared receive queues */
#define VIRTIO_RDMA_F_UD 1        /* unreliable datagram QPs and AHs */
#define VIRTIO_RDMA_F_ATOMIC 2    /* 8-byte atomics on RC QPs */
/*
 * The port is RoCE v2 (Ethernet link layer) and belongs to the guest NIC
 * whose MAC is config.mac; the device offers the GSI QP (QP1, for the
 * guest's RDMA CM) and the local DMA lkey on it. Offered only when the
 * operator gave the VM a MAC.
 */
#define VIRTIO_RDMA_F_ROCE 3
/*
 * Memory windows, types 1 and 2B (ALLOC_MW, DEALLOC_MW, the BIND_MW,
 * LOCAL_INV and SEND_WITH_INV send WQEs, IBV_ACCESS_MW_BIND on REG_MR):
 * offered when the host RNIC has windows and the VM's max_mw quota is not 0.
 */
#define VIRTIO_RDMA_F_MW 4
/*
 * Kernel consumers (docs/virtio-rdma.md §4.8): the local DMA lkey on kernel
 * QPs (VIRTIO_RDMA_QP_F_KERNEL), fast-registration MRs (ALLOC_MR and the
 * REG_MR send WQE). Offered when the operator allowed it for the VM
 * (kernel_verbs) and the RNIC has indirect MRs.
 */
#define VIRTIO_RDMA_F_KERNEL 5

/* ------------------------------------------------------------------------ */
/* Virtqueues                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Queue 0 carries control commands, queue 1 asynchronous events, queues
 * 2 .. 2 + num_doorbell_queues - 1 carry doorbells. A driver normally uses
 * one doorbell queue per vCPU; any QP, SRQ or CQ may be rung on any doorbell
 * queue, so the number of QPs is independent of the number of virtqueues.
 */
#define VIRTIO_RDMA_VQ_CTRL 0
#define VIRTIO_RDMA_VQ_EVENT 1
#define VIRTIO_RDMA_VQ_DOORBELL0 2
#define VIRTIO_RDMA_MAX_DOORBELL_QUEUES 64
#define VIRTIO_RDMA_MAX_QUEUE_SIZE 1024

/* The page size of every guest page list in this ABI (rings and MRs). */
#define VIRTIO_RDMA_PAGE_SHIFT 12
#define VIRTIO_RDMA_PAGE_SIZE (1u << VIRTIO_RDMA_PAGE_SHIFT)

/* ------------------------------------------------------------------------ */
/* Configuration space (at most 256 bytes: VHOST_USER_MAX_CONFIG_SIZE)      */
/* ------------------------------------------------------------------------ */

#define VIRTIO_RDMA_MAX_GIDS 8

enum virtio_rdma_port_state {
	VIRTIO_RDMA_PORT_DOWN = 1,
	VIRTIO_RDMA_PORT_INIT = 2,
	VIRTIO_RDMA_PORT_ARMED = 3,
	VIRTIO_RDMA_PORT_ACTIVE = 4,
};

/* Values of IBV_MTU_*: 1 = 256 B ... 5 = 4096 B. */
enum virtio_rdma_mtu {
	VIRTIO_RDMA_MTU_256 = 1,
	VIRTIO_RDMA_MTU_512 = 2,
	VIRTIO_RDMA_MTU_1024 = 3,
	VIRTIO_RDMA_MTU_2048 = 4,
	VIRTIO_RDMA_MTU_4096 = 5,
};

struct virtio_rdma_config {
	__le32 abi_version;          /* VIRTIO_RDMA_ABI_VERSION */
	__le32 num_doorbell_queues;  /* 1 .. VIRTIO_RDMA_MAX_DOORBELL_QUEUES */
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_inline_data;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le64 max_mr_size;
	__le32 max_pd;
	__le32 max_ah;
	__le32 max_srq;
	__le32 max_srq_wr;
	__le32 max_srq_sge;
	__le32 max_qp_rd_atom;
	__le32 max_mr_pages;         /* page-list entries in one REG_MR */
	__le32 max_msg_sz;
	__le64 node_guid;
	__u8 phys_port_cnt;          /* always 1 */
	__u8 port_state;             /* enum virtio_rdma_port_state */
	__u8 active_mtu;             /* enum virtio_rdma_mtu */
	__u8 max_mtu;                /* enum virtio_rdma_mtu */
	__u8 active_speed;           /* IB_SPEED_* encoding */
	__u8 active_width;           /* IB_WIDTH_* encoding */
	__u8 phys_state;             /* 5 = LinkUp, 3 = Disabled */
	__u8 num_gids;               /* valid entries in gids[] */
	__u8 mac[6];                 /* VIRTIO_RDMA_F_ROCE: the guest NIC's MAC */
	__le16 reserved0;
	__le32 reserved[6];
	__u8 gids[VIRTIO_RDMA_MAX_GIDS][16]; /* RoCEv2 GIDs given to this VM */
};

/* ------------------------------------------------------------------------ */
/* Control queue                                                             */
/* ------------------------------------------------------------------------ */

/*
 * A command is one descriptor chain: device-readable
 *   struct virtio_rdma_cmd_hdr, the command's request struct, then (for the
 *   commands that carry one) a page list of __le64 guest-physical addresses,
 * followed by device-writable
 *   struct virtio_rdma_resp_hdr, then the command's response struct.
 * The device may split or join these across descriptors in any way; only the
 * byte stream matters. Commands complete in order.
 */
enum virtio_rdma_cmd {
	VIRTIO_RDMA_CMD_QUERY_DEVICE = 1,
	VIRTIO_RDMA_CMD_QUERY_PORT = 2,
	VIRTIO_RDMA_CMD_QUERY_GID = 3,
	VIRTIO_RDMA_CMD_CREATE_PD = 4,
	VIRTIO_RDMA_CMD_DESTROY_PD = 5,
	VIRTIO_RDMA_CMD_REG_MR = 6,
	VIRTIO_RDMA_CMD_DEREG_MR = 7,
	VIRTIO_RDMA_CMD_CREATE_CQ = 8,
	VIRTIO_RDMA_CMD_DESTROY_CQ = 9,
	VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ = 10,
	VIRTIO_RDMA_CMD_CREATE_QP = 11,
	VIRTIO_RDMA_CMD_MODIFY_QP = 12,
	VIRTIO_RDMA_CMD_QUERY_QP = 13,
	VIRTIO_RDMA_CMD_DESTROY_QP = 14,
	VIRTIO_RDMA_CMD_CREATE_AH = 15,
	VIRTIO_RDMA_CMD_DESTROY_AH = 16,
	VIRTIO_RDMA_CMD_CREATE_SRQ = 17,
	VIRTIO_RDMA_CMD_MODIFY_SRQ = 18,
	VIRTIO_RDMA_CMD_DESTROY_SRQ = 19,
	VIRTIO_RDMA_CMD_ALLOC_MW = 20,         /* VIRTIO_RDMA_F_MW */
	VIRTIO_RDMA_CMD_DEALLOC_MW = 21,       /* VIRTIO_RDMA_F_MW */
	VIRTIO_RDMA_CMD_ALLOC_MR = 22,         /* VIRTIO_RDMA_F_KERNEL */
	VIRTIO_RDMA_CMD_MAX = 22,
};

enum virtio_rdma_status {
	VIRTIO_RDMA_OK = 0,
	VIRTIO_RDMA_ERR_INVALID = 1,     /* malformed request, bad value   -> EINVAL */
	VIRTIO_RDMA_ERR_UNSUPPORTED = 2, /* valid but not offered         -> EOPNOTSUPP */
	VIRTIO_RDMA_ERR_NO_RESOURCE = 3, /* quota or table full           -> ENOMEM */
	VIRTIO_RDMA_ERR_BAD_HANDLE = 4,  /* not an object of this VM       -> ENOENT */
	VIRTIO_RDMA_ERR_BAD_STATE = 5,   /* illegal QP state transition    -> EINVAL */
	VIRTIO_RDMA_ERR_BUSY = 6,        /* still referenced (PD with MRs) -> EBUSY */
	VIRTIO_RDMA_ERR_FAULT = 7,       /* guest address not in guest RAM -> EFAULT */
	VIRTIO_RDMA_ERR_ACCESS = 8,      /* access flags not allowed       -> EACCES */
};

struct virtio_rdma_cmd_hdr {
	__le32 cmd;                  /* enum virtio_rdma_cmd */
	__le32 reserved;
};

struct virtio_rdma_resp_hdr {
	__le32 status;               /* enum virtio_rdma_status */
	__le32 reserved;
};

/* QUERY_DEVICE: no request body. */
struct virtio_rdma_resp_query_device {
	__le64 fw_ver;
	__le64 node_guid;
	__le64 sys_image_guid;
	__le64 max_mr_size;
	__le64 page_size_cap;
	__le32 vendor_id;
	__le32 vendor_part_id;
	__le32 hw_ver;
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 device_cap_flags;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_sge_rd;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_qp_rd_atom;
	__le32 max_qp_init_rd_atom;
	__le32 max_ah;
	__le32 max_srq;
	__le32 max_srq_wr;
	__le32 max_srq_sge;
	__le32 max_inline_data;
	__le32 max_pkeys;
	__u8 atomic_cap;             /* IBV_ATOMIC_NONE = 0, IBV_ATOMIC_HCA = 1 */
	__u8 local_ca_ack_delay;
	__u8 phys_port_cnt;
	__u8 reserved;
	__le32 max_mw;               /* VIRTIO_RDMA_F_MW: the VM's window quota */
	__le32 max_fr_pages;         /* VIRTIO_RDMA_F_KERNEL: ALLOC_MR's max_pages bound
	                              * (max_fast_reg_page_list_len), else 0 */
};

struct virtio_rdma_req_query_port {
	__le32 port_num;             /* 1 */
	__le32 reserved;
};

struct virtio_rdma_resp_query_port {
	__le32 port_cap_flags;
	__le32 max_msg_sz;
	__le32 gid_tbl_len;
	__le32 reserved0;
	__le16 pkey_tbl_len;
	__le16 lid;
	__u8 state;                  /* enum virtio_rdma_port_state */
	__u8 max_mtu;
	__u8 active_mtu;
	__u8 active_speed;
	__u8 active_width;
	__u8 phys_state;
	__u8 link_layer;             /* IBV_LINK_LAYER_ETHERNET = 2 */
	__u8 reserved1;
};

struct virtio_rdma_req_query_gid {
	__le32 port_num;
	__le32 index;
};

struct virtio_rdma_resp_query_gid {
	__u8 gid[16];
	__le32 gid_type;             /* 2 = RoCE v2 */
	__le32 reserved;
};

struct virtio_rdma_resp_create_pd {
	__le32 pd_handle;
	__le32 reserved;
};

/* DESTROY_PD, DESTROY_CQ, DESTROY_QP, DESTROY_AH, DESTROY_SRQ, DEREG_MR
 * (also of an ALLOC_MR MR), DEALLOC_MW. */
struct virtio_rdma_req_handle {
	__le32 handle;
	__le32 reserved;
};

/* Access flags: the values of IBV_ACCESS_*. */
#define VIRTIO_RDMA_ACCESS_LOCAL_WRITE 0x1
#define VIRTIO_RDMA_ACCESS_REMOTE_WRITE 0x2
#define VIRTIO_RDMA_ACCESS_REMOTE_READ 0x4
#define VIRTIO_RDMA_ACCESS_REMOTE_ATOMIC 0x8
#define VIRTIO_RDMA_ACCESS_SUPPORTED 0xf
/* REG_MR only, with VIRTIO_RDMA_F_MW: windows may be bound to the MR. */
#define VIRTIO_RDMA_ACCESS_MW_BIND 0x10

/*
 * REG_MR is followed by npages __le64 guest-physical page addresses, each
 * VIRTIO_RDMA_PAGE_SIZE aligned. The MR covers bytes
 * [first_page_offset, first_page_offset + length) of the concatenated pages
 * and is addressed by the guest as [iova, iova + length). Only these pages
 * are touched by the device: guest RAM is never registered as a whole.
 */
struct virtio_rdma_req_reg_mr {
	__le32 pd_handle;
	__le32 access_flags;
	__le64 iova;
	__le64 length;
	__le32 first_page_offset;    /* < VIRTIO_RDMA_PAGE_SIZE */
	__le32 npages;               /* <= config.max_mr_pages */
};

struct virtio_rdma_resp_reg_mr {
	__le32 mr_handle;
	__le32 lkey;
	__le32 rkey;                 /* 0 when no remote access was asked */
	__le32 reserved;
};

/*
 * A ring in guest memory: a struct rxe_queue_buf header followed by
 * 2^log2_num_elem elements of 2^log2_elem_size bytes, starting at offset 0 of
 * the first page of its page list. The device keeps its own copy of the
 * geometry given here and never reads log2_elem_size or index_mask back from
 * the guest-writable header.
 */
struct virtio_rdma_ring_desc {
	__le32 log2_num_elem;
	__le32 log2_elem_size;
	__le32 npages;               /* pages of this ring in the page list */
	__le32 reserved;
};

/* CREATE_CQ is followed by cq.npages page addresses. */
struct virtio_rdma_req_create_cq {
	struct virtio_rdma_ring_desc ring;
	__le32 cqe;                  /* requested depth, < 2^log2_num_elem */
	__le32 reserved;
};

struct virtio_rdma_resp_create_cq {
	__le32 cq_handle;
	__le32 cqe;                  /* usable depth */
};

#define VIRTIO_RDMA_NOTIFY_NEXT_COMP 1
#define VIRTIO_RDMA_NOTIFY_SOLICITED 2

struct virtio_rdma_req_notify_cq {
	__le32 cq_handle;
	__le32 flags;                /* VIRTIO_RDMA_NOTIFY_* */
};

/* QP types: the values of IBV_QPT_* (GSI: IB_QPT_GSI, kernel only). */
enum virtio_rdma_qp_type {
	VIRTIO_RDMA_QPT_GSI = 1,     /* VIRTIO_RDMA_F_ROCE; one per VM, QPN 1 */
	VIRTIO_RDMA_QPT_RC = 2,
	VIRTIO_RDMA_QPT_UC = 3,
	VIRTIO_RDMA_QPT_UD = 4,
};

/* QP states: the values of IBV_QPS_*. */
enum virtio_rdma_qp_state {
	VIRTIO_RDMA_QPS_RESET = 0,
	VIRTIO_RDMA_QPS_INIT = 1,
	VIRTIO_RDMA_QPS_RTR = 2,
	VIRTIO_RDMA_QPS_RTS = 3,
	VIRTIO_RDMA_QPS_SQD = 4,
	VIRTIO_RDMA_QPS_SQE = 5,
	VIRTIO_RDMA_QPS_ERR = 6,
};

struct virtio_rdma_qp_cap {
	__le32 max_send_wr;
	__le32 max_recv_wr;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_inline_data;
	__le32 reserved;
};

/*
 * CREATE_QP is followed by sq.npages page addresses for the send queue, then
 * rq.npages page addresses for the receive queue (rq.npages is 0 when the QP
 * uses an SRQ).
 */
struct virtio_rdma_req_create_qp {
	__le32 pd_handle;
	__le32 send_cq_handle;
	__le32 recv_cq_handle;
	__le32 srq_handle;           /* 0: no SRQ */
	__u8 qp_type;                /* enum virtio_rdma_qp_type */
	__u8 sq_sig_all;
	__u8 flags;                  /* VIRTIO_RDMA_QP_F_* */
	__u8 reserved[5];
	struct virtio_rdma_qp_cap cap;
	struct virtio_rdma_ring_desc sq;
	struct virtio_rdma_ring_desc rq;
};

/*
 * CREATE_QP flags. KERNEL (VIRTIO_RDMA_F_KERNEL only): the guest kernel
 * posts to this QP itself and never maps its rings to user space; its SGEs
 * may name VIRTIO_RDMA_LOCAL_DMA_LKEY (docs/virtio-rdma.md §4.8).
 */
#define VIRTIO_RDMA_QP_F_KERNEL 0x1
#define VIRTIO_RDMA_QP_F_SUPPORTED 0x1

/* The GSI QP's number, and the only destination QPN of its sends. */
#define VIRTIO_RDMA_GSI_QPN 1
/* The Q_Key of every GSI datagram (IB_QP1_QKEY). */
#define VIRTIO_RDMA_GSI_QKEY 0x80010000u
/*
 * The local DMA lkey: on a GSI QP, and with VIRTIO_RDMA_F_KERNEL on a kernel
 * QP (VIRTIO_RDMA_QP_F_KERNEL), an SGE names guest-physical addresses with
 * this lkey instead of an MR's. On any other QP it is an unknown lkey.
 */
#define VIRTIO_RDMA_LOCAL_DMA_LKEY 0u

struct virtio_rdma_resp_create_qp {
	__le32 qpn;                  /* 24 bits; also the QP's handle */
	__le32 reserved;
	struct virtio_rdma_qp_cap cap; /* actual capabilities */
};

struct virtio_rdma_ah_attr {
	__u8 dgid[16];
	__le32 flow_label;
	__le16 dlid;
	__u8 sgid_index;
	__u8 hop_limit;
	__u8 traffic_class;
	__u8 sl;
	__u8 port_num;
	__u8 static_rate;
	__u8 is_global;
	__u8 dmac[6];
	__u8 reserved;
};

/* attr_mask bits: the values of IBV_QP_*. */
#define VIRTIO_RDMA_QP_STATE (1u << 0)
#define VIRTIO_RDMA_QP_CUR_STATE (1u << 1)
#define VIRTIO_RDMA_QP_EN_SQD_ASYNC_NOTIFY (1u << 2)
#define VIRTIO_RDMA_QP_ACCESS_FLAGS (1u << 3)
#define VIRTIO_RDMA_QP_PKEY_INDEX (1u << 4)
#define VIRTIO_RDMA_QP_PORT (1u << 5)
#define VIRTIO_RDMA_QP_QKEY (1u << 6)
#define VIRTIO_RDMA_QP_AV (1u << 7)
#define VIRTIO_RDMA_QP_PATH_MTU (1u << 8)
#define VIRTIO_RDMA_QP_TIMEOUT (1u << 9)
#define VIRTIO_RDMA_QP_RETRY_CNT (1u << 10)
#define VIRTIO_RDMA_QP_RNR_RETRY (1u << 11)
#define VIRTIO_RDMA_QP_RQ_PSN (1u << 12)
#define VIRTIO_RDMA_QP_MAX_QP_RD_ATOMIC (1u << 13)
#define VIRTIO_RDMA_QP_ALT_PATH (1u << 14)
#define VIRTIO_RDMA_QP_MIN_RNR_TIMER (1u << 15)
#define VIRTIO_RDMA_QP_SQ_PSN (1u << 16)
#define VIRTIO_RDMA_QP_MAX_DEST_RD_ATOMIC (1u << 17)
#define VIRTIO_RDMA_QP_PATH_MIG_STATE (1u << 18)
#define VIRTIO_RDMA_QP_CAP (1u << 19)
#define VIRTIO_RDMA_QP_DEST_QPN (1u << 20)
#define VIRTIO_RDMA_QP_ATTR_MASK_SUPPORTED 0x1fffff

struct virtio_rdma_qp_attr {
	__le32 attr_mask;            /* which fields are meaningful */
	__u8 qp_state;
	__u8 cur_qp_state;
	__u8 path_mtu;               /* enum virtio_rdma_mtu */
	__u8 path_mig_state;
	__le32 qkey;
	__le32 rq_psn;               /* 24 bits */
	__le32 sq_psn;               /* 24 bits */
	__le32 dest_qp_num;          /* 24 bits */
	__le32 qp_access_flags;      /* VIRTIO_RDMA_ACCESS_* */
	__le16 pkey_index;
	__le16 alt_pkey_index;
	__u8 en_sqd_async_notify;
	__u8 sq_draining;
	__u8 max_rd_atomic;
	__u8 max_dest_rd_atomic;
	__u8 min_rnr_timer;
	__u8 port_num;
	__u8 timeout;
	__u8 retry_cnt;
	__u8 rnr_retry;
	__u8 alt_port_num;
	__u8 alt_timeout;
	__u8 reserved;
	struct virtio_rdma_ah_attr ah_attr;
	struct virtio_rdma_ah_attr alt_ah_attr;
	struct virtio_rdma_qp_cap cap;
};

struct virtio_rdma_req_modify_qp {
	__le32 qpn;
	__le32 reserved;
	struct virtio_rdma_qp_attr attr;
};

struct virtio_rdma_req_query_qp {
	__le32 qpn;
	__le32 attr_mask;
};

struct virtio_rdma_resp_query_qp {
	struct virtio_rdma_qp_attr attr;
	struct virtio_rdma_qp_cap init_cap;
};

struct virtio_rdma_req_create_ah {
	__le32 pd_handle;
	__le32 reserved;
	struct virtio_rdma_ah_attr attr;
};

/* The handle is what a UD send WQE names in wr.ud.ah_num (never 0). */
struct virtio_rdma_resp_create_ah {
	__le32 ah_handle;
	__le32 reserved;
};

/* ALLOC_MW (VIRTIO_RDMA_F_MW, docs/virtio-rdma.md §4.7). */
struct virtio_rdma_req_alloc_mw {
	__le32 pd_handle;
	__le32 type;                 /* 1 or 2 (IBV_MW_TYPE_*) */
};

struct virtio_rdma_resp_alloc_mw {
	__le32 mw_handle;
	__le32 rkey;                 /* a bind replaces its low 8 bits */
};

/*
 * ALLOC_MR (VIRTIO_RDMA_F_KERNEL, docs/virtio-rdma.md §4.8): a
 * fast-registration MR of at most max_pages pages, invalid until a REG_MR
 * send WQE registers it. page_list is the guest-physical address of
 * max_pages __le64 entries (8-byte aligned, inside guest RAM) from which
 * the device copies the page addresses at each REG_MR WQE.
 */
struct virtio_rdma_req_alloc_mr {
	__le32 pd_handle;
	__le32 max_pages;            /* 1 .. resp_query_device.max_fr_pages */
	__le64 page_list;
};

struct virtio_rdma_resp_alloc_mr {
	__le32 mr_handle;
	__le32 lkey;                 /* a REG_MR WQE replaces the low 8 bits */
	__le32 rkey;                 /* of both keys */
	__le32 reserved;
};

/*
 * The REG_MR send WQE's opcode (the kernel's IB_WR_REG_MR; user space has
 * none): kernel QPs of type RC or UC with VIRTIO_RDMA_F_KERNEL. Its fields
 * are wr.mw's: addr (the new iova), length, mr_lkey (the MR's current
 * lkey), rkey (its low 8 bits are the new key byte), access.
 */
#define VIRTIO_RDMA_WR_REG_MR 0x20
/* Its completion opcode (IB_WC_REG_MR; IBV_WC_* has no name for it). */
#define VIRTIO_RDMA_WC_REG_MR 8

/* CREATE_SRQ is followed by ring.npages page addresses. */
struct virtio_rdma_req_create_srq {
	__le32 pd_handle;
	__le32 max_wr;
	__le32 max_sge;
	__le32 srq_limit;
	struct virtio_rdma_ring_desc ring;
};

struct virtio_rdma_resp_create_srq {
	__le32 srq_handle;
	__le32 max_wr;
	__le32 max_sge;
	__le32 reserved;
};

#define VIRTIO_RDMA_SRQ_MAX_WR (1u << 0)  /* resize: ERR_UNSUPPORTED */
#define VIRTIO_RDMA_SRQ_LIMIT (1u << 1)

struct virtio_rdma_req_modify_srq {
	__le32 srq_handle;
	__le32 attr_mask;
	__le32 max_wr;
	__le32 srq_limit;
};

/* ------------------------------------------------------------------------ */
/* Doorbell queues                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Each buffer on a doorbell queue is one device-readable record. A doorbell
 * says "look at this object's ring again"; the device then reads the ring's
 * producer index itself, so a lost, duplicated or early doorbell is
 * harmless and the driver may coalesce them.
 */
enum virtio_rdma_doorbell_kind {
	VIRTIO_RDMA_DB_SQ = 1,       /* handle = qpn: new send WQEs */
	VIRTIO_RDMA_DB_RQ = 2,       /* handle = qpn: new receive WQEs (optional) */
	VIRTIO_RDMA_DB_SRQ = 3,      /* handle = srq: new SRQ WQEs (optional) */
	VIRTIO_RDMA_DB_CQ_ARM = 4,   /* handle = cq: notify on next completion */
	VIRTIO_RDMA_DB_CQ_ARM_SOLICITED = 5, /* ... on next solicited one */
};

struct virtio_rdma_doorbell {
	__le32 handle;
	__u8 kind;                   /* enum virtio_rdma_doorbell_kind */
	__u8 reserved[3];
};

/* ------------------------------------------------------------------------ */
/* Event queue                                                               */
/* ------------------------------------------------------------------------ */

/*
 * The driver keeps device-writable buffers of sizeof(struct
 * virtio_rdma_event) on the event queue. When none is available the device
 * counts the lost events and reports the count in the next one it writes.
 */
enum virtio_rdma_event_type {
	VIRTIO_RDMA_EV_CQ_COMP = 1,          /* handle = cq */
	VIRTIO_RDMA_EV_CQ_ERR = 2,           /* handle = cq: ring overflow */
	VIRTIO_RDMA_EV_QP_FATAL = 3,         /* handle = qpn (IB_EVENT_QP_FATAL) */
	VIRTIO_RDMA_EV_QP_REQ_ERR = 4,       /* handle = qpn */
	VIRTIO_RDMA_EV_QP_ACCESS_ERR = 5,    /* handle = qpn */
	VIRTIO_RDMA_EV_QP_LAST_WQE_REACHED = 6,
	VIRTIO_RDMA_EV_SQ_DRAINED = 7,
	VIRTIO_RDMA_EV_SRQ_LIMIT_REACHED = 8, /* handle = srq */
	VIRTIO_RDMA_EV_PORT_ACTIVE = 9,      /* handle = port */
	VIRTIO_RDMA_EV_PORT_ERR = 10,
	VIRTIO_RDMA_EV_GID_CHANGE = 11,
};

struct virtio_rdma_event {
	__le32 type;                 /* enum virtio_rdma_event_type */
	__le32 handle;
	__le32 lost;                 /* events dropped before this one */
	__le32 reserved;
};

/* ------------------------------------------------------------------------ */
/* Work and completion queue rules (the rings themselves are librxe's)       */
/* ------------------------------------------------------------------------ */

/*
 * Indices in struct rxe_queue_buf lie in [0, index_mask]; a ring of
 * 2^n elements holds at most 2^n - 1 entries (one slot stays empty).
 * SQ, RQ, SRQ: the driver produces, the device consumes.
 * CQ: the device produces struct ib_uverbs_wc entries, the driver consumes.
 */
#define VIRTIO_RDMA_RING_HDR_SIZE 384u /* offsetof(struct rxe_queue_buf, data) */
#define VIRTIO_RDMA_MIN_CQE_LOG2_SIZE 6 /* ib_uverbs_wc is 48 bytes */
#define VIRTIO_RDMA_MAX_RING_LOG2_ELEMS 16
/* Byte offset of the SGE array (or inline data) inside a WQE. */
#define VIRTIO_RDMA_SEND_WQE_SGE_OFFSET 208u
#define VIRTIO_RDMA_RECV_WQE_SGE_OFFSET 40u

/* ------------------------------------------------------------------------ */
/* Compile-time layout checks                                                */
/* ------------------------------------------------------------------------ */

#ifdef __cplusplus
#define VIRTIO_RDMA_STATIC_ASSERT(c, m) static_assert(c, m)
#include <cstddef>
#else
#define VIRTIO_RDMA_STATIC_ASSERT(c, m) _Static_assert(c, m)
#ifndef __KERNEL__
#include <stddef.h>
#endif
#endif

#define VIRTIO_RDMA_CHECK_SIZE(type, size) \
	VIRTIO_RDMA_STATIC_ASSERT(sizeof(struct type) == (size), #type " size")
#define VIRTIO_RDMA_CHECK_OFFSET(type, field, off)               \
	VIRTIO_RDMA_STATIC_ASSERT(offsetof(struct type, field) == (off), \
				  #type "." #field " offset")

VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_config, 256);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_config, max_mr_size, 40);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_config, node_guid, 80);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_config, phys_port_cnt, 88);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_config, mac, 96);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_config, gids, 128);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_cmd_hdr, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_hdr, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_query_device, 136);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_query_port, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_query_port, 28);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_query_gid, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_query_gid, 24);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_create_pd, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_handle, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_reg_mr, 32);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_req_reg_mr, iova, 8);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_req_reg_mr, npages, 28);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_reg_mr, 16);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_ring_desc, 16);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_create_cq, 24);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_create_cq, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_notify_cq, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_qp_cap, 24);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_create_qp, 80);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_req_create_qp, flags, 18);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_req_create_qp, cap, 24);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_req_create_qp, sq, 48);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_create_qp, 32);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_ah_attr, 36);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_ah_attr, dmac, 29);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_qp_attr, 140);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_qp_attr, ah_attr, 44);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_qp_attr, cap, 116);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_modify_qp, 148);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_query_qp, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_query_qp, 164);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_create_ah, 44);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_create_ah, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_create_srq, 32);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_create_srq, 16);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_modify_srq, 16);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_alloc_mw, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_alloc_mw, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_req_alloc_mr, 16);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_req_alloc_mr, page_list, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_resp_alloc_mr, 16);
VIRTIO_RDMA_CHECK_OFFSET(virtio_rdma_resp_query_device, max_mw, 128);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_doorbell, 8);
VIRTIO_RDMA_CHECK_SIZE(virtio_rdma_event, 16);
/* The librxe ring layouts this ABI adopts. */
VIRTIO_RDMA_CHECK_OFFSET(rxe_queue_buf, producer_index, 128);
VIRTIO_RDMA_CHECK_OFFSET(rxe_queue_buf, consumer_index, 256);
VIRTIO_RDMA_CHECK_OFFSET(rxe_queue_buf, data, VIRTIO_RDMA_RING_HDR_SIZE);
VIRTIO_RDMA_CHECK_SIZE(ib_uverbs_wc, 48);
VIRTIO_RDMA_CHECK_SIZE(rxe_sge, 16);
VIRTIO_RDMA_CHECK_OFFSET(rxe_send_wqe, dma, 184);
VIRTIO_RDMA_CHECK_OFFSET(rxe_recv_wqe, dma, 16);
#ifndef __cplusplus
/* C++ lays out the flexible-array union of rxe_dma_info differently, so host
 * C++ code uses the byte offsets above, never dma.sge or dma.inline_data. */
VIRTIO_RDMA_CHECK_OFFSET(rxe_send_wqe, dma.sge, VIRTIO_RDMA_SEND_WQE_SGE_OFFSET);
VIRTIO_RDMA_CHECK_OFFSET(rxe_send_wqe, dma.inline_data,
			 VIRTIO_RDMA_SEND_WQE_SGE_OFFSET);
VIRTIO_RDMA_CHECK_OFFSET(rxe_recv_wqe, dma.sge, VIRTIO_RDMA_RECV_WQE_SGE_OFFSET);
#endif

#endif /* VHOST_RDMA_ABI_VIRTIO_RDMA_H_ */
