// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SoftRnic: a functional software RNIC. A loopback fabric that really moves
// bytes between registered memory of QPs of any VM on the daemon, with the
// RC/UC/UD semantics of a real RNIC (modelled on Linux rxe): key and access
// checks, RNR NAKs and retries, transport retries, error completions,
// flushes, CQ overflow. It is the functional twin behind every host-side test.
//
// Work is asynchronous like hardware: PostSend only queues; Progress()
// executes queued work requests (per QP in order, one whole message at a
// time) and runs RNR and retransmit timers on an injectable clock, so timer
// behaviour is testable deterministically. Progress() returns true when it
// did something and also while an RNR or ACK timer with a finite deadline is
// pending: like a NIC with retransmissions outstanding, the RNIC is not idle,
// and a loop that sleeps once its pollers report no work would otherwise
// never fire the timer. (An infinite wait, ACK timeout 0, does not count.)
//
// Routing: a QP's AddressVector sgid is its source GID; a message is
// delivered only when its dgid is a GID registered with AddGid. RC/UC
// messages go to the QP numbered dest_qpn, which must be connected back
// (its dest_qpn is the sender and its path runs between the same two GIDs);
// UD messages go to the QP numbered remote_qpn, which must be a UD QP.
//
// Line rate: with RnicLimits::link_rate_bps set, every packet of every QP
// (requests, the responder's ACKs and READ data) goes through one port
// whose wire carries that many bits per second (wire.h); the QPs with work
// take turns, a message at a time, as the wire frees. 0 (the default):
// unlimited, messages move as fast as the CPU copies them.
//
// A fabric (docs/reliability.md §7.1): constructed with a fabric::Fabric
// port, the SoftRnic still delivers whole messages to its own GIDs as
// above, and cuts UC and UD messages to any other dgid into packets of the
// path MTU (net/packet.h) that it sends through the port; Progress() polls
// the port and a packet responder executes what arrives (net/). RC to
// another host is RC on the wire: PSNs, ACKs, go-back-N, RNR and error
// NAKs, READ and atomic responses, several WQEs in flight. Without a
// fabric (the default) nothing of this exists.
//
// Resources: every table is bounded by the limits; queues and CQ rings are
// allocated at creation. Post*, PollCq and Progress never allocate.
#ifndef VRDMA_BACKEND_SOFT_RNIC_SOFT_RNIC_H_
#define VRDMA_BACKEND_SOFT_RNIC_SOFT_RNIC_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "backend/base/status.h"
#include "backend/fabric/fabric.h"
#include "backend/rnic/rnic.h"
#include "backend/soft_rnic/object_table.h"
#include "backend/soft_rnic/queue_memory.h"
#include "backend/soft_rnic/soft_objects.h"
#include "backend/soft_rnic/wire.h"

