// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Error flows through the stock librxe, for the differential run against
 * Soft-RoCE (issue 14 part 4): each case prints one line, "<case>: <what
 * the application saw>", made only of return codes and completion
 * statuses, so that the same guest running rdma_rxe and vrdma0 can be
 * compared line by line (tests/vm/run-e2e.sh: verbs_errors.expected holds
 * Soft-RoCE's lines, verbs_errors.differences the known ones of vrdma0,
 * each with its reason).
 *
 * Every case uses a fresh RC QP connected to itself on the port's IPv4 GID
 * (loopback), so one case's error state never leaks into the next.
 *
 * Build on the host: cc -O2 -Wall -o verbs_errors verbs_errors.c -libverbs
 * Run in the guest: verbs_errors <device> <gid_index>
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "loopback.h"

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf; /* 8 KiB: the MR */
	union ibv_gid gid;
	int gid_index;
};

enum { BUF = 8192 };

/* An RC QP on cq, connected to itself; in RTS unless state says less. */
static struct ibv_qp *make_qp(struct env *e, struct ibv_cq *cq,
			      enum ibv_qp_state state, int rnr_retry)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
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

/*
 * The completions cq gets within 3 s (at most 4), as "send: <status>" and
 * "recv: <status>" (wr_id 1 is the send, 2 the receive), sends first: the
 * order two queues complete in is not the point.
 */
static void completions(struct ibv_cq *cq, char *out, size_t len)
{
	const char *by_id[3][4] = { { 0 } };
	int count[3] = { 0 }, n = 0, id, k;
	struct timespec t0, t;
	struct ibv_wc wc;
	size_t used = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		while (n < 4 && ibv_poll_cq(cq, 1, &wc) == 1) {
			id = wc.wr_id == 1 || wc.wr_id == 2 ? (int)wc.wr_id : 0;
			by_id[id][count[id]++] = ibv_wc_status_str(wc.status);
			n++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (n < 4 && (t.tv_sec - t0.tv_sec) * 1000 +
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

int main(int argc, char **argv)
{
	static const char *const cases[] = {
		"post_send_in_reset", "post_send_in_rtr", "receive_queue_full",
		"write_with_a_bad_rkey", "write_past_the_remote_mr",
		"local_sge_past_the_mr", "send_without_a_receive_rnr_retry_0",
		"send_larger_than_the_receive", "atomic_at_a_misaligned_address",
		"send_after_an_error_is_flushed",
	};
	const char *name = argc > 1 ? argv[1] : "vrdma0";
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct env e = { .gid_index = argc > 2 ? atoi(argv[2]) : 0 };
	unsigned int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			e.ctx = ibv_open_device(list[i]);
	e.buf = aligned_alloc(4096, BUF);
	if (!e.ctx || ibv_query_gid(e.ctx, 1, e.gid_index, &e.gid) ||
	    !(e.pd = ibv_alloc_pd(e.ctx)) ||
	    !(e.mr = ibv_reg_mr(e.pd, e.buf, BUF, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_ATOMIC))) {
		printf("set-up failed on %s (errno %d)\n", name, errno);
		return 1;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&e, cases[i]);
	ibv_dereg_mr(e.mr);
	ibv_dealloc_pd(e.pd);
	ibv_close_device(e.ctx);
	return 0;
}
