// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The extended verbs librxe offers, for the differential run against
 * Soft-RoCE (issue 14 part 4), as verbs_errors.c does for error flows:
 * each case prints one line, "<case>: <what the application saw>" (return
 * codes, completion statuses and opcodes, byte_len and immediate data of
 * receives, and whether the data arrived), so that the same guest running
 * rdma_rxe and vrdma0 can be compared line by line (tests/vm/run-e2e.sh:
 * verbs_ex.expected holds Soft-RoCE's lines, verbs_ex.differences the known
 * ones of vrdma0, each with its reason).
 *
 *   cq_ex_*: what ibv_create_cq_ex returns for each completion field asked
 *       (wc_flags) and for the creation flags;
 *   qp_ex_*: ibv_create_qp_ex with send_ops_flags, and ibv_qp_to_qp_ex;
 *   rc_*: ibv_wr_start / ibv_wr_<op> / ibv_wr_complete on an RC QP connected
 *       to itself: RDMA write (also with immediate), send (also with
 *       immediate, and of zero length), RDMA read, compare-and-swap,
 *       fetch-and-add, inline data (the source is overwritten right after
 *       ibv_wr_complete: the data must still arrive), and four work
 *       requests (one unsignalled) in one start/complete batch;
 *   ud_*: the same on a UD QP sending to itself through an address handle
 *       (ibv_wr_set_ud_addr): send, send with immediate, zero length;
 *   rereg_mr_access, mw_alloc_type_*: whether ibv_rereg_mr and
 *       ibv_alloc_mw work or fail as on rxe.
 * Completions are read with ibv_start_poll / ibv_next_poll / ibv_end_poll
 * and the ibv_wc_read_* getters, on a CQ made by ibv_create_cq_ex.
 *
 * Every case opens the device again (context, PD, MR, CQ, QP of its own).
 * Waits are bounded (3 s for the completions a case expects).
 *
 * Build on the host: cc -O2 -Wall -o verbs_ex verbs_ex.c -libverbs
 * Run in the guest: verbs_ex <device> <gid_index> [case]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "case_env.h"
#include "loopback.h"

enum { DST = 4096, QKEY = 0x11111111, GRH = 40, RECV_ID = 100 };

#define WC_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | \
		  IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP)

/* ----------------------------------------------------------- cq_ex_* --- */

static void cq_ex_case(struct env *e, const char *name, uint64_t wc_flags,
		       uint32_t flags)
{
	struct ibv_cq_init_attr_ex a = {
		.cqe = 16, .wc_flags = wc_flags,
		.comp_mask = flags ? IBV_CQ_INIT_ATTR_MASK_FLAGS : 0,
		.flags = flags,
	};
	struct ibv_cq_ex *cq;

	errno = 0;
	cq = ibv_create_cq_ex(e->ctx, &a);
	if (cq) {
		printf("%s: created\n", name);
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	} else {
		printf("%s: failed errno %d\n", name, errno);
	}
}

static void cq_ex_cases(struct env *e, const char *name)
{
	static const struct {
		const char *name;
		uint64_t wc_flags;
		uint32_t flags;
	} c[] = {
		{ "cq_ex_no_wc_flags", 0, 0 },
		{ "cq_ex_byte_len", IBV_WC_EX_WITH_BYTE_LEN, 0 },
		{ "cq_ex_imm", IBV_WC_EX_WITH_IMM, 0 },
		{ "cq_ex_qp_num", IBV_WC_EX_WITH_QP_NUM, 0 },
		{ "cq_ex_src_qp", IBV_WC_EX_WITH_SRC_QP, 0 },
		{ "cq_ex_slid_sl_dlid_path_bits", IBV_WC_EX_WITH_SLID |
		  IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS, 0 },
		{ "cq_ex_completion_timestamp",
		  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0 },
		{ "cq_ex_completion_timestamp_wallclock",
		  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 0 },
		{ "cq_ex_flow_tag", IBV_WC_EX_WITH_FLOW_TAG, 0 },
		{ "cq_ex_single_threaded", WC_FLAGS,
		  IBV_CREATE_CQ_ATTR_SINGLE_THREADED },
		{ "cq_ex_ignore_overrun", WC_FLAGS,
		  IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN },
	};
	unsigned int i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (!strcmp(name, c[i].name))
			cq_ex_case(e, name, c[i].wc_flags, c[i].flags);
}

