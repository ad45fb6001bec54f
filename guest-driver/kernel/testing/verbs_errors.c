// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Error flows through the stock librxe, for the differential run against
 * Soft-RoCE (issue 14 part 4): each case prints one line, "<case>: <what
 * the application saw>", made only of return codes, completion statuses
 * and asynchronous events, so that the same guest running rdma_rxe and
 * vrdma0 can be compared line by line (tests/vm/run-e2e.sh:
 * verbs_errors.expected holds Soft-RoCE's lines, verbs_errors.differences
 * the known ones of vrdma0, each with its reason).
 *
 * Every case opens the device again (its own context, PD, MR, CQs and QPs,
 * all on the port's IPv4 GID, looped back), so one case's error state or
 * asynchronous events never leak into the next. The kinds:
 *   RC: a send before RTS, full receive queue, bad rkey, past the remote or
 *       local MR, RNR with rnr_retry 0, a send longer than the receive, a
 *       misaligned atomic, the flush after an error;
 *   UD: a control send that must arrive, a send to a QPN nobody has, with a
 *       wrong Q_Key, longer than the path MTU (the receiver must see none of
 *       them), a receive buffer too small for GRH + payload, a send in RTR;
 *   SRQ: post beyond max_wr, the limit event (IBV_EVENT_SRQ_LIMIT_REACHED
 *       once fewer receives than the limit are left, not before) and the
 *       limit it leaves, a send longer than the SRQ receive;
 *   CQ overflow: four signalled writes into a one-entry CQ without polling:
 *       what ibv_poll_cq returns, the asynchronous events, whether the QP
 *       still works.
 * Waits are bounded (completions 3 s, events poll() on the async fd with a
 * timeout); only "within N s" ever depends on time.
 *
 * Build on the host: cc -O2 -Wall -o verbs_errors verbs_errors.c -libverbs
 * Run in the guest: verbs_errors <device> <gid_index> [case]
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "case_env.h"
#include "loopback.h"

/*
 * An RC QP on send CQ scq and receive CQ rcq (receives from srq when not
 * NULL), connected to itself; in RTS unless state says less.
 */
static struct ibv_qp *make_rc_qp(struct env *e, struct ibv_cq *scq,
				 struct ibv_cq *rcq, struct ibv_srq *srq,
				 enum ibv_qp_state state, int rnr_retry)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = srq ? 0 : 4,
			 .max_send_sge = 1, .max_recv_sge = srq ? 0 : 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (!qp || state == IBV_QPS_RESET)
		return qp;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		goto fail;
	if (loopback_to_rtr(qp, &e->gid, e->gid_index, 1))
		goto fail;
	if (state == IBV_QPS_RTR)
		return qp;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	a.timeout = 10;
	a.retry_cnt = 1;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		goto fail;
	return qp;
fail:
	ibv_destroy_qp(qp);
	return NULL;
}

/* An RC QP on one CQ, connected to itself. */
static struct ibv_qp *make_qp(struct env *e, struct ibv_cq *cq,
			      enum ibv_qp_state state, int rnr_retry)
{
	return make_rc_qp(e, cq, cq, NULL, state, rnr_retry);
}

/*
 * The completions cq gets within 3 s (at most max, at most 4), as "send:
 * <status>" and "recv: <status>" (wr_id 1 is the send, 2 the receive),
 * sends first: the order two queues complete in is not the point.
 */
