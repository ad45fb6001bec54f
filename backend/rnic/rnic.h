// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The host RNIC as the engine sees it: verbs on host objects, in host terms.
// Three implementations sit behind it:
//   - SoftRnic (backend/soft_rnic): a functional loopback fabric that moves
//     real bytes between registered memory of QPs of any VM on the daemon;
//   - an rdma-core (libibverbs) RNIC for hosts that have one;
//   - a virtual-time timing model of a commodity RNIC (the isolation bench).
// Everything here is already checked by the engine: guest input never
// reaches an Rnic unvalidated. Implementations still fail cleanly (error
// completions, error statuses) on anything the fabric itself decides: remote
// keys, remote access rights, receive availability, QP states.
//
// Threading: control calls (Create*, Modify*, Destroy*, RegMr) and data calls
// (Post*, PollCq) are made from one thread at a time; the engine makes data
// calls only from the data-path thread. Data calls never allocate.
#ifndef VRDMA_BACKEND_RNIC_RNIC_H_
#define VRDMA_BACKEND_RNIC_RNIC_H_

#include <array>
#include <cstdint>
#include <span>

#include "backend/base/status.h"

namespace vrdma {

using Gid = std::array<uint8_t, 16>;

// Host object identifiers chosen by the RNIC.
struct RnicPd { uint32_t id = 0; };
struct RnicCq { uint32_t id = 0; };
struct RnicAh { uint32_t id = 0; };
struct RnicSrq { uint32_t id = 0; };
struct RnicMr { uint32_t id = 0; uint32_t lkey = 0; uint32_t rkey = 0; };
// A memory window: id names it for DeallocMw and never changes; rkey is the
// rkey it was allocated with (a bind replaces its low 8 bits).
struct RnicMw { uint32_t id = 0; uint32_t rkey = 0; };
struct RnicQp { uint32_t id = 0; uint32_t qpn = 0; };  // qpn: 24 bits

// kGsi is the engine's own QP1 (backend/engine/gsi.h, docs/virtio-rdma.md
// §4.6): the engine never asks an Rnic for one.
enum class QpType : uint8_t { kGsi = 1, kRc = 2, kUc = 3, kUd = 4 };
enum class QpState : uint8_t {
  kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kSqd = 4, kSqe = 5, kErr = 6,
};

// IBV_ACCESS_* values. kAccessMwBind is an MR's: windows may be bound to
// it. kAccessZeroBased is named only to be refused: no RNIC here binds a
// zero-based window (docs/virtio-rdma.md §4.7).
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 0x1,
  kAccessRemoteWrite = 0x2,
  kAccessRemoteRead = 0x4,
  kAccessRemoteAtomic = 0x8,
  kAccessMwBind = 0x10,
  kAccessZeroBased = 0x20,
};

// IB_UVERBS_WR_* values (the subset the device offers), and the host-only
// cross-channel operations of RNICs that have them (RnicLimits::
// cross_channel; MLNX_OFED's IBV_EXP_WR_CQE_WAIT / SEND_ENABLE, the RNIC
// model). A guest never names the host-only ones: the WQE decoder accepts
// guest opcodes only up to kAtomicFetchAdd (and, with VIRTIO_RDMA_F_MW,
// the three window opcodes, docs/virtio-rdma.md §4.7).
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpSwp = 5,
  kAtomicFetchAdd = 6,
  // Memory windows (RnicLimits::max_mw > 0; RC and UC QPs). kLocalInv and
  // kBindMw are local operations: executed in SQ order by the requester,
  // no message. kSendWithInv is a SEND whose receiver then invalidates the
  // window SendWr::invalidate_rkey names. An RDMA READ, WRITE or atomic
  // whose rkey is a window's passes the responder's RNIC only if the window
  // is valid, bound, of the responder QP's PD, bound to that QP (type 2),
  // allows the access and holds the range; else the MR rkey's remote access
  // error. RNIC checks all: the engine cannot see remote keys.
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
  // Fast registration (RnicLimits::max_fr_mr > 0; RC and UC QPs): a local
  // operation in SQ order that maps a fast-registration MR (AllocFrMr) onto
  // the pages SendWr::reg names and makes it valid. kLocalInv and
  // kSendWithInv also take such an MR's rkey (docs/virtio-rdma.md §4.8).
  kRegMr = 0x20,  // the kernel's IB_WR_REG_MR (VIRTIO_RDMA_WR_REG_MR)
  // The QP processes nothing after this WR until wait_cq has produced
  // wait_index completions in all (absolute count since the CQ was
  // created); a wait_index already reached completes at once and, like
  // PeRF's zero-count WAIT, makes the RNIC move on to another QP.
  kWait = 0x40,
  // Makes enable_count more (0: all) posted WRs of the managed QP
  // enable_qp visible to the RNIC.
  kEnable = 0x41,
};

