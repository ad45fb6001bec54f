/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the differential programs (verbs_errors.c, verbs_ex.c) share: each
 * case runs on a context, PD and 8 KiB MR of its own (struct env), so no
 * case's errors or asynchronous events leak into the next, and main runs
 * the cases by name.
 *
 * Usage: <program> <device> <gid_index> [case]
 */
#ifndef VRDMA_TESTING_CASE_ENV_H_
#define VRDMA_TESTING_CASE_ENV_H_

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf; /* BUF bytes: the MR */
	union ibv_gid gid;
	int gid_index;
};

enum { BUF = 8192 };

struct env_case {
	const char *name;
	void (*run)(struct env *e, const char *name);
};

static inline void env_close(struct env *e)
{
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	e->mr = NULL;
	e->pd = NULL;
	e->ctx = NULL;
}

static inline int env_open(struct env *e, struct ibv_device *dev)
{
	e->ctx = ibv_open_device(dev);
	memset(e->buf, 0, BUF);
	if (!e->ctx || ibv_query_gid(e->ctx, 1, e->gid_index, &e->gid) ||
	    !(e->pd = ibv_alloc_pd(e->ctx)) ||
	    !(e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC)))
		return -1;
	return 0;
}

/* Runs every case (or the one argv[3] names), each in a fresh env; a case
 * whose set-up fails prints so and the others still run. */
static inline int run_cases(int argc, char **argv,
			    const struct env_case *cases, unsigned int n)
{
	const char *name = argc > 1 ? argv[1] : "vrdma0";
	const char *only = argc > 3 ? argv[3] : NULL;
	struct ibv_device **list = ibv_get_device_list(NULL), *dev = NULL;
	struct env e = { .gid_index = argc > 2 ? atoi(argv[2]) : 0 };
	unsigned int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	e.buf = aligned_alloc(4096, BUF);
	if (!dev || !e.buf) {
		printf("set-up failed: no device %s\n", name);
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (only && strcmp(only, cases[i].name))
			continue;
		if (env_open(&e, dev)) {
			printf("%s: set-up failed on %s (errno %d)\n",
			       cases[i].name, name, errno);
			env_close(&e);
			continue;
		}
		cases[i].run(&e, cases[i].name);
		fflush(stdout);
		env_close(&e);
	}
	ibv_free_device_list(list);
	free(e.buf);
	return 0;
}

#endif /* VRDMA_TESTING_CASE_ENV_H_ */
