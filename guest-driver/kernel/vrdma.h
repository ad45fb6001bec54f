/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * virtio_rdma: guest driver for the vhost-rdma paravirtual RDMA device.
 *
 * The device (virtio ID 42, ABI in vhost-rdma/abi/virtio_rdma.h) executes
 * verbs on the host. This driver registers an ib_device that speaks the
 * Soft-RoCE (rxe) user ABI, so the distribution's unmodified librxe drives
 * it: work and completion queues are rings that user space, this driver and
 * the device share; control verbs become control-queue commands; a send
 * doorbell becomes a doorbell record; completions and async errors arrive on
 * the event queue.
 */
#ifndef VRDMA_H_
#define VRDMA_H_

#include <linux/stddef.h>
#include <linux/types.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/completion.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <linux/list.h>
#include <linux/refcount.h>
#include <linux/netdevice.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <rdma/ib_verbs.h>

#include "virtio_rdma.h"

/* librxe refuses any other uverbs ABI version (rxe's RXE_UVERBS_ABI_VERSION). */
#define VRDMA_UVERBS_ABI_VERSION 2

/* The device's single port. */
#define VRDMA_PORT 1

/*
 * RoCE (VIRTIO_RDMA_F_ROCE): the guest kernel's GID table of the port, built
 * by the RDMA core from the bound netdev's addresses (rxe has 1024; a VM has
 * a handful of addresses).
 */
#define VRDMA_ROCE_GID_TBL_LEN 128

/* Ring geometry limits shared by every ring kind. */
#define VRDMA_CQE_SIZE (1u << VIRTIO_RDMA_MIN_CQE_LOG2_SIZE)

/* Per-vCPU doorbell queue: records stay readable until the device is done. */
struct vrdma_dbq {
	spinlock_t lock;          /* protects vq, free[] and nfree */
	struct virtqueue *vq;
	struct virtio_rdma_doorbell *recs;
	u16 *free;                /* stack of unused record indices */
	u32 nfree;
};

/* The control queue's DMA-able buffers, reused for every command. */
struct vrdma_ctrl_buf {
	struct virtio_rdma_cmd_hdr hdr;
	u8 req[256];
	struct virtio_rdma_resp_hdr resp_hdr;
	u8 resp[256];
};

/*
 * One per virtio device, for the device's whole life. The ib_device and
 * everything behind it (struct vrdma_dev) is one incarnation: when the
 * backend is lost the device sets DEVICE_NEEDS_RESET, the driver takes the
 * incarnation down and, once the backend is back, makes a new one
 * (vrdma_main.c; docs/virtio-rdma.md 6.1).
 */
struct vrdma_virtio {
	struct virtio_device *vdev;
	struct mutex lock;        /* probe, recovery and remove, one at a time */
	struct vrdma_dev *dev;    /* the live incarnation; NULL while recovering */
	struct work_struct fatal_work;    /* NEEDS_RESET seen: take dev down */
	struct delayed_work revive_work;  /* poll for the backend, re-probe */
	bool removing;
	bool revive_failed_logged;
};

struct vrdma_dev {
	struct ib_device ib;
	struct virtio_device *vdev;
	struct vrdma_virtio *vv;
	/*
	 * dead: the device needs reset (backend lost); every command and
	 * doorbell fails with -EIO from now on. released: the device has been
	 * reset, so it holds no buffer, ring or page of ours any more.
	 */
	bool dead;
	bool released;

	/* Config space, read once at probe and again after a port/GID event. */
	spinlock_t cfg_lock;
	struct virtio_rdma_config cfg;
	/* Attributes asked once at probe (QUERY_DEVICE, QUERY_PORT). */
	struct virtio_rdma_resp_query_device dev_attr;
	struct virtio_rdma_resp_query_port port_attr;

	/* Control queue: one command at a time (the device answers in order). */
	struct mutex ctrl_lock;
	struct virtqueue *ctrl_vq;
	struct vrdma_ctrl_buf *ctrl;
	struct completion ctrl_done;
	bool ctrl_broken;         /* a command timed out: its buffers are the device's */

	/* Event queue and the objects events name. */
	spinlock_t event_lock;    /* event dispatch vs. unpublishing an object */
	struct virtqueue *event_vq;
	struct virtio_rdma_event *events;
	u32 nevents;
	struct xarray cqs;        /* cq handle -> struct vrdma_cq */
	struct xarray qps;        /* qpn -> struct vrdma_qp */
	struct xarray srqs;       /* srq handle -> struct vrdma_srq */
	struct work_struct port_work;
	unsigned long port_events; /* VIRTIO_RDMA_EV_* bits waiting for port_work */

