// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory windows through stock libibverbs, one line per case, for the
 * differential comparison with Soft-RoCE (docs/virtio-rdma.md 4.7;
 * tests/vm/run-e2e.sh compares the lines with verbs_mw.expected, rdma_rxe's,
 * or verbs_mw.differences). Each case binds windows over an MR registered
 * with IBV_ACCESS_MW_BIND and uses them from an RC QP connected to itself:
 *   mw_type1_bind_write: ibv_bind_mw (type 1), an RDMA WRITE through the
 *       window, and whether the bytes landed;
 *   mw_type1_write_outside: a WRITE just past the window (inside the MR);
 *   mw_type2_bind_write_local_inv: IBV_WR_BIND_MW, a WRITE, IBV_WR_LOCAL_INV,
 *       a WRITE again;
 *   mw_type2_send_with_inv: a bound window invalidated by the QP's own
 *       IBV_WR_SEND_WITH_INV: the receive's wc_flags (IBV_WC_WITH_INV is
 *       0x8) and rkey, then a WRITE;
 *   mw_type2_bind_zero_length: a type 2 bind of length 0;
 *   mw_bind_mr_without_mw_bind: a bind to an MR registered without
 *       IBV_ACCESS_MW_BIND;
 *   mw_type1_dereg_mr_with_bound_window: ibv_dereg_mr while a window is bound,
 *       then after ibv_dealloc_mw.
 * Completion statuses are printed by ibv_wc_status_str; waits are bounded.
 *
 * Build on the host: cc -O2 -Wall -o verbs_mw verbs_mw.c -libverbs
 * Run in the guest: verbs_mw <device> <gid_index> [case]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "case_env.h"
#include "loopback.h"

enum { WIN = 4096, WIN_LEN = 1024, LEN = 64, RECV_ID = 100 };

#define REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct mw_env {
	struct env *e;
	struct ibv_mr *mr; /* e->buf again, with IBV_ACCESS_MW_BIND */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static int mw_open(struct env *e, struct mw_env *m, int mw_bind)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = REMOTE | IBV_ACCESS_REMOTE_ATOMIC,
	};

	memset(m, 0, sizeof(*m));
	m->e = e;
	m->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE | REMOTE |
			   (mw_bind ? IBV_ACCESS_MW_BIND : 0));
	m->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!m->mr || !m->cq)
		return -1;
	ia.send_cq = ia.recv_cq = m->cq;
	m->qp = ibv_create_qp(e->pd, &ia);
	if (!m->qp || ibv_modify_qp(m->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
	    loopback_to_rtr(m->qp, &e->gid, e->gid_index, 1))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	a.timeout = 10;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(m->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void mw_close(struct mw_env *m)
{
	if (m->qp)
		ibv_destroy_qp(m->qp);
	if (m->cq)
		ibv_destroy_cq(m->cq);
	if (m->mr)
		ibv_dereg_mr(m->mr);
}

/* The next completion (3 s at most); its status string, or "none". */
static const char *next_wc(struct mw_env *m, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(m->cq, 1, wc);

		if (n < 0)
			return "poll failed";
		if (n == 1)
			return ibv_wc_status_str(wc->status);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_nsec - t0.tv_nsec) / 1000000 > 3000)
			return "none";
	}
}

/* Posts one signaled WR; its completion's status (or the post's errno). */
static const char *run_wr(struct mw_env *m, struct ibv_send_wr *wr,
			  char *err, size_t len)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int rc;

	wr->send_flags |= IBV_SEND_SIGNALED;
	rc = ibv_post_send(m->qp, wr, &bad);
	if (rc) {
		snprintf(err, len, "post errno %d", rc);
		return err;
	}
	return next_wc(m, &wc);
}

/* An RDMA WRITE of LEN bytes from the buffer's start to addr under rkey. */
static const char *write_to(struct mw_env *m, uint64_t addr, uint32_t rkey,
			    char *err, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)m->e->buf, LEN, m->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 2, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { .remote_addr = addr, .rkey = rkey },
	};

	return run_wr(m, &wr, err, len);
}

static void pattern(struct env *e)
{
	int i;

	for (i = 0; i < LEN; i++)
		e->buf[i] = (char)(0x5a ^ i);
}

static const char *landed(struct env *e, size_t at)
{
	return memcmp(e->buf + at, e->buf, LEN) ? "data missing" : "data landed";
}

static uint64_t win_addr(struct env *e)
{
	return (uintptr_t)e->buf + WIN;
}

/* IBV_WR_BIND_MW of a type 2 window over [WIN, WIN + length). */
static const char *bind2(struct mw_env *m, struct ibv_mw *mw, uint32_t rkey,
			 uint64_t length, char *err, size_t len)
{
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_BIND_MW };

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = m->mr;
	wr.bind_mw.bind_info.addr = win_addr(m->e);
	wr.bind_mw.bind_info.length = length;
	wr.bind_mw.bind_info.mw_access_flags = REMOTE;
	return run_wr(m, &wr, err, len);
}

/* ibv_bind_mw of a type 1 window over [WIN, WIN + WIN_LEN). */
static const char *bind1(struct mw_env *m, struct ibv_mw *mw, char *err,
			 size_t len)
{
	struct ibv_mw_bind b = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;
	int rc;

	b.bind_info.mr = m->mr;
	b.bind_info.addr = win_addr(m->e);
	b.bind_info.length = WIN_LEN;
	b.bind_info.mw_access_flags = REMOTE;
	rc = ibv_bind_mw(m->qp, mw, &b);
	if (rc) {
		snprintf(err, len, "bind errno %d", rc);
		return err;
	}
	return next_wc(m, &wc);
}