// IBV_SEND_* values.
enum SendFlags : uint32_t {
  kSendFence = 0x1,
  kSendSignaled = 0x2,
  kSendSolicited = 0x4,
  kSendInline = 0x8,
};

// IBV_WC_* status values.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kFatalErr = 19,
  kGeneralErr = 21,
};

// The IB_WC_* statuses there are (0..kWcStatusCount-1), and each one's name
// as metrics and stats show it: ibv_wc_status_str()'s words in snake case.
// A status from outside that range (an RNIC's) is counted under "unknown".
inline constexpr uint32_t kWcStatusCount = 22;
constexpr const char* WcStatusName(uint32_t status) {
  constexpr const char* kNames[kWcStatusCount] = {
      "success",
      "local_length_error",
      "local_qp_operation_error",
      "local_eec_operation_error",
      "local_protection_error",
      "wr_flushed_error",
      "memory_bind_operation_error",
      "bad_response_error",
      "local_access_error",
      "remote_invalid_request_error",
      "remote_access_error",
      "remote_operation_error",
      "transport_retry_counter_exceeded",
      "rnr_retry_counter_exceeded",
      "local_rdd_violation_error",
      "remote_invalid_rd_request",
      "operation_aborted",
      "invalid_eecn",
      "invalid_eec_state",
      "fatal_error",
      "response_timeout_error",
      "general_error"};
  return status < kWcStatusCount ? kNames[status] : "unknown";
}

// IB_UVERBS_WC_* opcode values.
enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kRegMr = 8,  // IB_WC_REG_MR (VIRTIO_RDMA_WC_REG_MR): user space has none
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// The completion opcode of a send work request: the one WR -> WC table,
// for every CQE of a send WR (SoftRnic's completions, the engine's error
// and flush CQEs, the test double's). IB leaves the opcode of a flushed WR
// undefined; applications like it set. Host-only opcodes report kSend.
constexpr WcOpcode SendCompletionOpcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv:
      return WcOpcode::kSend;
    case WrOpcode::kLocalInv:
      return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    case WrOpcode::kRegMr:
      return WcOpcode::kRegMr;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kWait:
    case WrOpcode::kEnable:
      break;
  }
  return WcOpcode::kSend;
}

// IBV_WC_* flag values. kWcWithInv: the receive (a SEND_WITH_INV) invalidated
// the window whose rkey Completion::imm_data holds.
enum WcFlags : uint32_t { kWcGrh = 0x1, kWcWithImm = 0x2, kWcWithInv = 0x8 };

// A scatter/gather element in host terms: addr is an iova inside the MR
// named by lkey (MRs are registered with the guest's iova).
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

inline constexpr int kMaxSge = 32;       // per work request, host side
inline constexpr int kMaxInline = 512;   // bytes of inline data

// What a kBindMw binds (ibv_mw_bind_info with the window, as rxe's WQE
// carries it). The RNIC checks it as rxe does (rxe_mw.c) and fails the WR
// with kMwBindErr, QP to ERR, on any violation: mw_rkey is the current rkey
// of a window; access holds only kAccessRemote{Read,Write,Atomic}; a type 1
// window is valid, a type 2 window is free and of the QP's PD; with
// length > 0, mr_lkey names an MR with kAccessMwBind, [addr, addr + length)
// lies inside it and write or atomic access needs its kAccessLocalWrite; a
// type 2 bind needs length > 0 (a type 1 bind of length 0 unbinds). The
// RNIC does not know whose window or MR it is: the engine checks that both
// belong to the VM that posts the bind (engine/mw_access.h) before posting.
struct MwBind {
  uint32_t mw_rkey = 0;   // the window's current rkey
  uint32_t mr_lkey = 0;   // the MR it is bound to (unused when length is 0)
  uint64_t addr = 0;      // iova in that MR
  uint64_t length = 0;
  uint32_t rkey = 0;      // the new rkey: only its low 8 bits are used
  uint32_t access = 0;    // kAccessRemote* granted through the window
  // RnicMw::id and RnicMr::id of the two, which the engine knows from its
  // checks: an RNIC that posts to a device object (VerbsRnic) finds them
  // in O(1) and refuses the post (kInvalid) when they disagree with the
  // keys; SoftRnic goes by the keys alone, as rxe does.
  uint32_t mw_id = 0;
  uint32_t mr_id = 0;
};

