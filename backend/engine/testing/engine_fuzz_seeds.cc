// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine fuzzer's seed inputs: full exchanges between two VMs, written
// in the interpreter's input format (engine_fuzz_driver.h), so mutation
// starts from connected QPs with data moving instead of from nothing.
#include <cstdint>
#include <vector>

#include "backend/engine/testing/engine_fuzz_driver.h"

namespace vrdma::engine::fuzz {
namespace {

class Seed {
 public:
  explicit Seed(uint8_t config) { b_.push_back(config); }
  Seed& Bytes(std::initializer_list<uint8_t> x) {
    b_.insert(b_.end(), x);
    return *this;
  }
  Seed& U16(uint16_t v) { return Bytes({uint8_t(v), uint8_t(v >> 8)}); }
  // kOpConnect: VMs a and b, QP type 0 RC, 1 UC, 2 UD.
  Seed& Connect(int a, int b, uint8_t type) {
    return Bytes({kOpConnect, uint8_t(a | b << 2), type});
  }
  // kOpPostRecv into VM v's QP qp's RQ (doorbell), buffer at off of its
  // MR mr.
  Seed& Recv(int v, uint16_t off, uint16_t len, uint8_t qp = 0,
             uint8_t mr = 0) {
    Bytes({kOpPostRecv, uint8_t(v), uint8_t(0x20 | qp), mr});
    return U16(off).U16(len);
  }
  // kOpPostSend on VM v's QP qp: op index (0 SEND, 1 SEND_IMM, 2 WRITE,
  // 3 WRITE_IMM, 4 READ, 5 CMP_SWP, 6 FETCH_ADD), signaled, doorbell; the
  // remote buffer is VM peer's first MR at roff.
  Seed& Send(int v, uint8_t op, uint16_t off, uint16_t len, int peer,
             uint16_t roff, uint8_t qp = 0, uint8_t mr = 0) {
    Bytes({kOpPostSend, uint8_t(v), qp, op, 4, mr});
    U16(off).U16(len);
    Bytes({uint8_t(peer), 0});
    return U16(roff);
  }
  Seed& PollUntilIdle() { return Bytes({kOpPoll, 0x5f}); }
  Seed& Poll(uint8_t turns) { return Bytes({kOpPoll, uint8_t(0x40 | turns)}); }
  Seed& Drain(int v, uint8_t cq = 0) {
    return Bytes({kOpDrainCq, uint8_t(v), cq});
  }
  std::vector<uint8_t> Take() { return b_; }

