// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What the RNIC control calls that the engine runs on the data-path thread
// cost that thread, with and without their queue memory prepared on the
// control thread (Rnic::PrepareQp / PrepareCq, Rnic::Reclaim): SoftRnic,
// a CQ of 2047 and an RC QP of 1023 send and receive WQEs, created and
// destroyed n times. Figures only (docs/benchmarks.md).
//
//   build/bench/micro/rnic_control_cost [n]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "backend/soft_rnic/soft_rnic.h"

int main(int argc, char** argv) {
  using vrdma::QpCaps;
  using vrdma::QpInit;
  const int n = argc > 1 ? atoi(argv[1]) : 50;
  vrdma::SoftRnic rnic;
  const vrdma::RnicPd pd = *rnic.AllocPd();
  const QpCaps caps{1023, 1023, 4, 4, 64};
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  for (bool prepared : {false, true}) {
    double create = 0, destroy = 0, reclaim = 0;
    for (int i = 0; i < n; ++i) {
      if (prepared) {  // on the control thread, before the closure
        rnic.PrepareCq(2047);
        rnic.PrepareQp(caps);
      }
      const auto t0 = Clock::now();  // the closure on the data-path thread
      const vrdma::RnicCq cq = *rnic.CreateCq(2047);
      QpInit init;
      init.pd = pd;
      init.send_cq = init.recv_cq = cq;
      init.caps = caps;
      const vrdma::RnicQp qp = *rnic.CreateQp(init);
      const auto t1 = Clock::now();
      (void)rnic.DestroyQp(qp);
      (void)rnic.DestroyCq(cq);
      const auto t2 = Clock::now();
      rnic.Reclaim();  // on the control thread, after the closure
      const auto t3 = Clock::now();
      create += us(t0, t1);
      destroy += us(t1, t2);
      reclaim += us(t2, t3);
    }
    printf("%-10s data-path thread: create CQ+QP %8.1f us, destroy %6.1f us; "
           "control thread: reclaim %6.1f us (mean of %d)\n",
           prepared ? "prepared" : "unprepared", create / n, destroy / n, reclaim / n, n);
  }
  return 0;
}