// One 4 KiB page of a fast registration, named as an SGE is: an iova
// inside an MR of the registered MR's PD (the engine's RAM MRs,
// docs/virtio-rdma.md §4.8), so that an RNIC can map it indirectly (mlx5:
// a KLM entry {lkey, va}; SoftRnic: resolved through its MR table at each
// access). addr is 4 KiB aligned.
struct FrPage {
  uint32_t lkey = 0;
  uint64_t addr = 0;
};

// What a kRegMr registers (IB_WR_REG_MR: ib_reg_wr with the MR's page list).
// The RNIC checks, in SQ order, and fails the WR with kLocQpOpErr (QP to
// ERR, as rxe's rxe_reg_fast_mr) on any violation: mr_lkey is the current
// lkey of a fast-registration MR of the QP's PD that is not valid; access
// holds only kAccessLocalWrite and kAccessRemote{Read,Write,Atomic}, remote
// write or atomic with local write; num_pages ==
// ((iova % 4096) + length + 4095) / 4096 and at most the MR's max_pages
// (else kLocLenErr). Then the MR covers [iova, iova + length) with byte
// iova at pages[0].addr + iova % 4096 and continuing page after page; its
// lkey and rkey take key as their low 8 bits (ib_update_fast_reg_key) and
// it is valid from the next WR of the SQ on. A page whose lkey no longer
// names an MR covering it fails the access that reaches it (local:
// kLocProtErr; remote: the rkey's remote access error), never the
// registration: the engine named only the posting VM's own RAM.
//
// pages is the engine's memory, one array per MR: the RNIC reads it when
// the WR runs (an RNIC that needs its own copy makes it then). It stays
// valid until the VM is detached, even if the MR is deregistered while the
// WR waits (the engine then keeps the array, and may give it to a later MR
// of the same VM: its contents are always pages of that VM's RAM). The
// engine rewrites it only while decoding the next kRegMr of its MR, which
// IB requires to follow an invalidation.
struct FrReg {
  uint32_t mr_lkey = 0;  // the MR's current lkey
  uint8_t key = 0;       // the new key byte
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  const FrPage* pages = nullptr;
  uint32_t num_pages = 0;
  uint32_t mr_id = 0;    // RnicMr::id, checked against mr_lkey like MwBind's
};

struct SendWr {
  uint64_t wr_id = 0;                    // the engine's cookie, opaque here
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;               // SendFlags
  uint32_t imm_data = 0;                 // network order, as in the WQE
  uint8_t num_sge = 0;
  uint16_t inline_len = 0;               // when kSendInline: bytes in inline_data
  std::array<Sge, kMaxSge> sge{};
  const uint8_t* inline_data = nullptr;  // valid until PostSend returns
  // RDMA and atomics.
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // UD.
  RnicAh ah{};
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  // Cross-channel (kWait, kEnable).
  RnicCq wait_cq{};
  uint64_t wait_index = 0;
  RnicQp enable_qp{};
  uint32_t enable_count = 0;
  // Memory windows. kLocalInv: invalidate_rkey is a valid (bound) type 2
  // window's current rkey, else kLocQpOpErr and the QP to ERR; the engine
  // checks that the window is the posting VM's. kSendWithInv: the
  // receiver's RNIC invalidates it after placing the data (a valid type 2
  // window of the receiving QP's PD, else the receive completes
  // kRemInvReqErr and the receiving QP goes to ERR, as on rxe).
  // With fast registration, both also take a fast-registration MR's
  // current rkey, valid or not (as rxe_invalidate_mr), of the QP's PD
  // (kLocalInv) or the receiving QP's PD (kSendWithInv: on a shared RNIC
  // the PD is what keeps one VM's peer off another VM's MRs), else the
  // same errors as for a window.
  uint32_t invalidate_rkey = 0;
  MwBind bind{};                         // kBindMw
  FrReg reg{};                           // kRegMr

  uint64_t total_length() const {
    if (send_flags & kSendInline) return inline_len;
    uint64_t n = 0;
    for (int i = 0; i < num_sge; ++i) n += sge[i].length;
    return n;
  }
};

