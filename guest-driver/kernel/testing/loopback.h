/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The guest test programs' RC QP connected to itself (verbs_smoke.c,
 * verbs_errors.c, verbs_ex.c): INIT -> RTR toward its own QPN on the port's
 * GID.
 */
#ifndef VRDMA_TESTING_LOOPBACK_H_
#define VRDMA_TESTING_LOOPBACK_H_

#include <string.h>
#include <infiniband/verbs.h>

/* RTR toward qp itself at gid (the port's gid_index); 0 or an errno. */
static inline int loopback_to_rtr(struct ibv_qp *qp, const union ibv_gid *gid,
				  int gid_index, uint8_t min_rnr_timer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

#endif /* VRDMA_TESTING_LOOPBACK_H_ */
