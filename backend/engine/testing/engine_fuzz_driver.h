// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A stateful fuzzer for the engine (issue 10): input bytes drive an
// interpreter of control verbs and data-path work from up to three VMs on
// one engine over SoftRnic (InlineExecutor, a manual clock), with the
// invariants checked after every step; a violation prints what was broken
// and aborts (libFuzzer then reports the input):
//   - isolation: a VM's RAM changes only where it let the engine write
//     (engine_fuzz_guest.h), ring fields never carry another VM's bytes, a
//     CQE names only the VM's own QPs;
//   - accounting: Engine::Stats equals what the interpreter created and
//     was not refused (objects and pinned bytes), never above any quota
//     (objects, pinned and host bytes, mappings); host bytes are 0 when the
//     VM owns nothing; the SoftRnic holds exactly the attached VMs' objects
//     and GIDs (plus the daemon's probe objects); AttachVm is refused
//     exactly beyond EngineOptions::mapping_budget and for a GID in use; a
//     detached VM id names nothing; no rkey for an MR without remote access;
//     a create never accepts a page outside the VM's memory table;
//   - mappings: the VM's memfd is never mapped more often than the frontend
//     table's regions plus what Stats charges; after detach, not at all;
//   - no hang: PollOnce loops are bounded; an idle data path never reports
//     a deadline that is already due.
// The input format: byte 0 configures the run (bits 0-1 the scheduler
// policy, bit 2 knobs that make it split and pace small messages, bits
// 4-7 the flush budget), then a sequence of at most 400 operations, each
// an opcode byte and its arguments (missing bytes read as 0).
// engine_fuzz_seeds.cc writes the seed corpus; VRDMA_FUZZ_TRACE=1 prints
// every step.
#ifndef VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_DRIVER_H_
#define VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_DRIVER_H_

#include <cstdint>
#include <span>
#include <vector>

namespace vrdma::engine::fuzz {

enum Op : uint8_t {
  kOpCreatePd,
  kOpDestroyPd,
  kOpRegMr,
  kOpDeregMr,
  kOpCreateCq,
  kOpDestroyCq,
  kOpReqNotifyCq,
  kOpCreateQp,
  kOpModifyQp,
  kOpQueryQp,
  kOpDestroyQp,
  kOpCreateSrq,
  kOpModifySrq,
  kOpDestroySrq,
  kOpCreateAh,
  kOpDestroyAh,
  kOpPostSend,  // a well-formed send WQE (real lkeys, rkeys, AHs)
  kOpPostRecv,  // a well-formed receive WQE (RQ or SRQ)
  kOpRawWqe,    // fuzzer bytes into a ring element, producer moved
  kOpRawWrite,  // fuzzer bytes anywhere in the VM's own RAM
  kOpDoorbell,
  kOpPoll,
  kOpDrainCq,    // the guest consumes CQEs
  kOpSetMemory,  // SetGuestMemory: another table, or none
  kOpDetach,
  kOpAttach,
  kOpConnect,  // PD, MR, CQ and a QP in two VMs, both brought to RTS
  kOpStaleVm,  // verbs on a detached VM's id
  kOpSetQos,   // the operator changes a VM's QoS; reports are read
  kOpCount,
};

struct FuzzRunStats {
  uint64_t steps = 0;
  uint64_t verbs_ok = 0;       // control verbs the engine accepted
  uint64_t cqes_success = 0;   // successful CQEs the guests polled
  uint64_t recv_success = 0;   // of which receives
  uint64_t bytes_changed = 0;  // RAM bytes the engine changed
  uint64_t polls = 0;
};

// Runs one input; aborts on a violated invariant.
FuzzRunStats RunEngineFuzz(std::span<const uint8_t> input);

// Hand-written inputs that reach full SEND, WRITE, READ and UD exchanges
// between two VMs (the fuzzer's seed corpus).
std::vector<std::vector<uint8_t>> EngineFuzzSeeds();

}  // namespace vrdma::engine::fuzz

#endif  // VRDMA_BACKEND_ENGINE_TESTING_ENGINE_FUZZ_DRIVER_H_