 private:
  std::vector<uint8_t> b_;
};

std::vector<uint8_t> RcExchange(uint8_t config) {
  Seed s(config);
  s.Connect(0, 1, 0)
      .Recv(1, 0x100, 0x1000)
      .Send(0, 0, 0x40, 0x800, 1, 0)  // SEND 2 KiB
      .PollUntilIdle()
      .Drain(0)
      .Drain(1)
      .Send(0, 2, 0x1000, 0x1800, 1, 0x2000)  // WRITE 6 KiB
      .Send(0, 4, 0x3000, 0x400, 1, 0x10)     // READ 1 KiB
      .PollUntilIdle()
      .Recv(1, 0, 0x10)
      .Send(0, 3, 0x80, 0x100, 1, 0x3800)  // WRITE_WITH_IMM
      .Send(0, 6, 0x8, 8, 1, 0x3f00)       // FETCH_ADD
      .Send(1, 5, 0x10, 8, 0, 0x3f08)      // CMP_SWP back
      .PollUntilIdle()
      .Drain(0)
      .Drain(1)
      .Bytes({kOpDetach, 1})
      .Poll(8)
      .Bytes({kOpAttach, 1, 0})
      .Drain(0);
  return s.Take();
}

std::vector<uint8_t> UdExchange() {
  Seed s(0);
  s.Connect(0, 1, 2)
      .Bytes({kOpCreateAh, 0, 0, 1, 64})  // VM 0: AH to VM 1's GID
      .Recv(1, 0, 0x400)
      .Send(0, 0, 0x100, 0x200, 1, 0)  // UD SEND, 512 bytes
      .PollUntilIdle()
      .Drain(0)
      .Drain(1);
  return s.Take();
}

std::vector<uint8_t> UcAndLoopback() {
  Seed s(0x10);
  s.Connect(0, 1, 1)
      .Send(0, 2, 0, 0x1000, 1, 0)  // UC WRITE
      .PollUntilIdle()
      .Connect(1, 1, 0)  // two RC QPs of VM 1, to each other
      .Recv(1, 0x200, 0x200, 2, 2)
      .Send(1, 0, 0, 0x100, 1, 0, 1, 1)  // SEND between VM 1's own QPs
      .PollUntilIdle()
      .Drain(1, 1)
      .Drain(1, 2)
      .Bytes({kOpSetMemory, 1, 1})  // another memory table
      .Send(0, 2, 0, 0x100, 1, 0x100)
      .PollUntilIdle()
      .Bytes({kOpDetach, 0})
      .PollUntilIdle();
  return s.Take();
}

std::vector<uint8_t> Rnr() {
  // A SEND with no receive posted (RNR retries), then the receive arrives.
  Seed s(0);
  s.Connect(0, 1, 0x0c)  // RC, rnr_retry 7 (forever)
      .Send(0, 0, 0, 0x100, 1, 0)
      .Poll(20)
      .Recv(1, 0, 0x100)
      .PollUntilIdle()
      .Drain(0)
      .Drain(1);
  return s.Take();
}

// Work in flight when the receiver is reset and the sender detached: perf
// splits the SEND into 1 KiB pieces (config 5).
std::vector<uint8_t> ResetAndDetachMidTraffic() {
  Seed s(5);
  s.Connect(0, 1, 0)
      .Recv(1, 0, 0x3000)
      .Send(0, 0, 0, 0x3000, 1, 0)  // SEND 12 KiB
      .Poll(2)
      .Bytes({kOpModifyQp, 1, 0, 0, 0, 0})  // VM 1's QP to RESET
      .Poll(3)
      .Drain(0)
      .Drain(1)
      .Send(0, 2, 0, 0x2000, 1, 0)  // WRITE 8 KiB
      .Poll(1)
      .Bytes({kOpDetach, 0})
      .PollUntilIdle()
      .Bytes({kOpAttach, 0, 0})
      .Connect(0, 1, 0)
      .Recv(1, 0x100, 0x100, 1, 1)
      .Send(0, 0, 0, 0x100, 1, 0)
      .PollUntilIdle()
      .Drain(0)
      .Drain(1, 1);
  return s.Take();
}

// VM 1 receives through an SRQ (limit 2, armed): SENDs land in its
// buffers, the limit event fires as they are used.
std::vector<uint8_t> SrqExchange() {
  Seed s(0);
  s.Connect(0, 1, 0x80)
      .Bytes({kOpPostRecv, 1, 0xa0, 0})  // SRQ 0, doorbell
      .U16(0)
      .U16(0x200)
      .Bytes({kOpPostRecv, 1, 0xa0, 0})
      .U16(0x200)
      .U16(0x200)
      .Bytes({kOpPostRecv, 1, 0xa0, 0})
      .U16(0x400)
      .U16(0x200)
      .Send(0, 0, 0, 0x100, 1, 0)
      .Send(0, 1, 0x100, 0x100, 1, 0)  // SEND_WITH_IMM
      .PollUntilIdle()
      .Drain(0)
      .Drain(1)
      .Bytes({kOpDestroySrq, 1, 0})  // busy: its QP still uses it
      .Bytes({kOpDestroyQp, 1, 0})
      .Bytes({kOpDestroySrq, 1, 0})
      .PollUntilIdle();
  return s.Take();
}

}  // namespace

std::vector<std::vector<uint8_t>> EngineFuzzSeeds() {
  // RcExchange under each policy; perf and justitia also with the knobs
  // that split and pace 1 KiB pieces (config bit 2).
  return {RcExchange(0), RcExchange(1), RcExchange(3), RcExchange(5),
          RcExchange(7), UdExchange(),  UcAndLoopback(), Rnr(),
          ResetAndDetachMidTraffic(), SrqExchange()};
}

}  // namespace vrdma::engine::fuzz
