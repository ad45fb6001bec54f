// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Back-off for busy-poll loops. This machine has 2 cores shared by the
// daemon and (in tests) two guest processes that all poll, so a loop that
// finds nothing must not monopolise a core: it pauses briefly and, after
// a few empty turns, yields the CPU so the peer it waits for can run.
//
// "A few" is 8 pauses (a pause is 20-50 ns here): with three pollers on two
// cores, the process that must act next is often queued behind a waiter,
// so every ping-pong hop costs the waiter's spin before it yields. 64
// pauses made a write_lat hop 2.3-2.8 us; 8 make it 0.85-0.9 us (1 and 16
// measured 2.3 and 1.2-1.5 us; a yield with nobody to run costs ~100 ns).
#ifndef VRDMA_GUEST_DRIVER_LIB_SPIN_WAIT_H_
#define VRDMA_GUEST_DRIVER_LIB_SPIN_WAIT_H_

#include <sched.h>

#include <cstdint>

namespace vrdma::guest {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class SpinWait {
 public:
  static constexpr uint32_t kDefaultSpinsBeforeYield = 8;
  explicit SpinWait(uint32_t spins_before_yield = kDefaultSpinsBeforeYield)
      : spins_before_yield_(spins_before_yield) {}
  // Call when a poll found nothing.
  void Idle() {
    if (++empty_ < spins_before_yield_) {
      CpuRelax();
      return;
    }
    empty_ = 0;
    sched_yield();
  }
  // Call when a poll found work.
  void Reset() { empty_ = 0; }

 private:
  uint32_t spins_before_yield_;
  uint32_t empty_ = 0;
};

}  // namespace vrdma::guest

#endif  // VRDMA_GUEST_DRIVER_LIB_SPIN_WAIT_H_