static void mw_case(struct env *e, const char *name)
{
	const int with_bind = strcmp(name, "mw_bind_mr_without_mw_bind") != 0;
	char e1[32], e2[32], e3[32], e4[32];
	const char *s1, *s2, *s3, *s4;
	struct mw_env m;
	struct ibv_mw *mw;

	if (mw_open(e, &m, with_bind)) {
		printf("%s: set-up failed errno %d\n", name, errno);
		mw_close(&m);
		return;
	}
	pattern(e);
	mw = ibv_alloc_mw(e->pd, strstr(name, "type1") ? IBV_MW_TYPE_1 :
					IBV_MW_TYPE_2);
	if (!mw) {
		printf("%s: alloc_mw errno %d\n", name, errno);
		mw_close(&m);
		return;
	}
	if (!strcmp(name, "mw_type1_bind_write")) {
		s1 = bind1(&m, mw, e1, sizeof(e1));
		s2 = write_to(&m, win_addr(e) + 128, mw->rkey, e2, sizeof(e2));
		printf("%s: bind %s, write %s, %s\n", name, s1, s2,
		       landed(e, WIN + 128));
	} else if (!strcmp(name, "mw_type1_write_outside")) {
		s1 = bind1(&m, mw, e1, sizeof(e1));
		s2 = write_to(&m, win_addr(e) + WIN_LEN, mw->rkey, e2, sizeof(e2));
		printf("%s: bind %s, write %s\n", name, s1, s2);
	} else if (!strcmp(name, "mw_type2_bind_write_local_inv")) {
		struct ibv_send_wr inv = { .wr_id = 3, .opcode = IBV_WR_LOCAL_INV };
		uint32_t rkey = ibv_inc_rkey(mw->rkey);

		s1 = bind2(&m, mw, rkey, WIN_LEN, e1, sizeof(e1));
		s2 = write_to(&m, win_addr(e), rkey, e2, sizeof(e2));
		inv.invalidate_rkey = rkey;
		s3 = run_wr(&m, &inv, e3, sizeof(e3));
		s4 = write_to(&m, win_addr(e), rkey, e4, sizeof(e4));
		printf("%s: bind %s, write %s, %s, local_inv %s, write %s\n",
		       name, s1, s2, landed(e, WIN), s3, s4);
	} else if (!strcmp(name, "mw_type2_send_with_inv")) {
		uint32_t rkey = ibv_inc_rkey(mw->rkey);
		struct ibv_sge sge = { (uintptr_t)e->buf, 32, m.mr->lkey };
		struct ibv_sge rsge = { (uintptr_t)e->buf + WIN + 2 * WIN_LEN, 64,
					 m.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = RECV_ID, .sg_list = &rsge,
					   .num_sge = 1 }, *rbad;
		struct ibv_send_wr swr = { .wr_id = 4, .sg_list = &sge, .num_sge = 1,
					   .opcode = IBV_WR_SEND_WITH_INV,
					   .send_flags = IBV_SEND_SIGNALED }, *sbad;
		struct ibv_wc a, b, *recv;

		s1 = bind2(&m, mw, rkey, WIN_LEN, e1, sizeof(e1));
		swr.invalidate_rkey = rkey;
		if (ibv_post_recv(m.qp, &rwr, &rbad) ||
		    ibv_post_send(m.qp, &swr, &sbad)) {
			printf("%s: bind %s, post errno %d\n", name, s1, errno);
		} else {
			s2 = next_wc(&m, &a);
			s3 = next_wc(&m, &b);
			recv = a.wr_id == RECV_ID ? &a : &b;
			s4 = write_to(&m, win_addr(e), rkey, e4, sizeof(e4));
			printf("%s: bind %s, completions %s/%s, recv wc_flags %#x "
			       "rkey %s, write %s\n", name, s1, s2, s3,
			       recv->wc_flags,
			       recv->invalidated_rkey == rkey ? "matches" : "differs",
			       s4);
		}
	} else if (!strcmp(name, "mw_type2_bind_zero_length")) {
		s1 = bind2(&m, mw, ibv_inc_rkey(mw->rkey), 0, e1, sizeof(e1));
		printf("%s: bind %s\n", name, s1);
	} else if (!strcmp(name, "mw_bind_mr_without_mw_bind")) {
		s1 = bind2(&m, mw, ibv_inc_rkey(mw->rkey), WIN_LEN, e1, sizeof(e1));
		printf("%s: bind %s\n", name, s1);
	} else if (!strcmp(name, "mw_type1_dereg_mr_with_bound_window")) {
		int rc1, err1, rc2;

		s1 = bind1(&m, mw, e1, sizeof(e1));
		errno = 0;
		rc1 = ibv_dereg_mr(m.mr);
		err1 = rc1 ? errno : 0;
		if (!rc1)
			m.mr = NULL;
		ibv_dealloc_mw(mw);
		mw = NULL;
		rc2 = m.mr ? ibv_dereg_mr(m.mr) : -1;
		if (!rc2)
			m.mr = NULL;
		printf("%s: bind %s, dereg rc %d errno %d, after dealloc_mw rc %d\n",
		       name, s1, rc1, err1, rc2);
	}
	if (mw)
		ibv_dealloc_mw(mw);
	mw_close(&m);
}

int main(int argc, char **argv)
{
	static const struct env_case cases[] = {
		{ "mw_type1_bind_write", mw_case },
		{ "mw_type1_write_outside", mw_case },
		{ "mw_type2_bind_write_local_inv", mw_case },
		{ "mw_type2_send_with_inv", mw_case },
		{ "mw_type2_bind_zero_length", mw_case },
		{ "mw_bind_mr_without_mw_bind", mw_case },
		{ "mw_type1_dereg_mr_with_bound_window", mw_case },
	};

	return run_cases(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
