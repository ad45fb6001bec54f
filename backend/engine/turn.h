// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The data path's turn (one PollOnce): its number, for per-turn budgets,
// and the clock, read at most once per turn and only when something needs
// it (an idle turn reads no clock). Data-path thread; the facade begins and
// ends turns, the parts read it.
#ifndef VRDMA_BACKEND_ENGINE_TURN_H_
#define VRDMA_BACKEND_ENGINE_TURN_H_

#include <cstdint>
#include <functional>

#include "policy/scheduler_policy.h"

namespace vrdma::engine {

class Turn {
 public:
  // clock must outlive the Turn (EngineOptions::clock of the engine).
  explicit Turn(const std::function<policy::Nanos()>& clock)
      : clock_(clock) {}
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  // A new turn: fresh per-turn budgets, the clock read afresh.
  void Begin() {
    now_valid_ = false;
    ++count_;
  }
  // Work between turns (doorbells, RunSync closures) reads the clock afresh.
  void End() { now_valid_ = false; }
  uint64_t count() const { return count_; }

  // The clock, cached for the rest of the turn.
  policy::Nanos Now() {
    if (!now_valid_) {
      now_ = clock_();
      now_valid_ = true;
    }
    return now_;
  }
  // The clock now, uncached (control verbs).
  policy::Nanos ReadClock() const { return clock_(); }

 private:
  const std::function<policy::Nanos()>& clock_;
  uint64_t count_ = 0;  // PollOnce count
  policy::Nanos now_ = 0;
  bool now_valid_ = false;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_TURN_H_
