// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer target: the engine's stateful fuzzer (issue 10). Each input is
// a program of control verbs and data-path work from up to three VMs on one
// engine over SoftRnic; the invariants (isolation of guest memory, quotas
// and accounting, nothing left after detach, no hang) are checked after
// every step and abort with a message when broken. See
// testing/engine_fuzz_driver.h for the input format and the invariants;
// testing/fuzz_engine_corpus/ holds the seeds (scripts/fuzz.sh passes it).
#include <cstddef>
#include <cstdint>

#include "backend/engine/testing/engine_fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)vrdma::engine::fuzz::RunEngineFuzz({data, size});
  return 0;
}
