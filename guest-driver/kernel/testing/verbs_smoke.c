// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Guest smoke test for virtio_rdma through the stock librxe: every verb a
 * perftest run needs, on one RC QP connected to itself, with the exit code
 * and a line per step saying what failed. It checks the driver's plumbing
 * (ring mmap, doorbell, CQ ring polling, completion channel), so it passes
 * against testing/fake_backend.py, which completes WQEs without moving data.
 *
 * Build on the host (same Debian release as the guest):
 *   cc -O2 -Wall -o verbs_smoke verbs_smoke.c -libverbs
 * Run in the guest: verbs_smoke [device] [gid_index] [av]
 * With "av" it also checks that ibv_query_qp returns the address vector it
 * was given (source GID index and destination GID): on a RoCE port the
 * driver maps the guest's GID index to the device's and back. (The fake
 * backend answers QUERY_QP with zeros: no "av" there.)
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "loopback.h"

static int failures;

#define CHECK(cond, what)                                                  \
	do {                                                               \
		if (cond) {                                                \
			printf("ok   %s\n", what);                             \
		} else {                                                   \
			printf("FAIL %s (errno %d %s)\n", what, errno,         \
			       strerror(errno));                           \
			failures++;                                        \
			goto out;                                          \
		}                                                          \
	} while (0)

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 2000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
	}
	return 0;
}

static int post_write(struct ibv_qp *qp, struct ibv_mr *mr, char *buf,
		      uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.rdma.rkey = mr->rkey;
	return ibv_post_send(qp, &wr, &bad);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "vrdma0";
	int gid_index = argc > 2 ? atoi(argv[2]) : 0;
	int check_av = argc > 3 && !strcmp(argv[3], "av");
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_comp_channel *ch = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_cq *cq = NULL, *ev_cq;
	struct ibv_qp *qp = NULL;
	struct ibv_wc wc;
	union ibv_gid gid;
	void *ev_ctx;
	char *buf = aligned_alloc(4096, 8192);
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx, "open device");
	CHECK(!ibv_query_gid(ctx, 1, gid_index, &gid), "query gid");
	CHECK((pd = ibv_alloc_pd(ctx)), "alloc pd");
	CHECK((mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE)), "reg mr");
	CHECK((ch = ibv_create_comp_channel(ctx)), "create comp channel");
	CHECK((cq = ibv_create_cq(ctx, 16, NULL, ch, 0)), "create cq");

	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	CHECK((qp = ibv_create_qp(pd, &ia)), "create qp");
	printf("     qpn %#x caps send %u/%u recv %u/%u inline %u\n", qp->qp_num,
	       ia.cap.max_send_wr, ia.cap.max_send_sge, ia.cap.max_recv_wr,
	       ia.cap.max_recv_sge, ia.cap.max_inline_data);

	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "modify INIT");
	CHECK(!loopback_to_rtr(qp, &gid, gid_index, 12), "modify RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_MAX_QP_RD_ATOMIC), "modify RTS");

	CHECK(!(errno = post_write(qp, mr, buf, 0x1111)), "post_send (doorbell)");
	CHECK(poll_one(cq, &wc) == 1, "poll cq (ring written by the device)");
	CHECK(wc.wr_id == 0x1111 && wc.status == IBV_WC_SUCCESS &&
	      wc.qp_num == qp->qp_num, "completion fields");

	/* Completion channel: arm, complete, the event must arrive. */
	CHECK(!ibv_req_notify_cq(cq, 0), "req_notify_cq");
	CHECK(!(errno = post_write(qp, mr, buf, 0x2222)), "post_send 2");
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 10000) == 1, "completion event within 10 s");
	CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx) && ev_cq == cq, "get cq event");
	ibv_ack_cq_events(cq, 1);
	CHECK(poll_one(cq, &wc) == 1 && wc.wr_id == 0x2222, "poll cq 2");

	struct ibv_qp_init_attr qia;
	CHECK(!ibv_query_qp(qp, &a, IBV_QP_STATE, &qia), "query qp");
	if (check_av) {
		memset(&a, 0, sizeof(a));
		CHECK(!ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV, &qia),
		      "query qp AV");
		printf("     state %d, sgid_index %d (given %d), dgid %s\n",
		       a.qp_state, a.ah_attr.grh.sgid_index, gid_index,
		       memcmp(&a.ah_attr.grh.dgid, &gid, sizeof(gid)) ?
		       "differs" : "as given");
		CHECK(a.qp_state == IBV_QPS_RTS && a.ah_attr.is_global &&
		      a.ah_attr.grh.sgid_index == gid_index &&
		      !memcmp(&a.ah_attr.grh.dgid, &gid, sizeof(gid)),
		      "query qp: RTS and the address vector it was given");
	}
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (ch)
		ibv_destroy_comp_channel(ch);
	if (mr)
		ibv_dereg_mr(mr);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
	return failures ? 1 : 0;
}