/* ------------------------------------------------ MRs and windows --- */

/* ibv_rereg_mr (access change only) and ibv_alloc_mw of each type: what
 * the device answers, so that a verb either works or fails as on rxe. */
static void mr_mw_cases(struct env *e, const char *name)
{
	struct ibv_mw *mw;
	int rc;

	errno = 0;
	if (!strcmp(name, "rereg_mr_access")) {
		rc = ibv_rereg_mr(e->mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				  0, IBV_ACCESS_LOCAL_WRITE);
		printf("%s: rc %d errno %d\n", name, rc, rc ? errno : 0);
		return;
	}
	mw = ibv_alloc_mw(e->pd, !strcmp(name, "mw_alloc_type_1") ?
			  IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
	if (mw) {
		printf("%s: allocated\n", name);
		ibv_dealloc_mw(mw);
	} else {
		printf("%s: failed errno %d\n", name, errno);
	}
}

/* ------------------------------------------------------ QPs and polls --- */

static struct ibv_cq_ex *make_cq(struct env *e)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 16, .wc_flags = WC_FLAGS };

	return ibv_create_cq_ex(e->ctx, &a);
}

#define RC_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |           \
		IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
#define UD_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static struct ibv_qp *create_qp_ex(struct env *e, struct ibv_cq_ex *cq,
				   enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = type, .pd = e->pd, .send_ops_flags = ops,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};

	return ibv_create_qp_ex(e->ctx, &ia);
}

/* An RC QP connected to itself, or a UD QP with Q_Key QKEY; in RTS. */
static struct ibv_qp *make_qp(struct env *e, struct ibv_cq_ex *cq,
			      enum ibv_qp_type type)
{
	struct ibv_qp *qp = create_qp_ex(e, cq, type,
					 type == IBV_QPT_RC ? RC_OPS : UD_OPS);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (!qp)
		return NULL;
	if (type == IBV_QPT_RC) {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	} else {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	}
	if (ibv_modify_qp(qp, &a, mask))
		goto fail;
	if (type == IBV_QPT_RC) {
		if (loopback_to_rtr(qp, &e->gid, e->gid_index, 12))
			goto fail;
	} else {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			goto fail;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(qp, &a, mask))
		goto fail;
	return qp;
fail:
	ibv_destroy_qp(qp);
	return NULL;
}

struct wcx {
	uint64_t wr_id;
	int status, opcode;
	uint32_t byte_len, imm, flags, qpn, src;
};

static void read_wc(struct ibv_cq_ex *cq, struct wcx *w)
{
	w->wr_id = cq->wr_id;
	w->status = cq->status;
	w->opcode = ibv_wc_read_opcode(cq);
	w->byte_len = ibv_wc_read_byte_len(cq);
	w->flags = ibv_wc_read_wc_flags(cq);
	w->imm = w->flags & IBV_WC_WITH_IMM ? ntohl(ibv_wc_read_imm_data(cq)) : 0;
	w->qpn = ibv_wc_read_qp_num(cq);
	w->src = ibv_wc_read_src_qp(cq);
}

/*
 * Up to want completions within 3 s, by ibv_start_poll / ibv_next_poll /
 * ibv_end_poll. librxe 44 (Debian 12) ends the batch itself when
 * ibv_next_poll finds nothing (it stores the consumer index and drops the
 * CQ lock); an ibv_end_poll after that would move the consumer index past
 * the producer and unlock twice (fixed upstream by rdma-core 5e7aa4102 and
 * b78b414e0), so it follows only a batch that ended with a completion.
 */
static int poll_ex(struct ibv_cq_ex *cq, struct wcx *w, int want)
{
	struct ibv_poll_cq_attr pa = { 0 };
	struct timespec t0, t;
	int n = 0, open;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (n < want) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_nsec - t0.tv_nsec) / 1000000 > 3000)
			break;
		if (ibv_start_poll(cq, &pa))
			continue;
		open = 1;
		for (;;) {
			read_wc(cq, &w[n++]);
			if (n == want)
				break;
			if (ibv_next_poll(cq)) {
				open = 0;
				break;
			}
		}
		if (open)
			ibv_end_poll(cq);
	}
	return n;
}