static void completions_max(struct ibv_cq *cq, char *out, size_t len, int max)
{
	const char *by_id[3][4] = { { 0 } };
	int count[3] = { 0 }, n = 0, id, k;
	struct timespec t0, t;
	struct ibv_wc wc;
	size_t used = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		while (n < max && ibv_poll_cq(cq, 1, &wc) == 1) {
			id = wc.wr_id == 1 || wc.wr_id == 2 ? (int)wc.wr_id : 0;
			by_id[id][count[id]++] = ibv_wc_status_str(wc.status);
			n++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (n < max && (t.tv_sec - t0.tv_sec) * 1000 +
			  (t.tv_nsec - t0.tv_nsec) / 1000000 < 3000);
	out[0] = 0;
	for (id = 1; id <= 2; id++)
		for (k = 0; k < count[id]; k++)
			used += snprintf(out + used, len - used, "%s%s: %s",
					 used ? ", " : "", id == 1 ? "send" : "recv",
					 by_id[id][k]);
	if (!n)
		snprintf(out, len, "no completion");
}

static void completions(struct ibv_cq *cq, char *out, size_t len)
{
	completions_max(cq, out, len, 4);
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, char *local,
		uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len,
			       .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, char *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* One case: a fresh CQ and QP, the posts, what came back. */
static void run_case(struct env *e, const char *name)
{
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	uint64_t raddr = (uintptr_t)e->buf + 4096;
	uint32_t lkey = e->mr->lkey, rkey = e->mr->rkey;
	struct ibv_qp *qp = NULL;
	char got[256];
	int rc = 0, i;

	if (!cq) {
		printf("%s: cannot create a CQ (errno %d)\n", name, errno);
		return;
	}
	if (!strcmp(name, "post_send_in_reset")) {
		qp = make_qp(e, cq, IBV_QPS_RESET, 7);
		rc = qp ? post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, lkey, raddr, rkey) : -1;
	} else if (!strcmp(name, "post_send_in_rtr")) {
		qp = make_qp(e, cq, IBV_QPS_RTR, 7);
		rc = qp ? post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, lkey, raddr, rkey) : -1;
	} else if (!strcmp(name, "receive_queue_full")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		for (i = 0; qp && i < 64 && !(rc = post_recv(qp, e->buf, 64, lkey)); i++)
			;
		printf("%s: post_recv rc %d after %d receives\n", name, rc, i);
		goto out;
	} else if (!strcmp(name, "write_with_a_bad_rkey")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		rc = qp ? post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, lkey, raddr, rkey ^ 0x80) : -1;
	} else if (!strcmp(name, "write_past_the_remote_mr")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		rc = qp ? post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, lkey, raddr + 4090, rkey) : -1;
	} else if (!strcmp(name, "local_sge_past_the_mr")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		rc = qp ? post(qp, IBV_WR_RDMA_WRITE, e->buf + BUF - 32, 64, lkey, raddr, rkey) : -1;
	} else if (!strcmp(name, "send_without_a_receive_rnr_retry_0")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 0);
		rc = qp ? post(qp, IBV_WR_SEND, e->buf, 64, lkey, 0, 0) : -1;
	} else if (!strcmp(name, "send_larger_than_the_receive")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		rc = qp ? post_recv(qp, e->buf + 2048, 16, lkey) : -1;
		if (!rc)
			rc = post(qp, IBV_WR_SEND, e->buf, 64, lkey, 0, 0);
	} else if (!strcmp(name, "atomic_at_a_misaligned_address")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		rc = qp ? post(qp, IBV_WR_ATOMIC_CMP_AND_SWP, e->buf, 8, lkey, raddr + 4, rkey) : -1;
	} else if (!strcmp(name, "send_after_an_error_is_flushed")) {
		qp = make_qp(e, cq, IBV_QPS_RTS, 7);
		rc = qp ? post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, lkey, raddr, rkey ^ 0x80) : -1;
		completions(cq, got, sizeof(got));
		if (!rc)
			rc = post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, lkey, raddr, rkey);
	}
	if (!qp) {
		printf("%s: cannot make the QP (errno %d)\n", name, errno);
		goto out;
	}
	completions(cq, got, sizeof(got));
	printf("%s: post rc %d; %s\n", name, rc, got);
out:
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
}

/* ------------------------------------------------ asynchronous events --- */

/*
 * The asynchronous events of e's context within ms milliseconds, in order,
 * repeats counted ("CQ error x3"), or "no event"; stops early once an event
 * of type until arrives (until < 0: waits the whole time). Each case has
 * its own context, so every event here is the case's.
 */
