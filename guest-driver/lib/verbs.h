// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A small verbs-like API over the in-process virtio-rdma guest driver, for
// tests, benchmarks and vrdma-perftest. It does what the guest kernel module
// plus librxe do in a real VM:
//   - control verbs become control-queue commands;
//   - work and completion queues are librxe rings (rxe_ring.h) in guest RAM
//     whose pages are passed to CREATE_CQ / CREATE_QP as page lists;
//   - PostSend writes a struct rxe_send_wqe into the SQ ring, publishes the
//     producer index with release and posts an SQ doorbell record (kicking
//     only when the device asks); PostRecv only writes the RQ ring (librxe
//     needs no system call for receives); PollCq reads struct ib_uverbs_wc
//     at the consumer index; ReqNotifyCq posts a CQ_ARM doorbell.
// Objects are owned by unique_ptr and destroyed (DESTROY_* command) by their
// destructor; destroy QPs before their CQs and PD, and everything before the
// Device. Not thread-safe: one thread per Device.
#ifndef VRDMA_GUEST_DRIVER_LIB_VERBS_H_
#define VRDMA_GUEST_DRIVER_LIB_VERBS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backend/base/status.h"
#include "guest-driver/lib/guest_ram_allocator.h"
#include "guest-driver/lib/rxe_ring.h"
#include "guest-driver/lib/virtio_rdma_driver.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::guest {

using GidBytes = std::array<uint8_t, 16>;

class Device;
class Cq;

class Pd {
 public:
  ~Pd();
  uint32_t handle() const { return handle_; }
  Device& device() const { return *dev_; }

 private:
  friend class Device;
  Pd(Device* dev, uint32_t handle) : dev_(dev), handle_(handle) {}
  Device* dev_;
  uint32_t handle_;
};

// A registered buffer in guest RAM. Its iova is its address in this
// process (like a user-space MR, whose iova is its virtual address), so an
// SGE's addr is simply a pointer into data().
class Mr {
 public:
  ~Mr();
  uint8_t* data() const { return buf_.host + offset_; }
  uint64_t length() const { return length_; }
  uint64_t iova() const { return reinterpret_cast<uint64_t>(data()); }
  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  uint32_t handle() const { return handle_; }

 private:
  friend class Device;
  Mr() = default;
  Device* dev_ = nullptr;
  GuestBuffer buf_;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
  uint32_t handle_ = 0, lkey_ = 0, rkey_ = 0;
};

class Cq {
 public:
  ~Cq();
  uint32_t handle() const { return handle_; }
  uint32_t cqe() const { return cqe_; }
  // Copies up to out.size() completions; returns how many.
  int Poll(std::span<ib_uverbs_wc> out);
  // CQ_ARM (or CQ_ARM_SOLICITED) doorbell: one completion event on the
  // event queue for the next (solicited) completion.
  Status ReqNotify(bool solicited_only = false);

 private:
  friend class Device;
  Cq() = default;
  Device* dev_ = nullptr;
  GuestBuffer ring_mem_;
  RxeRing ring_;
  uint32_t handle_ = 0;
  uint32_t cqe_ = 0;
};

class Ah {
 public:
  ~Ah();
  uint32_t handle() const { return handle_; }

 private:
  friend class Device;
  Ah(Device* dev, uint32_t handle) : dev_(dev), handle_(handle) {}
  Device* dev_;
  uint32_t handle_;
};

struct QpInitAttr {
  uint8_t qp_type = VIRTIO_RDMA_QPT_RC;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
  bool sq_sig_all = false;
  uint32_t doorbell_queue = 0;  // which doorbell virtqueue this QP rings
};

// IBV_SEND_* flags (the uapi headers do not name them).
inline constexpr uint32_t kSendFence = 0x1;
inline constexpr uint32_t kSendSignaled = 0x2;
inline constexpr uint32_t kSendSolicited = 0x4;
inline constexpr uint32_t kSendInline = 0x8;

// A work request as the verbs user writes it (ibv_send_wr, flattened).
struct SendWr {
  static constexpr int kMaxSge = 4;
  uint64_t wr_id = 0;
  uint32_t opcode = IB_UVERBS_WR_SEND;  // IB_UVERBS_WR_*
  uint32_t send_flags = 0;              // kSend*
  uint32_t imm_data = 0;                // network order
  int num_sge = 0;
  std::array<rxe_sge, kMaxSge> sge{};
  // RDMA.
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // UD.
  uint32_t ah = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
};