	u32 ndbq;
	struct vrdma_dbq *dbq;
	atomic_t db_dropped;      /* doorbells lost: every queue stayed full */

	bool ib_registered;

	/*
	 * VIRTIO_RDMA_F_KERNEL (docs/virtio-rdma.md 4.8, vrdma_fr.c): kernel
	 * RC/UC QPs name guest-physical memory with the local DMA lkey, and
	 * fast-registration MRs of at most max_fr_pages pages exist.
	 */
	bool kernel_verbs;
	u32 max_fr_pages;

	/*
	 * RoCE (VIRTIO_RDMA_F_ROCE, vrdma_netdev.c): the port is bound to the
	 * netdev whose MAC is cfg.mac. netdev is changed under RTNL only (the
	 * notifier); netdev_bound is read anywhere.
	 */
	bool roce;
	bool netdev_bound;
	bool netdev_nb_registered;
	struct net_device *netdev;
	unsigned int netdev_mtu;          /* its MTU, for query_port */
	struct notifier_block netdev_nb;
	struct work_struct netdev_work;   /* GID rescan, port event */

	/*
	 * Device commands that kernel verbs in atomic context cannot wait for
	 * (vrdma_pd_ah.c, vrdma_kverbs.c): AHs to create or destroy, kernel
	 * QPs whose sends wait for an AH or whose doorbell could not be rung.
	 */
	spinlock_t kwork_lock;
	struct list_head av_create;      /* struct vrdma_av */
	struct list_head av_destroy;     /* struct vrdma_av_handle */
	struct list_head kqp_work;       /* struct vrdma_qp, by kwork_link */
	struct work_struct kwork;
};

/*
 * An address handle as the device knows it. Separate from struct vrdma_ah
 * (which the RDMA core frees when destroy_ah returns) because a deferred
 * creation, or a send waiting for it, may outlive the ib_ah.
 */
struct vrdma_av {
	refcount_t ref;
	u32 handle;               /* device handle; valid once done */
	int err;                  /* CREATE_AH failed (done is set) */
	bool done;                /* creation finished: read with acquire */
	struct list_head link;    /* on dev->av_create while waiting */
	struct virtio_rdma_req_create_ah req;
};

/* A device AH handle whose DESTROY_AH waits for process context. */
struct vrdma_av_handle {
	struct list_head link;
	u32 handle;
};

/* A ring buffer shared with user space (mmap) and with the device (pages). */
struct vrdma_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	void *buf;                /* vmalloc_user memory, freed by mmap_free */
};

struct vrdma_ring {
	struct vrdma_mmap_entry *entry;
	struct rxe_queue_buf *buf;
	size_t size;              /* bytes, a multiple of PAGE_SIZE */
	u32 npages;
	u32 log2_num_elem;
	u32 log2_elem_size;
	bool inserted;            /* entry is in the ucontext's mmap table */
};

struct vrdma_ucontext {
	struct ib_ucontext ibuc;
};

struct vrdma_pd {
	struct ib_pd ibpd;
	u32 handle;
};

/* A memory window (VIRTIO_RDMA_F_MW): librxe binds and invalidates it with
 * send WQEs, which the device reads from the SQ ring itself. */
struct vrdma_mw {
	struct ib_mw ibmw;
	u32 handle;
};

struct vrdma_ah {
	struct ib_ah ibah;
	struct vrdma_av *av;
};

struct vrdma_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;     /* user MRs */
	u32 handle;
	/*
	 * Fast-registration MRs (ALLOC_MR, vrdma_fr.c): the page list the
	 * device copies at each REG_MR WQE, guest-physically contiguous.
	 */
	__le64 *page_list;
	u32 max_pages;
	u32 npages;               /* entries map_mr_sg wrote */
	/*
	 * The lkey as the device knows it: ALLOC_MR's, then each posted
	 * REG_MR's key byte. The ULP puts the new key in ibmr.lkey (with
	 * ib_update_fast_reg_key()) before it posts REG_MR; the WQE names the
	 * MR by this one. Under the SQ lock.
	 */
	u32 dev_lkey;
};

struct vrdma_cq {
	struct ib_cq ibcq;
	struct vrdma_ring ring;
	u32 handle;
	/* Kernel CQs: the driver consumes the ring (poll_cq). */
	bool kernel;
	spinlock_t lock;          /* consumer index, sw_wcs */
	struct list_head sw_wcs;  /* completions the driver made itself */
	/*
	 * An arm asked in atomic context (IB_POLL_SOFTIRQ): the CQ_ARM
	 * doorbell goes at once, and arm_work makes it certain with the
	 * REQ_NOTIFY_CQ command (vrdma_cq.c).
	 */
	struct work_struct arm_work;
	bool arm_solicited;       /* arm_work's kind, read once by it */
};