static void async_events(struct env *e, int ms, int until, char *out,
			 size_t len)
{
	struct pollfd pfd = { .fd = e->ctx->async_fd, .events = POLLIN };
	struct timespec t0, t;
	struct ibv_async_event ev;
	int last = -1, reps = 0, left, stop = 0;
	size_t used = 0;

	fcntl(pfd.fd, F_SETFL, fcntl(pfd.fd, F_GETFL) | O_NONBLOCK);
	out[0] = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 +
				  (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (stop || left <= 0 || poll(&pfd, 1, left) != 1)
			break;
		while (!ibv_get_async_event(e->ctx, &ev)) {
			if ((int)ev.event_type == last) {
				reps++;
			} else {
				if (last >= 0 && reps > 1)
					used += snprintf(out + used, len - used, " x%d", reps);
				used += snprintf(out + used, len - used, "%s%s",
						 last >= 0 ? ", " : "",
						 ibv_event_type_str(ev.event_type));
				last = ev.event_type;
				reps = 1;
			}
			stop |= (int)ev.event_type == until;
			ibv_ack_async_event(&ev);
		}
	}
	if (last >= 0 && reps > 1)
		snprintf(out + used, len - used, " x%d", reps);
	if (last < 0)
		snprintf(out, len, "no event");
}

/* ---------------------------------------------------------------- UD --- */

enum { QKEY = 0x11111111, GRH = 40 };

/* A UD QP on cq with Q_Key QKEY, in state (INIT, RTR or RTS). */
static struct ibv_qp *make_ud_qp(struct env *e, struct ibv_cq *cq,
				 enum ibv_qp_state state)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY,
	};

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		goto fail;
	if (state == IBV_QPS_INIT)
		return qp;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		goto fail;
	if (state == IBV_QPS_RTR)
		return qp;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto fail;
	return qp;
fail:
	ibv_destroy_qp(qp);
	return NULL;
}

/* An AH toward the port's own GID (UD loopback). */
static struct ibv_ah *make_ah(struct env *e)
{
	struct ibv_ah_attr a = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = e->gid, .sgid_index = e->gid_index,
			 .hop_limit = 64 },
	};

	return ibv_create_ah(e->pd, &a);
}

static int post_ud(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn,
		   uint32_t qkey, char *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/*
 * A UD sender and a receiver with one receive posted (rbuf bytes), on one
 * CQ; the sender sends len bytes to dqpn (the receiver's QPN unless
 * wrong_qpn) with qkey. sender_state RTR: the send is posted before RTS.
 */
static void ud_case(struct env *e, const char *name, uint32_t len,
		    uint32_t rbuf, int wrong_qpn, uint32_t qkey,
		    enum ibv_qp_state sender_state)
{
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	struct ibv_qp *s = NULL, *r = NULL;
	struct ibv_ah *ah = NULL;
	char got[256];
	int rc = -1;

	if (!cq || !(s = make_ud_qp(e, cq, sender_state)) ||
	    !(r = make_ud_qp(e, cq, IBV_QPS_RTS)) || !(ah = make_ah(e))) {
		printf("%s: cannot make the UD QPs and AH (errno %d)\n", name, errno);
		goto out;
	}
	rc = post_recv(r, e->buf + 4096, rbuf, e->mr->lkey);
	if (!rc)
		rc = post_ud(s, ah, wrong_qpn ? 0xfffff0 : r->qp_num, qkey,
			     e->buf, len, e->mr->lkey);
	completions_max(cq, got, sizeof(got), 2);
	printf("%s: post rc %d; %s\n", name, rc, got);
out:
	if (ah)
		ibv_destroy_ah(ah);
	if (r)
		ibv_destroy_qp(r);
	if (s)
		ibv_destroy_qp(s);
	if (cq)
		ibv_destroy_cq(cq);
}

/* The port's active MTU in bytes. */
static uint32_t port_mtu(struct env *e)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(e->ctx, 1, &pa))
		return 1024;
	return 128u << pa.active_mtu;
}