static const char *opcode_str(int op)
{
	static char other[16];

	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	}
	snprintf(other, sizeof(other), "opcode %d", op);
	return other;
}

/*
 * The completions as "send <wr_id>: <status> <opcode>" (sends by wr_id) and
 * "recv: <status> <opcode> len <byte_len>[ grh (UD)][ imm 0x..]"; a completion
 * naming another QP, or a UD receive naming another source QP, says so.
 */
static size_t describe(struct wcx *w, int n, struct ibv_qp *qp, char *out,
		       size_t len)
{
	size_t used = 0;
	int i, j, pass;

	/* Sends in wr_id order, then receives. */
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (w[j].wr_id < w[i].wr_id) {
				struct wcx x = w[i];

				w[i] = w[j];
				w[j] = x;
			}
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			int recv = w[i].wr_id >= RECV_ID;

			if (recv != pass)
				continue;
			if (recv)
				used += snprintf(out + used, len - used, "%srecv: %s",
						 used ? ", " : "",
						 ibv_wc_status_str(w[i].status));
			else
				used += snprintf(out + used, len - used, "%ssend %d: %s",
						 used ? ", " : "", (int)w[i].wr_id,
						 ibv_wc_status_str(w[i].status));
			if (w[i].status != IBV_WC_SUCCESS)
				continue;
			used += snprintf(out + used, len - used, " %s",
					 opcode_str(w[i].opcode));
			if (recv) {
				used += snprintf(out + used, len - used, " len %u",
						 w[i].byte_len);
				/* The GRH flag means something on UD only. */
				if (qp->qp_type == IBV_QPT_UD &&
				    w[i].flags & IBV_WC_GRH)
					used += snprintf(out + used, len - used, " grh");
				if (w[i].flags & IBV_WC_WITH_IMM)
					used += snprintf(out + used, len - used,
							 " imm %#x", w[i].imm);
				if (qp->qp_type == IBV_QPT_UD && w[i].src != qp->qp_num)
					used += snprintf(out + used, len - used,
							 " src_qp %#x not ours", w[i].src);
			}
			if (w[i].qpn != qp->qp_num)
				used += snprintf(out + used, len - used,
						 " qp_num %#x not ours", w[i].qpn);
		}
	if (!n)
		used += snprintf(out, len, "no completion");
	return used;
}

static int post_recv(struct ibv_qp *qp, char *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = RECV_ID, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static void pattern(char *p, size_t len, int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (char)(i * 7 + seed);
}

static int has_pattern(const char *p, size_t len, int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (char)(i * 7 + seed))
			return 0;
	return 1;
}

/* ------------------------------------------------------------ qp_ex_* --- */

static void qp_ex_cases(struct env *e, const char *name)
{
	struct ibv_cq_ex *cq = make_cq(e);
	struct ibv_qp *qp;

	if (!cq) {
		printf("%s: cannot create the CQ (errno %d)\n", name, errno);
		return;
	}
	errno = 0;
	if (!strcmp(name, "qp_ex_rc_send_ops"))
		qp = create_qp_ex(e, cq, IBV_QPT_RC, RC_OPS);
	else if (!strcmp(name, "qp_ex_ud_send_ops"))
		qp = create_qp_ex(e, cq, IBV_QPT_UD, UD_OPS);
	else /* qp_ex_ud_rdma_write: no RDMA on UD */
		qp = create_qp_ex(e, cq, IBV_QPT_UD, UD_OPS | IBV_QP_EX_WITH_RDMA_WRITE);
	if (qp) {
		printf("%s: created; ibv_qp_to_qp_ex %s\n", name,
		       ibv_qp_to_qp_ex(qp) ? "gives the qp_ex" : "gives NULL");
		ibv_destroy_qp(qp);
	} else {
		printf("%s: failed errno %d\n", name, errno);
	}
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
}

/* ------------------------------------------------------- rc_* and ud_* --- */