struct RecvWr {
  uint64_t wr_id = 0;
  uint8_t num_sge = 0;
  std::array<Sge, kMaxSge> sge{};
};

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t byte_len = 0;
  // With kWcWithImm the immediate data (network order); with kWcWithInv the
  // rkey the receive invalidated (host order): ibv_wc's union of the two.
  uint32_t imm_data = 0;
  uint32_t qpn = 0;                      // local QP
  uint32_t src_qpn = 0;                  // UD: sender's QP
  uint32_t wc_flags = 0;                 // WcFlags
  uint64_t timestamp_ns = 0;             // completion time on the RNIC clock
};

struct QpCaps {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
  // The QP's type, for QpHostBytes and PrepareQp: a layer over another RNIC
  // (ReliableRnic, docs/reliability.md §2.1, §8) charges an RC QP for its
  // own machinery and a UC or UD QP nothing more. The engine sets it to the
  // QpInit's type; the worst case (RC) where no one does. Unused in the
  // caps a guest is granted.
  QpType type = QpType::kRc;
};

struct QpInit {
  QpType type = QpType::kRc;
  RnicPd pd{};
  RnicCq send_cq{};
  RnicCq recv_cq{};
  bool has_srq = false;
  RnicSrq srq{};
  QpCaps caps{};
  bool sq_sig_all = false;
  // Cross-channel: posted WRs wait for a kEnable from another QP.
  bool managed = false;
};

// Where a QP or AH sends: the destination GID as the fabric knows it (the
// engine has already mapped the guest's virtual GID to it) and the source
// GID the traffic is sent from (always one of the sending VM's own GIDs).
struct AddressVector {
  Gid dgid{};
  Gid sgid{};
  uint32_t flow_label = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t sl = 0;
};

// Attribute mask bits: the IBV_QP_* values the RNIC honours.
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpDestQpn = 1u << 20,
};

struct QpAttr {
  QpState state = QpState::kReset;
  uint32_t access_flags = 0;
  uint32_t qkey = 0;
  AddressVector av{};
  uint32_t path_mtu_bytes = 1024;
  uint8_t timeout = 14;           // 4.096 us * 2^timeout
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;          // 7 = infinite
  uint8_t min_rnr_timer = 12;     // IB encoded
  uint8_t max_rd_atomic = 1;
  uint8_t max_dest_rd_atomic = 1;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qpn = 0;
};

// An asynchronous event the RNIC reports outside any completion
// (ibv_get_async_event):
//   kCqError (IBV_EVENT_CQ_ERR): the CQ named by id (RnicCq::id) overflowed
//     or failed; it is in error, and every completion it would have produced
//     since (and will produce) is lost;
//   kQpError (IBV_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR): the QP whose
//     qpn is id went to ERR outside a completion; detail is the
//     VIRTIO_RDMA_EV_QP_* type to report;
//   kPortActive, kPortError, kGidChange: the port changed (id: port number).
struct AsyncEvent {
  enum class Type : uint8_t {
    kCqError = 1,
    kQpError = 2,
    kPortActive = 3,
    kPortError = 4,
    kGidChange = 5,
  };
  Type type = Type::kCqError;
  uint32_t id = 0;
  uint32_t detail = 0;
};

struct RnicLimits {
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
  // Memory windows (types 1 and 2B): 0 when the RNIC has none; AllocMw and
  // the window opcodes are then refused.
  uint32_t max_mw = 0;
  // Fast-registration MRs (AllocFrMr, kRegMr; docs/virtio-rdma.md §4.8): 0
  // when the RNIC has none; max_fr_pages bounds one MR's page list.
  uint32_t max_fr_mr = 0;
  uint32_t max_fr_pages = 0;
  uint64_t max_mr_size = 0;
  uint32_t max_pd = 0;
  uint32_t max_srq = 0;
  uint32_t max_srq_wr = 0;
  uint32_t max_inline_data = 0;
  uint32_t max_msg_sz = 0;
  uint32_t active_mtu_bytes = 0;
  uint64_t node_guid = 0;
  bool cross_channel = false;  // kWait, kEnable and managed QPs
  // 8-byte compare-and-swap and fetch-and-add on RC QPs, atomic among the
  // RNIC's own operations (IBV_ATOMIC_HCA).
  bool atomics = false;
  // The port's line rate in bits per second (ibv_port_attr's active speed
  // times width); 0: unknown (a SoftRnic: unlimited).
  uint64_t link_rate_bps = 0;
  // Registered memory stays pinned while registered (a physical RNIC
  // without on-demand paging): the engine charges a guest's RAM MRs
  // (docs/virtio-rdma.md §4.8) to its pinned bytes. A software RNIC
  // reaches the same mapping the daemon has and pins nothing.
  bool pins_memory = false;
};