static void ud_cases(struct env *e, const char *name)
{
	uint32_t mtu = port_mtu(e);

	if (!strcmp(name, "ud_send_control"))
		ud_case(e, name, 64, GRH + 64, 0, QKEY, IBV_QPS_RTS);
	else if (!strcmp(name, "ud_send_to_a_qpn_without_a_qp"))
		ud_case(e, name, 64, GRH + 64, 1, QKEY, IBV_QPS_RTS);
	else if (!strcmp(name, "ud_send_with_a_wrong_qkey"))
		ud_case(e, name, 64, GRH + 64, 0, 0x22222222, IBV_QPS_RTS);
	else if (!strcmp(name, "ud_send_larger_than_the_path_mtu"))
		ud_case(e, name, mtu + 1, GRH + mtu + 64, 0, QKEY, IBV_QPS_RTS);
	else if (!strcmp(name, "ud_receive_smaller_than_grh_and_payload"))
		ud_case(e, name, 64, GRH + 32, 0, QKEY, IBV_QPS_RTS);
	else if (!strcmp(name, "ud_post_send_in_rtr"))
		ud_case(e, name, 64, GRH + 64, 0, QKEY, IBV_QPS_RTR);
}

/* --------------------------------------------------------------- SRQ --- */

static struct ibv_srq *make_srq(struct env *e, uint32_t max_wr)
{
	struct ibv_srq_init_attr ia = {
		.attr = { .max_wr = max_wr, .max_sge = 1 },
	};

	return ibv_create_srq(e->pd, &ia);
}

static int post_srq_recv(struct ibv_srq *srq, char *buf, uint32_t len,
			 uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* Send one 64-byte message and wait for its two completions (3 s). */
static int send_one(struct ibv_qp *qp, struct ibv_cq *cq, struct env *e)
{
	char got[256];

	if (post(qp, IBV_WR_SEND, e->buf, 64, e->mr->lkey, 0, 0))
		return -1;
	completions_max(cq, got, sizeof(got), 2);
	return strcmp(got, "send: success, recv: success") ? -1 : 0;
}

static void srq_cases(struct env *e, const char *name)
{
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	/* The limit case needs room for eight receives. */
	struct ibv_srq *srq = make_srq(e, strcmp(name, "srq_limit_event") ? 4 : 16);
	struct ibv_srq_attr sa = { 0 };
	uint32_t lkey = e->mr->lkey;
	struct ibv_qp *qp = NULL;
	char got[256], ev[256];
	int rc = 0, i, mrc, sent;

	if (!cq || !srq) {
		printf("%s: cannot create the CQ and SRQ (errno %d)\n", name, errno);
		goto out;
	}
	if (!strcmp(name, "srq_receive_queue_full")) {
		for (i = 0; i < 64 && !(rc = post_srq_recv(srq, e->buf, 64, lkey)); i++)
			;
		printf("%s: post_srq_recv rc %d after %d receives\n", name, rc, i);
		goto out;
	}
	qp = make_rc_qp(e, cq, cq, srq, IBV_QPS_RTS, 7);
	if (!qp) {
		printf("%s: cannot make the QP (errno %d)\n", name, errno);
		goto out;
	}
	if (!strcmp(name, "srq_send_larger_than_the_receive")) {
		rc = post_srq_recv(srq, e->buf + 2048, 16, lkey);
		if (!rc)
			rc = post(qp, IBV_WR_SEND, e->buf, 64, lkey, 0, 0);
		completions(cq, got, sizeof(got));
		printf("%s: post rc %d; %s\n", name, rc, got);
	} else if (!strcmp(name, "srq_limit_event")) {
		/*
		 * Eight receives, limit 4: the event is due once fewer than 4
		 * are left (the fifth receive used), not when exactly 4 are.
		 */
		for (i = 0; i < 8 && !rc; i++)
			rc = post_srq_recv(srq, e->buf + 2048 + 64 * i, 64, lkey);
		sa.srq_limit = 4;
		mrc = rc ? rc : ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT);
		for (sent = 0; !mrc && sent < 4 && !send_one(qp, cq, e); sent++)
			;
		async_events(e, 1000, -1, ev, sizeof(ev));
		printf("%s: modify rc %d; after %d receives: %s; ", name, mrc,
		       sent, ev);
		if (sent == 4 && !send_one(qp, cq, e))
			sent++;
		async_events(e, 3000, IBV_EVENT_SRQ_LIMIT_REACHED, ev, sizeof(ev));
		memset(&sa, 0xff, sizeof(sa));
		rc = ibv_query_srq(srq, &sa);
		printf("after %d within 3 s: %s; query rc %d, srq_limit %u\n",
		       sent, ev, rc, sa.srq_limit);
	}
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (srq)
		ibv_destroy_srq(srq);
	if (cq)
		ibv_destroy_cq(cq);
}