struct RecvWr {
  static constexpr int kMaxSge = 4;
  uint64_t wr_id = 0;
  int num_sge = 0;
  std::array<rxe_sge, kMaxSge> sge{};
};

// The remote side's coordinates, as perftest exchanges them.
struct RemoteQpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  GidBytes gid{};
};

class Qp {
 public:
  ~Qp();
  uint32_t qpn() const { return qpn_; }
  uint8_t type() const { return type_; }
  const virtio_rdma_qp_cap& cap() const { return cap_; }

  Status Modify(const virtio_rdma_qp_attr& attr);
  // The usual transitions (perftest's defaults): RESET->INIT with access
  // flags (and qkey for UD), INIT->RTR toward `remote`, RTR->RTS.
  Status ToInit(uint32_t access_flags, uint32_t qkey = 0x11111111);
  Status ToRtr(const RemoteQpInfo& remote, uint8_t path_mtu = VIRTIO_RDMA_MTU_1024);
  Status ToRts(uint32_t sq_psn);
  Result<virtio_rdma_resp_query_qp> Query();

  // Returns kNoResource when the SQ ring is full, kInvalid for a WR the
  // ring cannot hold (too many SGEs, inline too long).
  Status PostSend(const SendWr& wr);
  // Several WRs, one doorbell.
  Status PostSend(std::span<const SendWr> wrs);
  Status PostRecv(const RecvWr& wr);
  // The ABI's optional RQ doorbell ("look at my receive ring now"). librxe
  // never sends it; a driver may, e.g. before UD traffic, where a receive
  // the device has not yet picked up means a silently dropped datagram.
  Status RingRqDoorbell();
  uint32_t sq_free() const;

 private:
  friend class Device;
  Qp() = default;
  Status WriteSendWqe(const SendWr& wr);
  Device* dev_ = nullptr;
  GuestBuffer ring_mem_;  // SQ pages then RQ pages
  RxeRing sq_;
  RxeRing rq_;
  uint32_t qpn_ = 0;
  uint8_t type_ = 0;
  uint32_t ssn_ = 0;
  uint32_t doorbell_queue_ = 0;
  virtio_rdma_qp_cap cap_{};
};

class Device {
 public:
  static Result<std::unique_ptr<Device>> Open(const std::string& socket_path,
                                              const DriverOptions& options = {});
  ~Device();

  const virtio_rdma_config& config() const { return driver_->config(); }
  VirtioRdmaDriver& driver() { return *driver_; }

  Result<virtio_rdma_resp_query_device> QueryDevice();
  Result<virtio_rdma_resp_query_port> QueryPort(uint32_t port = 1);
  Result<GidBytes> QueryGid(uint32_t index);

  Result<std::unique_ptr<Pd>> AllocPd();
  // Allocates `length` bytes of guest RAM (starting `offset` bytes into its
  // first page, to exercise first_page_offset) and registers them.
  Result<std::unique_ptr<Mr>> RegMr(Pd& pd, uint64_t length, uint32_t access,
                                    uint32_t offset = 0);
  Result<std::unique_ptr<Cq>> CreateCq(uint32_t cqe);
  Result<std::unique_ptr<Qp>> CreateQp(Pd& pd, const QpInitAttr& attr);
  Result<std::unique_ptr<Ah>> CreateAh(Pd& pd, const virtio_rdma_ah_attr& attr);
  // An AH toward `dgid` from our GID 0.
  Result<std::unique_ptr<Ah>> CreateAh(Pd& pd, const GidBytes& dgid);

  // Destroys an object by handle (used by destructors).
  Status DestroyHandle(uint32_t cmd, uint32_t handle);

 private:
  Device() = default;
  std::unique_ptr<VirtioRdmaDriver> driver_;
};

// Smallest n with 2^n >= v.
uint32_t Log2Ceil(uint64_t v);

}  // namespace vrdma::guest

#endif  // VRDMA_GUEST_DRIVER_LIB_VERBS_H_