static void data_case(struct env *e, const char *name)
{
	int ud = !strncmp(name, "ud_", 3);
	struct ibv_cq_ex *cq = make_cq(e);
	struct ibv_qp *qp = cq ? make_qp(e, cq, ud ? IBV_QPT_UD : IBV_QPT_RC) : NULL;
	struct ibv_qp_ex *qpx = qp ? ibv_qp_to_qp_ex(qp) : NULL;
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = e->gid, .sgid_index = e->gid_index,
			 .hop_limit = 64 },
	};
	struct ibv_ah *ah = NULL;
	char *src = e->buf, *dst = e->buf + DST, out[512], data[128] = "";
	uint64_t raddr = (uintptr_t)dst, *rv = (uint64_t *)dst,
		 *lv = (uint64_t *)src;
	uint32_t lkey = e->mr->lkey, rkey = e->mr->rkey;
	struct wcx w[8];
	int rc = 0, want = 1, n;
	size_t used;

	if (!qpx || (ud && !(ah = ibv_create_ah(e->pd, &aa)))) {
		printf("%s: cannot make the CQ, QP%s (errno %d)\n", name,
		       ud ? " and AH" : "", errno);
		goto out;
	}
	pattern(src, DST, 1);
	qpx->wr_flags = IBV_SEND_SIGNALED;

	if (!strcmp(name, "rc_write")) {
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		ibv_wr_rdma_write(qpx, rkey, raddr);
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src, 64);
		rc = ibv_wr_complete(qpx);
		n = poll_ex(cq, w, want);
		snprintf(data, sizeof(data), "; data %s",
			 has_pattern(dst, 64, 1) ? "ok" : "bad");
	} else if (!strcmp(name, "rc_write_with_imm")) {
		rc = post_recv(qp, e->buf + 6144, 16, lkey);
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		ibv_wr_rdma_write_imm(qpx, rkey, raddr, htonl(0x12345678));
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src, 64);
		if (rc)
			ibv_wr_abort(qpx);
		else
			rc = ibv_wr_complete(qpx);
		n = poll_ex(cq, w, want = 2);
		snprintf(data, sizeof(data), "; data %s",
			 has_pattern(dst, 64, 1) ? "ok" : "bad");
	} else if (!strcmp(name, "rc_send") || !strcmp(name, "rc_send_with_imm") ||
		   !strcmp(name, "rc_send_zero_length") ||
		   !strcmp(name, "ud_send") || !strcmp(name, "ud_send_with_imm") ||
		   !strcmp(name, "ud_send_zero_length")) {
		int zero = strstr(name, "zero") != NULL;
		int off = ud ? GRH : 0;

		rc = post_recv(qp, dst, off + 128, lkey);
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		if (strstr(name, "imm"))
			ibv_wr_send_imm(qpx, htonl(0xcafe0001));
		else
			ibv_wr_send(qpx);
		if (ud)
			ibv_wr_set_ud_addr(qpx, ah, qp->qp_num, QKEY);
		if (zero)
			ibv_wr_set_sge_list(qpx, 0, NULL);
		else
			ibv_wr_set_sge(qpx, lkey, (uintptr_t)src, 64);
		if (rc)
			ibv_wr_abort(qpx);
		else
			rc = ibv_wr_complete(qpx);
		n = poll_ex(cq, w, want = 2);
		if (!zero)
			snprintf(data, sizeof(data), "; data %s",
				 has_pattern(dst + off, 64, 1) ? "ok" : "bad");
	} else if (!strcmp(name, "rc_read")) {
		pattern(dst, 64, 2);
		memset(src, 0, 64);
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		ibv_wr_rdma_read(qpx, rkey, raddr);
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src, 64);
		rc = ibv_wr_complete(qpx);
		n = poll_ex(cq, w, want);
		snprintf(data, sizeof(data), "; data %s",
			 has_pattern(src, 64, 2) ? "ok" : "bad");
	} else if (!strcmp(name, "rc_atomic_cmp_swp") ||
		   !strcmp(name, "rc_atomic_fetch_add")) {
		int cas = strstr(name, "cmp") != NULL;

		*rv = cas ? 0x1111 : 5;
		*lv = 0;
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		if (cas)
			ibv_wr_atomic_cmp_swp(qpx, rkey, raddr, 0x1111, 0x2222);
		else
			ibv_wr_atomic_fetch_add(qpx, rkey, raddr, 3);
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)lv, 8);
		rc = ibv_wr_complete(qpx);
		n = poll_ex(cq, w, want);
		snprintf(data, sizeof(data), "; returned %#llx, remote now %#llx",
			 (unsigned long long)*lv, (unsigned long long)*rv);
	} else if (!strcmp(name, "rc_send_inline")) {
		rc = post_recv(qp, dst, 128, lkey);
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		ibv_wr_send(qpx);
		ibv_wr_set_inline_data(qpx, src, 32);
		if (rc)
			ibv_wr_abort(qpx);
		else
			rc = ibv_wr_complete(qpx);
		/* Inline: the buffer is the application's again at once. */
		memset(src, 0, 32);
		n = poll_ex(cq, w, want = 2);
		snprintf(data, sizeof(data), "; data %s",
			 has_pattern(dst, 32, 1) ? "ok" : "bad");
	} else if (!strcmp(name, "rc_batch")) {
		/*
		 * One start/complete: an unsignalled write (wr_id 1), a
		 * signalled write (2), a send with immediate (3), a read (4).
		 */
		pattern(dst + 1024, 64, 3);
		rc = post_recv(qp, dst + 2048, 128, lkey);
		ibv_wr_start(qpx);
		qpx->wr_id = 1;
		qpx->wr_flags = 0;
		ibv_wr_rdma_write(qpx, rkey, raddr);
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src, 64);
		qpx->wr_id = 2;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qpx, rkey, raddr + 512);
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src + 64, 64);
		qpx->wr_id = 3;
		ibv_wr_send_imm(qpx, htonl(0xb00c));
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src + 128, 32);
		qpx->wr_id = 4;
		ibv_wr_rdma_read(qpx, rkey, raddr + 1024);
		ibv_wr_set_sge(qpx, lkey, (uintptr_t)src + 1024, 64);
		if (rc)
			ibv_wr_abort(qpx);
		else
			rc = ibv_wr_complete(qpx);
		n = poll_ex(cq, w, want = 4);
		snprintf(data, sizeof(data), "; data %s",
			 has_pattern(dst, 64, 1) &&
			 has_pattern(dst + 512, 64, 1 + 64 * 7) &&
			 has_pattern(dst + 2048, 32, 1 + 128 * 7) &&
			 has_pattern(src + 1024, 64, 3) ? "ok" : "bad");
	} else {
		printf("%s: no such case\n", name);
		goto out;
	}
	used = snprintf(out, sizeof(out), "complete rc %d; ", rc);
	used += describe(w, n, qp, out + used, sizeof(out) - used);
	printf("%s: %s%s%s\n", name, out, n < want ? " (fewer than expected)" : "",
	       data);