/* ------------------------------------------------------- CQ overflow --- */

/*
 * A one-entry send CQ (its own receive CQ beside it) and four signalled
 * writes, not polled until all had 1 s to complete: the posts, what
 * ibv_poll_cq returns then, the asynchronous events within 2 s, and
 * whether a fifth write still completes once the CQ has room.
 */
static void cq_overflow(struct env *e, const char *name)
{
	struct ibv_cq *scq = ibv_create_cq(e->ctx, 1, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	uint64_t raddr = (uintptr_t)e->buf + 4096;
	struct ibv_qp *qp = NULL;
	struct ibv_wc wc[16];
	char ev[256], got[256], polled[256] = "";
	size_t used = 0;
	int rc[4], i, n;

	if (!scq || !rcq || !(qp = make_rc_qp(e, scq, rcq, NULL, IBV_QPS_RTS, 7))) {
		printf("%s: cannot make the CQs and QP (errno %d)\n", name, errno);
		goto out;
	}
	for (i = 0; i < 4; i++)
		rc[i] = post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, e->mr->lkey,
			     raddr, e->mr->rkey);
	async_events(e, 2000, -1, ev, sizeof(ev));
	n = ibv_poll_cq(scq, 16, wc);
	for (i = 0; i < n; i++)
		used += snprintf(polled + used, sizeof(polled) - used, "%s%s",
				 i ? ", " : " (", ibv_wc_status_str(wc[i].status));
	if (n > 0)
		snprintf(polled + used, sizeof(polled) - used, ")");
	printf("%s: cqe %d; post rc %d %d %d %d; poll_cq %d%s; events within 2 s: %s; ",
	       name, scq->cqe, rc[0], rc[1], rc[2], rc[3], n, polled, ev);
	n = post(qp, IBV_WR_RDMA_WRITE, e->buf, 64, e->mr->lkey, raddr,
		 e->mr->rkey);
	completions_max(scq, got, sizeof(got), 1);
	printf("then a write: post rc %d; %s\n", n, got);
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (rcq)
		ibv_destroy_cq(rcq);
	if (scq)
		ibv_destroy_cq(scq);
}

/* -------------------------------------------------------------- main --- */

int main(int argc, char **argv)
{
	static const struct env_case cases[] = {
		{ "post_send_in_reset", run_case },
		{ "post_send_in_rtr", run_case },
		{ "receive_queue_full", run_case },
		{ "write_with_a_bad_rkey", run_case },
		{ "write_past_the_remote_mr", run_case },
		{ "local_sge_past_the_mr", run_case },
		{ "send_without_a_receive_rnr_retry_0", run_case },
		{ "send_larger_than_the_receive", run_case },
		{ "atomic_at_a_misaligned_address", run_case },
		{ "send_after_an_error_is_flushed", run_case },
		{ "ud_send_control", ud_cases },
		{ "ud_send_to_a_qpn_without_a_qp", ud_cases },
		{ "ud_send_with_a_wrong_qkey", ud_cases },
		{ "ud_send_larger_than_the_path_mtu", ud_cases },
		{ "ud_receive_smaller_than_grh_and_payload", ud_cases },
		{ "ud_post_send_in_rtr", ud_cases },
		{ "srq_receive_queue_full", srq_cases },
		{ "srq_limit_event", srq_cases },
		{ "srq_send_larger_than_the_receive", srq_cases },
		{ "cq_overflow", cq_overflow },
	};

	return run_cases(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