namespace vrdma {

namespace soft::net {
struct Header;
}  // namespace soft::net

// Returns nanoseconds on a monotonic clock.
using SoftRnicClock = std::function<uint64_t()>;

// Sensible defaults for a software RNIC (max_qp is capped at 65535 because a
// QPN is index << 8 | tag in 24 bits).
RnicLimits DefaultSoftRnicLimits();

// Counters of a CQ that a real RNIC would report as an async CQ error.
struct SoftCqStats {
  bool overflowed = false;
  uint64_t dropped = 0;  // completions lost since the overflow
};

// Live objects in each table, and GIDs registered (tests: nothing leaks).
struct SoftRnicCounts {
  uint32_t pds = 0, mrs = 0, cqs = 0, srqs = 0, qps = 0, ahs = 0, gids = 0,
           mws = 0, fr_mrs = 0;
  bool operator==(const SoftRnicCounts&) const = default;
};

// Why the fabric responder dropped a packet (SoftNetStats::dropped), one
// check each, in the order they run.
enum class NetDrop : uint8_t {
  // net::Decode's syntax checks.
  kShort,    // shorter than a header
  kVersion,  // unknown version
  kLength,   // payload length disagrees with the packet, or above 4096
  kOpcode,   // no such opcode for its transport
  kField,    // a QPN, PSN or flow label too wide, unknown flags
  // The responder's.
  kUnknownGid,     // dgid is not a GID of this RNIC
  kUnknownQp,      // no such QPN, or a QP of another transport
  kNotConnected,   // UC: the QP's peer is another QP or path
  kState,          // the QP does not receive (RESET, INIT, ERR)
  kQkey,           // UD: Q_Key mismatch
  kSequence,       // UC: not the next packet of the message in progress
  kMtu,            // payload not as the MTU or the RETH length requires
  kAccess,         // UC WRITE: QP access flags, rkey or range
  kNoReceive,      // UC, UD: no receive WQE for a SEND or WRITE_WITH_IMM
  kResponse,       // RC requester: a response that answers nothing in flight
  kCount,
};

// What a SoftRnic sent to and received from its fabric.
struct SoftNetStats {
  uint64_t tx_packets = 0;
  uint64_t rx_packets = 0;
  // UC messages the responder started and then dropped whole (a packet
  // lost, reordered or bad in the middle).
  uint64_t uc_messages_dropped = 0;
  // RC.
  uint64_t retransmitted = 0;   // request packets sent again (go-back-N)
  uint64_t timeouts = 0;        // ACK timeouts that rewound the requester
  uint64_t acks_sent = 0;       // ACKs (and atomic ACKs), duplicates' too
  uint64_t naks_sent = 0;       // sequence, RNR and error NAKs
  uint64_t duplicates = 0;      // requests the responder had executed before
  uint64_t reads_served = 0;    // READ requests answered, duplicates too
  uint64_t atomics_replayed = 0;  // duplicate atomics answered from saved results
  std::array<uint64_t, static_cast<size_t>(NetDrop::kCount)> dropped{};
  uint64_t drops(NetDrop d) const { return dropped[static_cast<size_t>(d)]; }
  uint64_t total_drops() const {
    uint64_t n = 0;
    for (uint64_t d : dropped) n += d;
    return n;
  }
};

class SoftRnic final : public Rnic {
 public:
  // fabric: where messages to GIDs this RNIC does not have go (a port that
  // must outlive it); nullptr: loopback only.
  explicit SoftRnic(RnicLimits limits = DefaultSoftRnicLimits(),
                    SoftRnicClock clock = {},
                    fabric::Fabric* fabric = nullptr);
  ~SoftRnic() override;
  SoftRnic(const SoftRnic&) = delete;
  SoftRnic& operator=(const SoftRnic&) = delete;

  RnicLimits limits() const override { return limits_; }
  uint64_t QpHostBytes(const QpCaps& caps) const override;
  uint64_t CqHostBytes(uint32_t depth) const override;
  uint64_t SrqHostBytes(uint32_t max_wr, uint32_t max_sge) const override;
  void PrepareQp(const QpCaps& caps) override;
  void PrepareCq(uint32_t depth) override;
  void PrepareSrq(uint32_t max_wr, uint32_t max_sge) override;
  void Reclaim() override;
  Status AddGid(const Gid& gid) override;
  Status RemoveGid(const Gid& gid) override;

  Result<RnicPd> AllocPd() override;
  Status DeallocPd(RnicPd pd) override;
  Result<RnicMr> RegMr(RnicPd pd, uint8_t* addr, uint64_t length, uint64_t iova,
                       uint32_t access) override;
  Status DeregMr(RnicMr mr) override;
  Result<RnicMw> AllocMw(RnicPd pd, uint8_t type) override;
  Status DeallocMw(RnicMw mw) override;
  Result<RnicMr> AllocFrMr(RnicPd pd, uint32_t max_pages) override;
  Result<RnicCq> CreateCq(uint32_t depth) override;
  Status ResizeCq(RnicCq cq, uint32_t depth) override;
  Status DestroyCq(RnicCq cq) override;
  Result<RnicSrq> CreateSrq(RnicPd pd, uint32_t max_wr,
                            uint32_t max_sge) override;
  Status DestroySrq(RnicSrq srq) override;
  Result<RnicQp> CreateQp(const QpInit& init) override;
  Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) override;
  Result<QpAttr> QueryQp(RnicQp qp) const override;
  Status DestroyQp(RnicQp qp) override;
  Result<RnicAh> CreateAh(RnicPd pd, const AddressVector& av) override;
  Status DestroyAh(RnicAh ah) override;