struct vrdma_srq {
	struct ib_srq ibsrq;
	struct vrdma_ring ring;
	u32 handle;
	u32 max_wr;
	u32 max_sge;
	u32 srq_limit;
	bool kernel;
	spinlock_t lock;          /* kernel SRQs: the producer index */
};

struct vrdma_qp {
	struct ib_qp ibqp;
	struct vrdma_ring sq;
	struct vrdma_ring rq;     /* unused (npages 0) when the QP has an SRQ */
	struct ib_qp_cap cap;     /* what the rings and the device both allow */
	bool has_srq;
	u8 sq_sig_all;
	u32 qkey;                 /* UD: for a send whose Q_Key has bit 31 set */
	/*
	 * The last state the driver set was RTS or later (SQD, SQE, ERR): the
	 * send queue takes work, as rxe's req.state >= READY. The device only
	 * moves a QP onward (to SQE or ERR) by itself, never back.
	 */
	bool sq_open;

	/* Kernel QPs (vrdma_kverbs.c): the driver writes the WQEs. */
	bool kernel;
	/*
	 * Created with VIRTIO_RDMA_QP_F_KERNEL (and the GSI QP): SGEs with
	 * the local DMA lkey carry guest-physical addresses.
	 */
	bool local_dma;
	spinlock_t sq_lock;       /* SQ producer index, pending */
	spinlock_t rq_lock;       /* RQ producer index */
	struct list_head pending; /* sends waiting for their AH (vrdma_pending_wqe) */
	u32 npending;
	bool db_owed;             /* a doorbell could not be rung in atomic context */
	bool dying;               /* destroy_qp began: never back on kqp_work */
	struct list_head kwork_link; /* on dev->kqp_work, under dev->kwork_lock */
};

static inline struct vrdma_dev *to_vdev(struct ib_device *ib)
{
	return container_of(ib, struct vrdma_dev, ib);
}

static inline struct vrdma_pd *to_vpd(struct ib_pd *pd)
{
	return container_of(pd, struct vrdma_pd, ibpd);
}

static inline struct vrdma_ah *to_vah(struct ib_ah *ah)
{
	return container_of(ah, struct vrdma_ah, ibah);
}

static inline struct vrdma_mr *to_vmr(struct ib_mr *mr)
{
	return container_of(mr, struct vrdma_mr, ibmr);
}

static inline struct vrdma_cq *to_vcq(struct ib_cq *cq)
{
	return container_of(cq, struct vrdma_cq, ibcq);
}

static inline struct vrdma_srq *to_vsrq(struct ib_srq *srq)
{
	return container_of(srq, struct vrdma_srq, ibsrq);
}

static inline struct vrdma_qp *to_vqp(struct ib_qp *qp)
{
	return container_of(qp, struct vrdma_qp, ibqp);
}

/* vrdma_ctrl.c: synchronous control-queue commands. */
int vrdma_ctrl_init(struct vrdma_dev *dev);
void vrdma_ctrl_cleanup(struct vrdma_dev *dev);
void vrdma_ctrl_done(struct virtqueue *vq);
int vrdma_exec(struct vrdma_dev *dev, u32 cmd, const void *req, size_t req_len,
	       const __le64 *pages, u32 npages, void *resp, size_t resp_len);
int vrdma_destroy_handle(struct vrdma_dev *dev, u32 cmd, u32 handle);
bool vrdma_destroy_or_keep(struct vrdma_dev *dev, u32 cmd, u32 handle);

/* vrdma_doorbell.c */
int vrdma_doorbell_init(struct vrdma_dev *dev, struct virtqueue **vqs, u32 n);
void vrdma_doorbell_cleanup(struct vrdma_dev *dev);
bool vrdma_ring_doorbell(struct vrdma_dev *dev, u32 handle, u8 kind,
			 bool may_sleep);

/* vrdma_event.c */
int vrdma_event_init(struct vrdma_dev *dev);
void vrdma_event_cleanup(struct vrdma_dev *dev);
void vrdma_event_cb(struct virtqueue *vq);
int vrdma_publish(struct vrdma_dev *dev, struct xarray *xa, u32 handle,
		  void *obj);
void vrdma_unpublish(struct vrdma_dev *dev, struct xarray *xa, u32 handle);

/* vrdma_main.c */
extern struct workqueue_struct *vrdma_wq; /* WQ_MEM_RECLAIM: kwork, arm_work */
int vrdma_read_config(struct vrdma_dev *dev);
bool vrdma_check_dead(struct vrdma_dev *dev);