class Rnic {
 public:
  virtual ~Rnic() = default;

  virtual RnicLimits limits() const = 0;
  // The GIDs this RNIC can send from; traffic between VMs on this daemon is
  // addressed by each VM's own GIDs, which the engine registers here.
  virtual Status AddGid(const Gid& gid) = 0;
  virtual Status RemoveGid(const Gid& gid) = 0;
  // Whether AddGid(gid) can succeed as far as the port is concerned: a
  // physical RNIC sends only from GIDs in its port's GID table (on RoCE, IP
  // addresses of its netdev). Control thread, any time (reads the device,
  // never the RNIC's tables). Software RNICs take any GID.
  virtual bool HasGid(const Gid&) const { return true; }

  // Control path.
  virtual Result<RnicPd> AllocPd() = 0;
  virtual Status DeallocPd(RnicPd pd) = 0;
  // Registers host memory [addr, addr + length) so that the RNIC sees it as
  // [iova, iova + length).
  virtual Result<RnicMr> RegMr(RnicPd pd, uint8_t* addr, uint64_t length,
                               uint64_t iova, uint32_t access) = 0;
  // kInvalid while windows are bound to the MR (rxe: EINVAL, IBA
  // 10.6.7.2.6).
  virtual Status DeregMr(RnicMr mr) = 0;
  // Memory windows of pd: type 1 (valid, unbound) or 2 (free); kInvalid for
  // another type, kNoResource beyond max_mw. A window holds its PD
  // (DeallocPd is kBusy while it lives). DeallocMw of a bound window
  // unbinds it first. kUnsupported where the RNIC has no windows (max_mw 0).
  // Control calls, like RegMr.
  virtual Result<RnicMw> AllocMw(RnicPd /*pd*/, uint8_t /*type*/) {
    return Status::kUnsupported;
  }
  virtual Status DeallocMw(RnicMw) { return Status::kUnsupported; }
  // A fast-registration MR of pd for up to max_pages 4 KiB pages
  // (IB_MR_TYPE_MEM_REG): not valid, no access, until a kRegMr. Its lkey and
  // rkey are equal, `index << 8 | key byte`, and the index (key >> 8) is
  // unique among the RNIC's live fast-registration MRs and windows, so that
  // the engine can name either by it whatever the key byte. DeregMr frees
  // it, valid or not. kInvalid for max_pages 0 or above max_fr_pages,
  // kNoResource beyond max_fr_mr, kUnsupported where max_fr_mr is 0.
  // A control call, like RegMr.
  virtual Result<RnicMr> AllocFrMr(RnicPd /*pd*/, uint32_t /*max_pages*/) {
    return Status::kUnsupported;
  }
  virtual Result<RnicCq> CreateCq(uint32_t depth) = 0;
  // Grows cq to hold depth completions, keeping those it holds
  // (ibv_resize_cq). kUnsupported where the RNIC cannot; kInvalid above
  // max_cqe.
  virtual Status ResizeCq(RnicCq, uint32_t) { return Status::kUnsupported; }
  virtual Status DestroyCq(RnicCq cq) = 0;
  virtual Result<RnicSrq> CreateSrq(RnicPd pd, uint32_t max_wr,
                                    uint32_t max_sge) = 0;
  virtual Status DestroySrq(RnicSrq srq) = 0;
  virtual Result<RnicQp> CreateQp(const QpInit& init) = 0;
  // Applies the attributes named by mask (QpAttrMask); validates the state
  // transition like a real RNIC. Moving to kErr flushes outstanding work
  // with kWrFlushErr completions.
  virtual Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) = 0;
  virtual Result<QpAttr> QueryQp(RnicQp qp) const = 0;
  virtual Status DestroyQp(RnicQp qp) = 0;
  virtual Result<RnicAh> CreateAh(RnicPd pd, const AddressVector& av) = 0;
  virtual Status DestroyAh(RnicAh ah) = 0;

  // Host memory, in bytes, an object of this shape takes in the RNIC or its
  // driver (queue buffers, per-entry state, the object itself): the engine
  // charges it to the VM that asked for the object (docs/security.md). 0
  // where that memory is not the host's (on the card). Any thread.
  virtual uint64_t QpHostBytes(const QpCaps&) const { return 0; }
  virtual uint64_t CqHostBytes(uint32_t /*depth*/) const { return 0; }
  virtual uint64_t SrqHostBytes(uint32_t /*max_wr*/, uint32_t /*max_sge*/) const {
    return 0;
  }

  // Whether the control calls other than the GIDs' (PDs, MRs, MWs, CQs, SRQs,
  // QPs, ModifyQp, AHs) may run on the engine's control thread while the
  // data-path thread makes data calls. Never two control calls at once, and
  // never a create or destroy of an object the engine's data path reaches:
  // the engine publishes an object to its data path after the create
  // returned and unpublishes it before the destroy (ArmCompletions is the
  // RNIC's own: it must not arm a CQ that DestroyCq has begun to destroy).
  // ModifyQp and ResizeCq may meet the data path's posts to and polls of
  // that object, except a QP transition to RESET, before which the engine
  // stops using the QP. A physical RNIC pins and maps a region inside its
  // registration, pins a queue, runs a firmware command per QP transition,
  // may resolve an AH's neighbour; the data path must not wait behind them
  // (libibverbs allows it). false: software RNICs, whose tables belong to
  // the data-path thread.
  virtual bool control_beside_data_path() const { return false; }

  // Where control calls run on the data-path thread (one thread at a time:
  // every call of an RNIC whose control_beside_data_path() is false, the
  // GIDs' of any), these let an RNIC keep allocation and freeing of queue
  // memory off that thread. Called on the engine's control thread, never
  // concurrently with each other: Prepare* allocates (and touches) now the
  // queue memory the next CreateQp / CreateCq or ResizeCq / CreateSrq of
  // that shape will take, so that call only installs it; Reclaim frees what
  // Destroy* and ResizeCq let go of. All optional: without them the calls
  // allocate and free as they go.
  virtual void PrepareQp(const QpCaps&) {}
  virtual void PrepareCq(uint32_t /*depth*/) {}
  virtual void PrepareSrq(uint32_t /*max_wr*/, uint32_t /*max_sge*/) {}
  virtual void Reclaim() {}

  // Data path: never allocates, never blocks.
  // Posts wrs in order; returns the number accepted (the first rejected one
  // is not posted: kNoResource when the SQ is full, kBadState when the QP
  // state does not allow posting).
  virtual int PostSend(RnicQp qp, std::span<const SendWr> wrs,
                       Status* first_error) = 0;
  virtual int PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
                       Status* first_error) = 0;
  virtual int PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                          Status* first_error) = 0;
  // Up to out.size() completions, oldest first.
  virtual int PollCq(RnicCq cq, std::span<Completion> out) = 0;
  // The size a scheduler that slices this QP's WRs should make its pieces
  // whole multiples of (sched::PieceBytes): 1 (any size) on an RNIC, the
  // reliability layer's unit on a QP it carries in software
  // (docs/reliability.md §2.3), where a piece ending inside a unit still
  // takes that whole unit of the window. Data path: a lookup, no locks.
  virtual uint32_t PieceGranule(RnicQp) const { return 1; }
  // Completions cq has produced since it was created (cross-channel
  // RNICs; kWait counts against it). 0 elsewhere.
  virtual uint64_t CqProduced(RnicCq) const { return 0; }
  // The oldest asynchronous error not yet taken (ibv_get_async_event
  // without the fd): false when there is none. Data path: never allocates,
  // never blocks.
  virtual bool PollAsyncEvent(AsyncEvent*) { return false; }
  // Lets a software RNIC do its work (move bytes, run timers). A hardware
  // RNIC does nothing here. Returns true when it did something.
  virtual bool Progress() = 0;
  // When Progress() next has work that only time brings (a timer), for an
  // RNIC whose Progress() returns false while such work waits: the data
  // path may sleep until then (the engine arms it as a deadline, in
  // CLOCK_MONOTONIC ns like the stage's). UINT64_MAX: none, or an RNIC
  // whose Progress() reports its timers as work (SoftRnic, the model).
  // Data path.
  virtual uint64_t NextTimedWorkNs() const { return UINT64_MAX; }

  // Waking an idle data path (a hardware RNIC's completion channel): an fd
  // that becomes readable after ArmCompletions when any CQ gets a
  // completion; -1 when the RNIC has none (software RNICs progress only
  // when polled). ArmCompletions (data-path thread, before it sleeps)
  // requests one notification per CQ; DrainCompletionFd (data-path thread,
  // when the fd is readable) takes the notifications so the fd goes quiet.
  virtual int completion_fd() const { return -1; }
  virtual void ArmCompletions() {}
  virtual void DrainCompletionFd() {}
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_RNIC_RNIC_H_