  int PostSend(RnicQp qp, std::span<const SendWr> wrs,
               Status* first_error) override;
  int PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
               Status* first_error) override;
  int PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                  Status* first_error) override;
  int PollCq(RnicCq cq, std::span<Completion> out) override;
  // kCqError once per CQ, when it overflows.
  bool PollAsyncEvent(AsyncEvent* ev) override;
  bool Progress() override;

  // Not part of Rnic: overflow state of a CQ (kBadHandle if unknown).
  Result<SoftCqStats> QueryCqStats(RnicCq cq) const;
  // Not part of Rnic: the earliest finite RNR/ACK timer deadline, if any
  // (for tests, and for loops that would rather arm a timer than poll);
  // with a line rate and work queued, also when the wire frees.
  std::optional<uint64_t> NextTimerNs() const;
  // Not part of Rnic: bytes the port's wire carried, packet overhead
  // included (0 without a line rate).
  uint64_t wire_bytes() const { return wire_.bytes(); }
  // Not part of Rnic: packets to and from the fabric (all zero without one).
  const SoftNetStats& net_stats() const { return net_stats_; }
  // Not part of Rnic: how many objects are alive (leak checks).
  SoftRnicCounts ObjectCounts() const {
    return {pds_.live(), mrs_.live(), cqs_.live(), srqs_.live(),
            qps_.live(), ahs_.live(), static_cast<uint32_t>(num_gids_),
            mws_.live(), frs_.live()};
  }

 private:
  // Outcome of delivering one message to the responder, as the requester
  // learns it (an ACK, a NAK of some kind, or nothing at all).
  enum class Reply : uint8_t {
    kAck,         // executed (or, for UC/UD, sent: maybe dropped)
    kRnr,         // RC: no receive WQE; retry after the RNR timer
    kNoResponse,  // RC: unreachable or not listening; retransmit later
    kNakInvReq,   // RC: invalid request (op not allowed, length, align)
    kNakAccess,   // RC: rkey, range or access violation
    kNakRemOp,    // RC: responder's receive WQE was unusable
  };
  struct ExecResult {
    Reply reply = Reply::kAck;
    bool responder_error = false;  // move the responder QP to ERR
  };
  // Resolved bytes, all checks done: len host bytes at ptr, or (fr set)
  // the iova range [addr, addr + len) of a valid fast-registration MR that
  // crosses pages, whose host pages the copies look up page by page.
  // No member initialisers: a SegList is built per message on the data
  // path and only its segs[0, n) are ever read, so they are not zeroed.
  struct Seg {
    uint8_t* ptr;
    uint64_t len;
    const soft::FrMr* fr;  // Seg{ptr, len}: nullptr
    uint64_t addr;
  };
  // A resolved scatter/gather list.
  struct SegList {
    std::array<Seg, kMaxSge> segs;
    int n = 0;
    uint64_t total = 0;
    std::span<const Seg> span() const {
      return {segs.data(), static_cast<size_t>(n)};
    }
  };

  // soft_rnic.cc: GIDs.
  bool GidRegistered(const Gid& gid) const;

  // soft_mr.cc: key checks and copies. The one place keys are resolved:
  // every path (the loopback requester and responder, the fabric's) goes
  // through ResolveLocal and ResolveRemote.
  // An SGE list's lkeys (MRs or fast-registration MRs of pd): kSuccess,
  // or kLocProtErr for a bad key, range, right or fast-registration page.
  WcStatus ResolveLocal(const soft::Pd* pd, const Sge* sges, int n,
                        uint32_t need_access, SegList* out) const;
  // Whether rkey (an MR's, a window's or a fast-registration MR's) allows
  // the responder QP resp [addr, addr + len), len > 0, with need_access;
  // *out is the range then. Within one page (an atomic's 8 aligned bytes
  // always are) it is host bytes: out->ptr.
  bool ResolveRemote(const soft::Qp* resp, uint32_t rkey, uint64_t addr,
                     uint64_t len, uint32_t need_access, Seg* out) const;

  // Key spaces, by index (key >> 8): MRs up to 0x7fffff, windows above
  // kMwIndexBase, fast-registration MRs above kFrIndexBase (their limits
  // are clamped to fit), so an index names one table at most.
  static constexpr uint32_t kMwIndexBase = 0x800000;
  static constexpr uint32_t kFrIndexBase = 0xc00000;
  static bool IsMwKey(uint32_t key) {
    return (key >> 8) > kMwIndexBase && (key >> 8) <= kFrIndexBase;
  }
  static bool IsFrKey(uint32_t key) { return (key >> 8) > kFrIndexBase; }

  // soft_mr.cc: fast-registration MRs (rxe_mr.c).
  // Executes a kRegMr WQE of q: kSuccess, kLocQpOpErr or kLocLenErr.
  WcStatus RegFrMr(const soft::Qp* q, const FrReg& r);
  // Invalidates the valid fast-registration MR rkey names, of pd. False:
  // no such MR, nothing changed.
  bool InvalidateFr(uint32_t rkey, const soft::Pd* pd);
  // [addr, addr + len) of the fast-registration MR key names, valid, of
  // pd, with need_access, every page it reaches resolving: into *out.
  bool ResolveFr(const soft::Pd* pd, uint32_t key, uint64_t addr,
                 uint64_t len, uint32_t need_access, Seg* out) const;
  // Host address of page i of fr: its FrPage's lkey must name an MR of
  // fr's PD that holds the whole page; else nullptr.
  uint8_t* FrPageHost(const soft::FrMr& fr, uint64_t i) const;
  // Calls f(host, n) for the host pieces of bytes [off, off + len) of s
  // (host nullptr for a page that no longer resolves: nothing to move).
  template <typename F>
  void ForPieces(const Seg& s, uint64_t off, uint64_t len, F&& f) const;

  // The local operations (kBindMw, kLocalInv, kRegMr), executed by the
  // requester in SQ order: no message; a failure takes the QP to ERR.
  static bool IsLocalOp(WrOpcode op) {
    return op == WrOpcode::kBindMw || op == WrOpcode::kLocalInv ||
           op == WrOpcode::kRegMr;
  }
  WcStatus ExecuteLocalOp(const soft::Qp* q, const SendWr& wr);
  // Invalidates what rkey names: a window (rxe: of any PD when local) or a
  // fast-registration MR of pd. LOCAL_INV: pd is the QP's, local true; a
  // SEND_WITH_INV's receiver: the receiving QP's.
  bool Invalidate(uint32_t rkey, const soft::Pd* pd, bool local);

  // soft_mw.cc: memory windows.
  // Executes a kBindMw WQE of q: kSuccess or kMwBindErr (rxe_bind_mw).
  WcStatus BindMw(const soft::Qp* q, const MwBind& b);
  // Invalidates the bound type 2 window rkey names (kLocalInv; with pd,
  // a SEND_WITH_INV's, which must also be of that PD). False: no such
  // window, nothing changed.
  bool InvalidateMw(uint32_t rkey, const soft::Pd* pd);
  uint8_t* ResolveWindow(const soft::Qp* resp, uint32_t rkey, uint64_t addr,
                         uint64_t len, uint32_t need_access) const;
  static void Unbind(soft::Mw* mw);
  // Host pointer of [addr, addr + len) when it lies inside mr, else nullptr.
  static uint8_t* InRange(const soft::Mr& mr, uint64_t addr, uint64_t len);
  // Copies between resolved bytes (host pages of fast-registration MRs
  // found as they go). Write: len bytes of src into dst from byte offset
  // on; Read: len bytes of src from byte offset on into dst; Copy: len
  // bytes of src from its start into dst from dst_offset on.
  void Write(std::span<const Seg> dst, uint64_t offset, const uint8_t* src,
             uint64_t len) const;
  void Read(std::span<const Seg> src, uint64_t offset, uint8_t* dst,
            uint64_t len) const;
  void Copy(std::span<const Seg> dst, uint64_t dst_offset,
            std::span<const Seg> src, uint64_t len) const;
  void CopyInto(const SegList& dst, uint64_t dst_offset, const uint8_t* src,
                uint64_t len) const {
    Write(dst.span(), dst_offset, src, len);
  }
  void CopyOut(const SegList& src, uint8_t* dst, uint64_t len) const {
    Read(src.span(), 0, dst, len);
  }
  // len bytes of src from byte offset on.
  void CopyOutAt(const SegList& src, uint64_t offset, uint8_t* dst,
                 uint64_t len) const {
    Read(src.span(), offset, dst, len);
  }

  // soft_cq.cc
  void PushCompletion(soft::Cq* cq, const Completion& c);

  // soft_qp.cc: state changes with their side effects.
  void EnterError(soft::Qp* qp);
  void EnterSqError(soft::Qp* qp);
  void FlushSq(soft::Qp* qp);
  void FlushRq(soft::Qp* qp);
  // Puts the QP on the active list unless it is on a list already.
  void Activate(soft::Qp* qp);
  // Puts the QP on the timer list (its head WQE waits until wait_until_ns).
  void Park(soft::Qp* qp);
  // Takes the QP off whichever list it is on.
  void Deactivate(soft::Qp* qp);

  // soft_requester.cc
  // Runs the QP's send queue; returns true when it did something.
  bool RunQp(soft::Qp* qp, uint64_t now);
  // The QP has a message to send and the wire (line rate) is busy.
  bool WaitsForWire(const soft::Qp* qp, uint64_t now) const;
  // Puts what one attempt of a message sent (its request and the RC
  // responder's answer) on the wire; the message was ready at ready_ns.
  void ChargeWire(const soft::Qp* qp, const SendWr& wr, uint64_t len,
                  Reply reply, uint64_t ready_ns);
  // Executes the head WQE once; returns false when the QP must wait (a
  // timer runs) or stopped (error).
  bool ExecuteHead(soft::Qp* qp, uint64_t now, bool* did_work);
  // Completes the head WQE (signaled successes and every error) and pops it.
  void RetireHead(soft::Qp* qp, WcStatus status, uint64_t now);
  // Retires the head with an error and moves the QP to ERR (RC) or SQE.
  void FailHead(soft::Qp* qp, WcStatus status, uint64_t now);
  soft::Qp* Route(const soft::Qp* qp, const soft::SqSlot& slot) const;

  // soft_responder.cc: the responder side of one message.
  ExecResult Respond(soft::Qp* req_qp, const soft::SqSlot& slot, soft::Qp* resp,
                     const SegList& local, uint64_t now);
  // The receive WQE a message would consume (RQ or SRQ), or nullptr.
  static std::optional<soft::RecvEntry> PeekReceive(const soft::Qp* resp);
  static void PopReceive(soft::Qp* resp);
  void CompleteRecv(soft::Qp* resp, uint64_t wr_id, WcStatus status,
                    WcOpcode opcode, uint32_t byte_len, uint32_t flags,
                    uint32_t imm, uint32_t src_qpn, uint64_t now);

  // net/net_requester.cc: messages to other hosts' GIDs.
  // The head WQE of q goes out through the fabric (not RC, from a GID of
  // this RNIC to a GID it does not have).
  bool OnFabric(const soft::Qp* q, const soft::SqSlot& slot) const;
  // Sends the message as packets of the path MTU, ready at ready_ns.
  void NetSend(soft::Qp* q, const soft::SqSlot& slot, const SegList& local,
               uint64_t ready_ns);

  // net/net_rc_requester.cc: RC to other hosts (several WQEs in flight).
  bool IsNetRc(const soft::Qp* q) const;
  bool RunNetRc(soft::Qp* q, uint64_t now);
  // Sends WQE `slot` from its packet from_pkt on.
  void NetSendRc(soft::Qp* q, soft::SqSlot& slot, const SegList& local,
                 uint32_t from_pkt, uint64_t now);
  // Completes the front WQE (the requester's window moves up by one).
  void NetRetireFront(soft::Qp* q, WcStatus status, uint64_t now);
  // Completes the front WQEs that psn acknowledges (not a READ or an atomic:
  // they complete with their responses); true when any did.
  bool NetAcknowledge(soft::Qp* q, uint32_t psn, uint64_t now);
  // Sends again from psn (go-back-N).
  void NetGoBack(soft::Qp* q, uint32_t psn);
  // Puts q where its next event is (active, timer list, or nowhere).
  void NetSchedule(soft::Qp* q, bool may_send);
  // A response (ACK, NAK, READ data, atomic ACK) to q's requests.
  void NetRcResponse(soft::Qp* q, const soft::net::Header& h,
                     const uint8_t* payload, uint64_t now);

  // net/net_rc_responder.cc: RC requests from other hosts.
  void NetReceiveRc(soft::Qp* d, const soft::net::Header& h,
                    const uint8_t* payload, uint64_t now);
  // An ACK, NAK (syndrome) or atomic ACK (orig) from d to its peer.
  void NetSendAck(soft::Qp* d, uint8_t syndrome, uint32_t psn, uint64_t orig,
                  bool atomic, uint64_t now);
  // A NAK with an error code; the responder QP goes to ERR.
  void NetNakError(soft::Qp* d, uint8_t code, uint32_t psn, uint64_t now);
  // Checks a READ request and sends its responses; false when it was
  // refused (NAKed, the QP in ERR).
  bool NetServeRead(soft::Qp* d, const soft::net::Header& h, uint64_t now);
  // Encodes h with payload_len bytes already at tx_packet_ + header and
  // sends it when the wire lets it leave (net_wire.h).
  void NetTransmit(soft::net::Header& h, uint32_t payload_len, const Gid& dgid,
                   uint64_t ready_ns);

  // net/net_responder.cc: packets from the fabric.
  // Executes what the fabric has for this RNIC (a bounded batch); true
  // when it received something.
  bool PollFabric(uint64_t now);
  void NetReceive(std::span<const uint8_t> packet, uint64_t now);
  void NetReceiveUc(soft::Qp* d, const soft::net::Header& h,
                    const uint8_t* payload, uint64_t now);
  void NetReceiveUd(soft::Qp* d, const soft::net::Header& h,
                    const uint8_t* payload, uint64_t now);
  // A UC SEND's or WRITE_WITH_IMM's receive WQE, into d->net; false: none.
  bool NetTakeWqe(soft::Qp* d);
  // Drops the UC message in progress (its WQE stays for the next one).
  void NetAbort(soft::Qp* d);
  void NetDropped(NetDrop why) {
    ++net_stats_.dropped[static_cast<size_t>(why)];
  }

  uint64_t Now() const { return clock_(); }

  RnicLimits limits_;
  SoftRnicClock clock_;
  // The port's transmit side (limits_.link_rate_bps; 0: unlimited).
  soft::Wire wire_;
  // With a fabric: where packets go, the packet being built, the batch
  // being received, and their counts.
  fabric::Fabric* fabric_ = nullptr;
  std::array<uint8_t, fabric::kMaxPacketBytes> tx_packet_{};
  std::array<fabric::Datagram, 32> rx_batch_{};
  SoftNetStats net_stats_;

  static constexpr int kMaxGids = 1024;
  std::array<Gid, kMaxGids> gids_{};
  int num_gids_ = 0;

  soft::ObjectTable<soft::Pd> pds_;
  soft::ObjectTable<soft::Mr> mrs_;
  soft::ObjectTable<soft::Mw> mws_;  // indices above kMwIndexBase
  soft::ObjectTable<soft::FrMr> frs_;  // indices above kFrIndexBase
  soft::ObjectTable<soft::Cq> cqs_;
  soft::ObjectTable<soft::Srq> srqs_;
  soft::ObjectTable<soft::Qp> qps_;
  // Queue memory between the control thread and the data-path thread
  // (queue_memory.h): up to two CQs are grown by one CreateQp.
  soft::PreparedSlot prepared_qp_, prepared_srq_;
  std::array<soft::PreparedSlot, 2> prepared_cq_;
  uint32_t next_cq_slot_ = 0;  // control thread
  soft::Graveyard graveyard_;
  // A prepared CQ ring of exactly depth, or an empty ring.
  soft::FixedRing<Completion> TakeCqRing(uint32_t depth);
  void Bury(soft::FixedRing<Completion> ring);
  soft::ObjectTable<soft::Ah> ahs_;

  // QPs with queued send work, flushes or timers pending.
  // QPs with work Progress() can do now (queued WQEs, flushes) ...
  soft::QpList active_;
  // ... and QPs whose head WQE waits for an RNR or ACK timer, with the
  // earliest deadline among them, so an idle wait costs Progress nothing.
  soft::QpList timers_;
  // May be earlier than the true minimum (never later): a stale value only
  // costs one rescan of timers_.
  static constexpr uint64_t kNever = ~uint64_t{0};
  uint64_t next_deadline_ns_ = kNever;
  // CQs that overflowed, oldest first, not yet taken by PollAsyncEvent.
  // Each CQ enters once (its overflow is sticky), so max_cq entries hold
  // every live CQ; stale ids (destroyed since) are skipped when taken.
  soft::FixedRing<uint32_t> async_cq_errors_;
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_SOFT_RNIC_SOFT_RNIC_H_