/* The incarnation a virtqueue callback belongs to (set before its vqs). */
static inline struct vrdma_dev *vrdma_vq_dev(struct virtqueue *vq)
{
	struct vrdma_virtio *vv = vq->vdev->priv;

	return READ_ONCE(vv->dev);
}

static inline bool vrdma_dead(struct vrdma_dev *dev)
{
	return READ_ONCE(dev->dead);
}

/* True once the device was reset: it owns nothing of ours any more. */
static inline bool vrdma_released(struct vrdma_dev *dev)
{
	return smp_load_acquire(&dev->released);
}

/* vrdma_ring.c: rings shared by mmap and by page list. */
int vrdma_ring_alloc(struct vrdma_ring *ring, u32 depth, u32 elem_size);
int vrdma_ring_insert(struct vrdma_ring *ring, struct ib_udata *udata,
		      struct mminfo *mi);
void vrdma_ring_free(struct vrdma_ring *ring);
void vrdma_ring_fill_pages(const struct vrdma_ring *ring, __le64 *pages);
void vrdma_ring_desc(const struct vrdma_ring *ring,
		     struct virtio_rdma_ring_desc *desc);
bool vrdma_ring_empty(const struct vrdma_ring *ring);
int vrdma_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma);
void vrdma_mmap_free(struct rdma_user_mmap_entry *entry);

/* vrdma_device.c: device, port, GIDs, registration with the RDMA core. */
int vrdma_register_ib(struct vrdma_dev *dev);
void vrdma_unregister_ib(struct vrdma_dev *dev);

/* vrdma_pd_ah.c */
int vrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int vrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int vrdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		    struct ib_udata *udata);
int vrdma_destroy_ah(struct ib_ah *ibah, u32 flags);
int vrdma_ah_attr_to_dev(struct vrdma_dev *dev, const struct rdma_ah_attr *attr,
			 struct virtio_rdma_ah_attr *dst);
void vrdma_av_get(struct vrdma_av *av);
void vrdma_av_put(struct vrdma_dev *dev, struct vrdma_av *av, bool may_sleep);
void vrdma_kwork_init(struct vrdma_dev *dev);
void vrdma_kwork_flush(struct vrdma_dev *dev);

/* vrdma_netdev.c: the RoCE port (VIRTIO_RDMA_F_ROCE). */
void vrdma_netdev_init(struct vrdma_dev *dev);
int vrdma_netdev_start(struct vrdma_dev *dev);
void vrdma_netdev_stop(struct vrdma_dev *dev);
bool vrdma_port_usable(struct vrdma_dev *dev);
int vrdma_sgid_to_dev(struct vrdma_dev *dev, const struct ib_gid_attr *attr,
		      u8 *index);
int vrdma_sgid_from_dev(struct vrdma_dev *dev, u8 dev_index, u8 *index);

/* vrdma_mr.c */
struct ib_mr *vrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 virt_addr, int access, struct ib_udata *udata);
int vrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *vrdma_get_dma_mr(struct ib_pd *ibpd, int access);
int vrdma_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int vrdma_dealloc_mw(struct ib_mw *ibmw);

/* vrdma_fr.c: fast-registration MRs (VIRTIO_RDMA_F_KERNEL). */
struct ib_mr *vrdma_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			     u32 max_num_sg);
int vrdma_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset);
int vrdma_fr_dereg(struct vrdma_mr *mr);
int vrdma_fr_reg_wqe(const struct ib_reg_wr *reg, struct rxe_send_wr *w);
u32 vrdma_query_max_fr_pages(const struct vrdma_dev *dev);

/* vrdma_cq.c */
int vrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata);
int vrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int vrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int vrdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);

/* vrdma_qp.c */
int vrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata);
int vrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata);
int vrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init);
int vrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int vrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr);
int vrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr);

/* vrdma_kverbs.c: kernel QPs, CQs and SRQs (the driver fills the rings). */
int vrdma_kpost_send(struct vrdma_qp *qp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr);
int vrdma_kpost_recv(struct vrdma_qp *qp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr);
int vrdma_kpost_srq_recv(struct vrdma_srq *srq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);
int vrdma_kpoll_cq(struct vrdma_cq *cq, int num_entries, struct ib_wc *wc);
bool vrdma_kcq_empty(struct vrdma_cq *cq);
void vrdma_kcq_free(struct vrdma_cq *cq);
void vrdma_kqp_flush(struct vrdma_dev *dev, struct vrdma_qp *qp);
void vrdma_kqp_drop_pending(struct vrdma_dev *dev, struct vrdma_qp *qp);
int vrdma_kva_to_phys(u64 addr, u32 len, u64 *phys);

/* vrdma_srq.c */
int vrdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata);
int vrdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata);
int vrdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int vrdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int vrdma_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr);

#endif /* VRDMA_H_ */