out:
	if (ah)
		ibv_destroy_ah(ah);
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
}

/* -------------------------------------------------------------- main --- */

int main(int argc, char **argv)
{
	static const struct env_case cases[] = {
		{ "cq_ex_no_wc_flags", cq_ex_cases },
		{ "cq_ex_byte_len", cq_ex_cases },
		{ "cq_ex_imm", cq_ex_cases },
		{ "cq_ex_qp_num", cq_ex_cases },
		{ "cq_ex_src_qp", cq_ex_cases },
		{ "cq_ex_slid_sl_dlid_path_bits", cq_ex_cases },
		{ "cq_ex_completion_timestamp", cq_ex_cases },
		{ "cq_ex_completion_timestamp_wallclock", cq_ex_cases },
		{ "cq_ex_flow_tag", cq_ex_cases },
		{ "cq_ex_single_threaded", cq_ex_cases },
		{ "cq_ex_ignore_overrun", cq_ex_cases },
		{ "qp_ex_rc_send_ops", qp_ex_cases },
		{ "qp_ex_ud_send_ops", qp_ex_cases },
		{ "qp_ex_ud_rdma_write", qp_ex_cases },
		{ "rc_write", data_case },
		{ "rc_write_with_imm", data_case },
		{ "rc_send", data_case },
		{ "rc_send_with_imm", data_case },
		{ "rc_send_zero_length", data_case },
		{ "rc_read", data_case },
		{ "rc_atomic_cmp_swp", data_case },
		{ "rc_atomic_fetch_add", data_case },
		{ "rc_send_inline", data_case },
		{ "rc_batch", data_case },
		{ "ud_send", data_case },
		{ "ud_send_with_imm", data_case },
		{ "ud_send_zero_length", data_case },
		{ "rereg_mr_access", mr_mw_cases },
		{ "mw_alloc_type_1", mr_mw_cases },
		{ "mw_alloc_type_2", mr_mw_cases },
	};

	return run_cases(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
