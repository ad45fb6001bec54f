// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// ReliableRnic: software reliability between daemons as an RNIC over a
// lower RNIC (docs/reliability.md §2). The engine and the scheduler stage
// see an Rnic like any other.
//
// As built (steps 10-14, 16, 17 of §10): native mode, uc mode, rc mode and the
// live switch between them.
// Every call goes to the lower RNIC, whose ids and QPNs the layer hands up
// unchanged (a virtual QP is its lower RC QP; PDs, MRs, AHs, SRQs and CQs
// are the lower's); in native mode wr_ids and completions pass untouched.
// Beside that the layer keeps the object tables of §2.1, fixed in size at
// construction:
//   - MRs (mr_table.h): lower keys, PD, address, iova, length, access, and
//     an index by rkey;
//   - virtual QPs: the lower QP, type, PD, CQs, SRQ, caps, the attributes
//     set so far, and (uc mode) its Connection; an index by QPN;
//   - virtual CQs: the lower CQ and its ring of synthesized completions
//     (completion_ring.h), which PollCq returns before the lower CQ's.
// uc mode (step 11, reliable_rnic_uc.cc) starts with AttachPeerLink: the
// layer's PD, transport CQ and ACK channel (ack_channel.h) are made, and
// from then on an RC QP (no SRQ) whose VM (its sgid) is in uc mode
// (SetMode) and whose dgid belongs to a peer daemon (PeerLink::PeerOf) is
// framed at its RTR: a Connection (connection.h) with its data QP sends
// CONNECT; the peer's CONNECT or CONNECT_OK connects it, CONNECT_NATIVE
// puts its WRs back on the lower RC QP. A framed QP's WRITEs go to its
// Sender, their completions to the virtual send CQ's ring. Without
// AttachPeerLink nothing changes: the data calls stay one call down.
// rc mode (step 16, reliable_rnic_rc.cc, rc_backup.h): an RC QP whose VM
// is in rc mode gets an RcPath at RTR (a backup RC QP, copies of its WRs);
// its posts go through the path and PollCq hands the path every
// completion of its lower QPs, which it reports in post order through the
// rings; RECOVER / RECOVERED move it to the backup on a RETRY_EXC_ERR.
// The live switch (step 17, reliable_rnic_switch.cc, mode_switch.h):
// SetMode on a VM whose RC QPs are connected switches each of them
// between native, uc and rc once the peer's VM asks the same mode
// (SWITCH, the guest's posts held, the old path drained, DRAINED, the
// receives taken back, the lower RC QP reset, the new path, READY, the
// held WRs first); QpModes counts a VM's QPs by mode. To take native
// receives back, PostRecv records those it passes to the lower RC QP of a
// QP with a peer (RecvQueue's shadows).
//
// Limits: the lower's, less what the layer keeps for itself (reliability.md
// §3.5, §5, §8: a PD, the ACK and transport CQs, the ACK QP and its MR
// daemon-wide; per virtual QP two more lower QPs, its uc data QP and its
// backup, and its layer region's MR), and at most its tables' sizes.
// Reserved from the start, so the limits the engine sees never change when
// a VM's mode does.
//
// Threads (rnic.h): control calls one at a time, data calls on the data-
// path thread; control_beside_data_path() is the lower's, and the tables
// (id_table.h) let the data path read them while a control call on the
// control thread writes them. PostSend, PostRecv, PostSrqRecv, PollCq and
// Progress allocate nothing and take no lock. The synthesized-completion
// ring a CreateCq installs is made by PrepareCq on the control thread (a
// CreateCq not prepared for makes its own), and the rings DestroyCq drops
// are freed by Reclaim there, as SoftRnic does with its queues. With a
// peer link, OnPeerMessage and Progress also make the lower control calls
// CONNECT and HELLO need (the data QP's RTR and RTS, a peer's AH) inline:
// hence uc mode only over a lower whose control calls share the data-path
// thread (AttachPeerLink), until the control worker of step 16.
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_RNIC_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_RNIC_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "backend/base/status.h"
#include "backend/reliable_rnic/ack_channel.h"
#include "backend/reliable_rnic/completion_ring.h"
#include "backend/reliable_rnic/connection.h"
#include "backend/reliable_rnic/counters.h"
#include "backend/reliable_rnic/id_table.h"
#include "backend/reliable_rnic/mode_switch.h"
#include "backend/reliable_rnic/mr_table.h"
#include "backend/reliable_rnic/peer_link.h"
#include "backend/reliable_rnic/rc_backup.h"
#include "backend/rnic/rnic.h"

namespace vrdma {

inline constexpr uint32_t kDefaultMaxPeers = 64;

struct ReliableRnicOptions {
  // The most virtual QPs, CQs and MRs the layer records (its tables'
  // sizes); limits() reports no more than these.
  uint32_t max_qp = 16384;
  uint32_t max_cq = 16384;
  uint32_t max_mr = 65536;
  // Completions each virtual CQ's ring holds (rounded up to a power of
  // two), charged through CqHostBytes.
  uint32_t synthesized_per_cq = 256;

  // uc mode (AttachPeerLink). This daemon's id on the peer channel (not
  // 0), the most framed QPs, the clock (ns; default: steady clock), the
  // tables of each connection, the ACK channel, the transport CQ's depth
  // per framed QP, CONNECT's repeat interval and HELLO's.
  uint64_t daemon_id = 1;
  uint32_t max_framed_qps = 256;
  // Peer daemons whose ACK QP the layer knows (one AH each). A peer that
  // restarts (a new id, the same ACK GID) takes its old entry again.
  uint32_t max_peers = kDefaultMaxPeers;
  std::function<uint64_t()> clock;
  reliable::ConnectionParams connection{};
  reliable::AckChannelOptions ack{};
  uint64_t connect_interval_ns = 1'000'000;  // §3.5: every 1 ms
  // CONNECTs sent after the first before the layer stops asking (the
  // peer's own CONNECT at its RTR still connects the QP).
  uint32_t connect_repeats = 100;
  uint64_t hello_interval_ns = 1'000'000'000;
  // Every framed connection is pumped this often, the idle and sleeping
  // ones too: a check that every entry point woke its connection
  // (missed_wakes) and that no sleeper had work before its time
  // (missed_deadlines).
  uint64_t idle_sweep_ns = 10'000'000;
  uint64_t token_seed = 0;  // 0: from the clock
  // rc mode (§5): how long after a takeover the failed pair is reset and
  // becomes the next backup (a physical RNIC's reset takes milliseconds;
  // a failure meanwhile goes to the guest).
  uint64_t rc_reset_delay_ns = 1'000'000;
};

// A VM's reliability mode (§2.2).
enum class ReliabilityMode : uint8_t { kNative = 0, kRc = 1, kUc = 2 };

namespace reliable {

// What the layer keeps of the lower RNIC (limits(), above).
inline constexpr uint32_t kLayerPds = 1;  // the ACK QP's PD (§3.5)
inline constexpr uint32_t kLayerCqs = 2;  // the ACK CQ, the transport CQ (§2.1)
inline constexpr uint32_t kLayerQps = 1;  // the ACK QP (§3.5)
inline constexpr uint32_t kLayerMrs = 1;  // the ACK QP's buffers
// Per virtual QP: itself, a uc data QP, a backup (§5, §8).
inline constexpr uint32_t kLowerQpsPerVirtualQp = 3;
// Per virtual QP: its layer region (§2.3).
inline constexpr uint32_t kLowerMrsPerVirtualQp = 1;

// The limits a layer over an RNIC of limits lower reports.
RnicLimits LayerLimits(const RnicLimits& lower,
                       const ReliableRnicOptions& options);

struct VirtualQp {
  RnicQp lower{};  // id and QPN as the engine knows them
  QpType type = QpType::kRc;
  RnicPd pd{};
  RnicCq send_cq{}, recv_cq{};
  bool has_srq = false;
  RnicSrq srq{};
  QpCaps caps{};
  bool sq_sig_all = false;
  // The attributes ModifyQp set so far (what a framed QP needs).
  QpAttr attr{};
  // Once a peer link is attached, an RC QP without SRQ: the guest's
  // receives, kept by the layer until the QP's mode is known (step 12).
  std::unique_ptr<RecvQueue> rq;
  // uc mode: the QP's connection once framed (slot in the layer's table),
  // else nullptr. Written by control calls and read by the data path,
  // which share one thread wherever uc mode runs (AttachPeerLink).
  Connection* conn = nullptr;
  // rc mode (§5): the QP's RcPath once framed, else nullptr (the same
  // threads as conn).
  RcPath* rc = nullptr;
  // The live switch (§6, step 17): made by SetMode for a connected QP,
  // kept until the QP is destroyed; nullptr before.
  std::unique_ptr<ModeSwitch> sw;
  PeerAsk peer_ask;
  // A SetMode found the QP switching, connecting or in RTR: the VM's mode is
  // asked again once it is none of these (ReliableRnic::Reconcile, §6).
  bool mode_deferred = false;
  // The data path found an ask due (Reconcile, a peer's ask of the VM's
  // mode): RunDueAsks makes it, since an ask makes its new path.
  bool ask_due = false;
};

struct VirtualCq {
  RnicCq lower{};
  uint32_t depth = 0;
  std::unique_ptr<CompletionRing> synthesized;
};

// Live records in the layer's tables (tests: they follow the lower's).
struct ReliableCounts {
  uint32_t qps = 0, cqs = 0, mrs = 0;
  bool operator==(const ReliableCounts&) const = default;
};

}  // namespace reliable

// Not final: a test notes what the engine asks of it
// (reliable_rnic_engine_test).
class ReliableRnic : public Rnic {
 public:
  // lower must outlive the layer.
  explicit ReliableRnic(Rnic& lower, ReliableRnicOptions options = {});
  ~ReliableRnic() override;
  ReliableRnic(const ReliableRnic&) = delete;
  ReliableRnic& operator=(const ReliableRnic&) = delete;

  // reliable_rnic.cc: control path.
  RnicLimits limits() const override { return limits_; }
  Status AddGid(const Gid& gid) override { return lower_.AddGid(gid); }
  Status RemoveGid(const Gid& gid) override { return lower_.RemoveGid(gid); }
  bool HasGid(const Gid& gid) const override { return lower_.HasGid(gid); }

  Result<RnicPd> AllocPd() override { return lower_.AllocPd(); }
  Status DeallocPd(RnicPd pd) override { return lower_.DeallocPd(pd); }
  Result<RnicMr> RegMr(RnicPd pd, uint8_t* addr, uint64_t length, uint64_t iova,
                       uint32_t access) override;
  Status DeregMr(RnicMr mr) override;
  Result<RnicMw> AllocMw(RnicPd pd, uint8_t type) override {
    return lower_.AllocMw(pd, type);
  }
  Status DeallocMw(RnicMw mw) override { return lower_.DeallocMw(mw); }
  // The lower's fast-registration MRs (limits() passes max_fr_mr and
  // max_fr_pages on unchanged); DeregMr frees them there. Not recorded in
  // the MR table: their pages change with every kRegMr.
  Result<RnicMr> AllocFrMr(RnicPd pd, uint32_t max_pages) override {
    return lower_.AllocFrMr(pd, max_pages);
  }
  Result<RnicCq> CreateCq(uint32_t depth) override;
  Status ResizeCq(RnicCq cq, uint32_t depth) override;
  Status DestroyCq(RnicCq cq) override;
  Result<RnicSrq> CreateSrq(RnicPd pd, uint32_t max_wr,
                            uint32_t max_sge) override {
    return lower_.CreateSrq(pd, max_wr, max_sge);
  }
  Status DestroySrq(RnicSrq srq) override { return lower_.DestroySrq(srq); }
  Result<RnicQp> CreateQp(const QpInit& init) override;
  Status ModifyQp(RnicQp qp, const QpAttr& attr, uint32_t mask) override;
  // The lower's answer; for an rc-mode QP whose path has not failed, the
  // guest's state and retry count (its own lower QP may be the failed pair
  // being reset, and retries twice).
  Result<QpAttr> QueryQp(RnicQp qp) const override;
  Status DestroyQp(RnicQp qp) override;
  Result<RnicAh> CreateAh(RnicPd pd, const AddressVector& av) override {
    return lower_.CreateAh(pd, av);
  }
  Status DestroyAh(RnicAh ah) override { return lower_.DestroyAh(ah); }

  // The lower's costs; a CQ also costs its synthesized-completion ring.
  // Once a peer link is attached (uc mode), an RC QP also costs what it
  // would framed (§8: the worst case whatever the mode; FramedQpHostBytes).
  uint64_t QpHostBytes(const QpCaps& caps) const override;
  uint64_t CqHostBytes(uint32_t depth) const override;
  uint64_t SrqHostBytes(uint32_t max_wr, uint32_t max_sge) const override {
    return lower_.SrqHostBytes(max_wr, max_sge);
  }
  bool control_beside_data_path() const override {
    return lower_.control_beside_data_path();
  }
  void PrepareQp(const QpCaps& caps) override { lower_.PrepareQp(caps); }
  void PrepareCq(uint32_t depth) override;
  void PrepareSrq(uint32_t max_wr, uint32_t max_sge) override {
    lower_.PrepareSrq(max_wr, max_sge);
  }
  void Reclaim() override;

  // reliable_rnic_datapath.cc: data path.
  int PostSend(RnicQp qp, std::span<const SendWr> wrs,
               Status* first_error) override;
  int PostRecv(RnicQp qp, std::span<const RecvWr> wrs,
               Status* first_error) override;
  int PostSrqRecv(RnicSrq srq, std::span<const RecvWr> wrs,
                  Status* first_error) override;
  // The CQ's synthesized completions first, then the lower CQ's.
  int PollCq(RnicCq cq, std::span<Completion> out) override;
  // A unit (§2.3) on a QP carried in uc mode; the lower's elsewhere.
  uint32_t PieceGranule(RnicQp qp) const override;
  // The lower CQ's count (kWait is the lower's, which sees only its own).
  uint64_t CqProduced(RnicCq cq) const override {
    return lower_.CqProduced(cq);
  }
  bool PollAsyncEvent(AsyncEvent* ev) override;
  // True while something is due at once (a connection due now, an rc
  // path or a switch with anything pending, the lower's work); the
  // connections asleep until their timers are NextTimedWorkNs's.
  bool Progress() override;
  // The earliest of the sleeping connections' due times, the next HELLO
  // and sweep, and the lower's (docs/reliability.md §2.1 "Turns").
  uint64_t NextTimedWorkNs() const override;
  int completion_fd() const override { return lower_.completion_fd(); }
  void ArmCompletions() override { lower_.ArmCompletions(); }
  void DrainCompletionFd() override { lower_.DrainCompletionFd(); }

  // Not part of Rnic: for the layer's parts (steps 11-17) and tests.
  // Appends c to cq's synthesized completions (data-path thread); false
  // when cq is not a CQ of the layer or its ring is full (nothing changed).
  [[nodiscard]] bool PushSynthesized(RnicCq cq, const Completion& c);
  const reliable::VirtualQp* FindQp(uint32_t qp_id) const {
    return qps_.Find(qp_id);
  }
  const reliable::VirtualCq* FindCq(uint32_t cq_id) const {
    return cqs_.Find(cq_id);
  }
  const reliable::MrRecord* FindMr(uint32_t mr_id) const {
    return mrs_.Find(mr_id);
  }
  reliable::ReliableCounts ObjectCounts() const {
    return {qps_.live(), cqs_.live(), mrs_.live()};
  }
  Rnic& lower() { return lower_; }

  // reliable_rnic_uc.cc: uc mode. Control call, once: makes the layer's
  // PD, transport CQ and ACK channel (its QP sends from daemon_gid, which
  // the lower gets as a GID) and sends HELLO. kUnsupported over a lower
  // whose control calls run beside the data path (the control worker of
  // step 16 is not built). link must outlive the layer.
  Status AttachPeerLink(reliable::PeerLink* link, const Gid& daemon_gid);
  // The mode of the VM owning gids (control call; §2.2). QPs that reach
  // RTR later are framed by it; each connected RC QP of the VM (RTS, its
  // peer a daemon's layer) starts the live switch of §6 towards it
  // (reliable_rnic_switch.cc), which completes once the peer's VM asks
  // the same mode.
  void SetMode(std::span<const Gid> gids, ReliabilityMode mode);
  ReliabilityMode ModeOf(const Gid& gid) const;
  // Control call, on the daemon's tick (10 ms): the switch asks the data
  // path found due (a SetMode deferred while a QP was switching,
  // connecting or in RTR; a peer's ask of what the VM's mode already is),
  // each towards its VM's mode now (§6 "Who switches"). An ask makes the
  // new path (a connection, an rc path), which the data path must not.
  void RunDueAsks();
  // The VM's connected virtual RC QPs (RTR or RTS) by mode, the ones
  // switching (asked or running §6) apart: the VM SetMode named by
  // first_gid (control call).
  reliable::QpModeCounts QpModes(const Gid& first_gid) const;
  // A message from a peer daemon (PeerLink's receiving side), on the
  // data-path thread. Untrusted: decoded and checked, counted when bad.
  void OnPeerMessage(std::span<const uint8_t> bytes);
  // Daemon-wide counters: the layer's own plus every VM's (a detached
  // VM's too, so they never go down). Sums; read_records_peak and
  // rc_takeover_ns_last are the largest of them.
  reliable::ReliabilityCounters counters() const;
  // The layer's own: what no VM owns (the ACK channel, the peer codec,
  // HELLO, messages that match no connection).
  const reliable::ReliabilityCounters& own_counters() const {
    return counters_;
  }
  // A detached VM (control call, after its QPs were destroyed): its
  // counters are added to the layer's totals of detached VMs and its
  // record and GIDs' modes are dropped, so the layer keeps nothing per VM
  // that left. A record a framed QP still counts into is kept (and freed
  // by no later call: such a QP outliving its VM is not expected).
  void ForgetVm(std::span<const Gid> gids);
  // A VM's (step 18): the VM SetMode named by gids, known by its first GID;
  // what its connections and rc paths count. nullptr for a VM never named.
  const reliable::ReliabilityCounters* VmCounters(const Gid& first_gid) const;
  const reliable::AckChannel* ack_channel() const { return acks_.get(); }
  // The connection of a virtual QP (by QPN), or nullptr (tests).
  reliable::Connection* FindConnection(uint32_t qpn);
  // The rc-mode path owning a lower QP (the virtual QP or its backup, by
  // QPN), or nullptr.
  reliable::RcPath* FindRcPath(uint32_t qpn);

 private:
  // A ring for the next CreateCq: the prepared one, else a new one.
  std::unique_ptr<reliable::CompletionRing> TakeRing();
  // Hands a dropped ring to Reclaim (any thread; lock-free).
  void Bury(std::unique_ptr<reliable::CompletionRing> ring);
  void FreeDeadRings();

  Rnic& lower_;
  const ReliableRnicOptions options_;
  const RnicLimits limits_;
  reliable::MrTable mrs_;
  reliable::IdTable<reliable::VirtualQp> qps_;
  reliable::IdTable<reliable::VirtualCq> cqs_;
  // Ring memory between the control thread and the data-path thread.
  std::atomic<reliable::CompletionRing*> prepared_ring_{nullptr};
  std::atomic<reliable::CompletionRing*> dead_rings_{nullptr};

  // uc mode (reliable_rnic_uc.cc).
  struct Peer {
    bool used = false;
    uint64_t id = 0;
    uint32_t ack_qpn = 0, ack_qkey = 0;
    Gid ack_gid{};
    RnicAh ah{};
  };
  struct ModeEntry {
    Gid gid{};
    ReliabilityMode mode = ReliabilityMode::kNative;
    reliable::ReliabilityCounters* counters = nullptr;  // its VM's
  };
  // A VM's counters, made by its first SetMode (a control call) and kept.
  struct VmRecord {
    Gid first_gid{};
    std::unique_ptr<reliable::ReliabilityCounters> counters;
  };
  // The counters of the VM owning sgid, else the layer's own.
  reliable::ReliabilityCounters& CountersOf(const Gid& sgid);
  bool AimsAtLayerQp(const QpAttr& attr) const;
  bool IsLayerEvent(const AsyncEvent& ev) const;
  void MaybeFrame(reliable::VirtualQp& v);
  void Unframe(reliable::VirtualQp& v);
  void SendConnect(reliable::Connection& k, bool ok);
  void StartConnect(reliable::Connection& k);
  // One connection's turn: its CONNECT repeat timer and its Pump (of
  // both halves with `sweep`: the sweep's turns, Connection::Pump); when
  // it is next due (ActiveSet: 0 at once, UINT64_MAX nothing pending).
  uint64_t PumpConnection(reliable::Connection& k, uint64_t now,
                          reliable::Connection::SweepTally* sweep = nullptr);
  // A sleeping connection pumped before it was due, both halves (the
  // sweep): whether that did anything (its VM's counters moved), and when
  // it is due now.
  bool PumpEarly(reliable::Connection& k, uint64_t now, uint64_t* due);
  // One rc path's turn: its CONNECT repeat timer, its Pump and the RECOVER
  // messages it wants sent; true while it has anything pending.
  bool PumpRcPath(reliable::RcPath& p, uint64_t now);
  void SendHello();
  // Encodes a peer message of this daemon (its origin, the next seq) into
  // buf; its length, 0 when it cannot be encoded.
  size_t EncodePeer(peer::MsgType type, peer::Body body,
                    std::span<uint8_t, peer::kMaxMessageBytes> buf);
  // The same, sent to daemon `to`; false when not encoded or not taken.
  bool SendPeer(uint64_t to, peer::MsgType type, peer::Body body);
  void OnHello(uint64_t origin, const void* hello);
  void OnConnect(uint64_t origin, const void* connect, bool request);
  void OnConnectNative(uint64_t origin, const void* native);
  void OnAckArrival(const reliable::AckArrival& a, uint64_t now_ns);
  void SetAckAddress(reliable::Connection& k);
  Peer* FindPeer(uint64_t id);
  reliable::VirtualQp* FindQpByQpn(uint32_t qpn);
  bool ProgressUc();
  // Of c (the lower's completions), the guest's, compacted to c's front
  // (their number); the others went to their owner: a switch's markers
  // and flushes, an rc path, a uc Sender's atomics (*taken then true).
  int KeepGuestCompletions(std::span<Completion> c, bool* taken);
  void DetachUc();
  // rc mode (reliable_rnic_rc.cc).
  void MaybeFrameRc(reliable::VirtualQp& v);
  // An RcPath for v in a free slot (its backup in INIT, indexed), counted
  // in rc_framed_, not yet v.rc; nullptr when there is no room.
  reliable::RcPath* NewRcPath(reliable::VirtualQp& v, uint64_t peer);
  // Takes path p out of the table and index (its QPs stay until freed).
  std::unique_ptr<reliable::RcPath> TakeRcPath(reliable::RcPath* p);
  void UnframeRc(reliable::VirtualQp& v);
  void SendRcConnect(reliable::RcPath& p, bool ok);
  void StartRcConnect(reliable::RcPath& p);
  // The peer's CONNECT or CONNECT_OK for an rc-mode QP.
  void OnRcConnect(uint64_t origin, reliable::VirtualQp& v, const void* connect,
                   bool request);
  void OnRecover(uint64_t origin, const void* recover);
  void OnRecovered(uint64_t origin, const void* recovered);
  void SendRecoverMessage(reliable::RcPath& p, bool recovered);
  bool ProgressRc(uint64_t now);
  // The live switch (reliable_rnic_switch.cc).
  reliable::QpMode CurrentMode(const reliable::VirtualQp& v) const;
  void StartSwitch(reliable::VirtualQp& v, ReliabilityMode mode);
  // v's deferred SetMode, if any, now that v is no longer switching,
  // connecting or in RTR: a switch to its VM's mode (§6), asked now in a
  // control call, else by the next RunDueAsks.
  void Reconcile(reliable::VirtualQp& v, bool control_call = false);
  // Data path: v's ask is made by the next RunDueAsks.
  void DueAsk(reliable::VirtualQp& v);
  void SendSwitch(reliable::VirtualQp& v);
  void OnSwitch(uint64_t origin, const void* sw);
  void OnDrained(uint64_t origin, const void* drained);
  void OnReady(uint64_t origin, const void* ready);
  // The switch of v when both ends asked the same mode: begins the drain.
  void BeginSwitch(reliable::VirtualQp& v);
  // One step of v's switch; true while it waits for anything.
  bool StepSwitch(reliable::VirtualQp& v, uint64_t now);
  void TakeBackNative(reliable::VirtualQp& v);
  // While v's switch waits for a completion of its own (a marker, the
  // flushes), polls v's lower CQs: the engine polls a CQ only while it is
  // owed a guest completion there. The guest's go to the CQ's ring.
  void PollForSwitch(reliable::VirtualQp& v);
  void TakeBackRc(reliable::VirtualQp& v);
  // The QP's switch record and what it keeps, gone (control call: RESET,
  // DestroyQp).
  void DropSwitch(reliable::VirtualQp& v);
  // An earlier ask's new paths: freed (control call), or kept in the
  // record until one (data path).
  void DropNextPaths(reliable::ModeSwitch& s);
  void RetireNextPaths(reliable::ModeSwitch& s);
  // Takes a connection or rc path out of the layer's tables into s, where
  // a later control call frees it (data path: no free here); nulls it.
  void Retire(reliable::ModeSwitch& s, reliable::Connection*& k);
  void Retire(reliable::ModeSwitch& s, reliable::RcPath*& p);
  Status ReconnectLowerRc(reliable::VirtualQp& v);
  void BuildNewPath(reliable::VirtualQp& v);
  void FinishSwitch(reliable::VirtualQp& v);
  // The layer's part of v entering ERR (the guest's, or a held WR the new
  // path refused): its framed path's WRs and the receives it holds flush.
  void FlushFramed(reliable::VirtualQp& v);
  void FailSwitch(reliable::VirtualQp& v, WcStatus first);
  // v in ERR, on the lower RNIC too: an error of the layer's own.
  void ErrQp(reliable::VirtualQp& v);
  void EndSwitch(reliable::VirtualQp& v);
  // A lower completion of a switching QP the switch takes (its markers,
  // the flushes it caused); false: the guest's.
  bool SwitchTakes(reliable::VirtualQp& v, const Completion& c);
  bool ProgressSwitches(uint64_t now);
  // A Connection for v in a free slot of conns_ (the transport CQ grown
  // for it), opened, counted in framed_; nullptr when there is no room.
  reliable::Connection* NewConnection(reliable::VirtualQp& v, uint64_t peer);
  void FreeRetired();

  reliable::IdTable<uint32_t> qpn_index_;  // virtual QPN -> QP id
  std::function<uint64_t()> clock_;
  reliable::PeerLink* link_ = nullptr;
  Gid daemon_gid_{};
  RnicPd layer_pd_{};
  RnicCq transport_cq_{};
  uint32_t transport_depth_ = 0;
  std::unique_ptr<reliable::AckChannel> acks_;
  // ProgressUc's buffer for the transport CQ (3 KB: cleared once, not at
  // every turn).
  std::array<Completion, 64> transport_batch_{};
  std::vector<std::unique_ptr<reliable::Connection>> conns_;
  uint32_t framed_ = 0;
  // rc mode: the paths (max_framed_qps slots), backup QPN -> QP id.
  std::vector<std::unique_ptr<reliable::RcPath>> rc_paths_;
  uint32_t rc_framed_ = 0;
  reliable::IdTable<uint32_t> rc_index_;
  uint16_t generation_ = 0;  // of connection slots (connection.h)
  // The live switch: ids of the QPs whose switch runs (0: free slot;
  // max_framed_qps slots, sized by AttachPeerLink), how many.
  std::vector<uint32_t> switching_qps_;
  uint32_t switching_ = 0;
  uint32_t retired_ = 0;  // old connections kept by switch records
  uint32_t asks_due_ = 0;  // QPs with ask_due (at most; RunDueAsks resets)
  std::vector<Peer> peers_;  // options_.max_peers, sized by AttachPeerLink
  std::vector<ModeEntry> modes_;
  std::vector<VmRecord> vms_;
  reliable::ReliabilityCounters detached_;  // the sum of forgotten VMs
  uint64_t peer_seq_ = 0;
  uint64_t next_hello_ns_ = 0;
  // The connections with work, by slot (§2.1 "Turns"), and the next sweep
  // of every one.
  reliable::ActiveSet active_;
  uint64_t next_sweep_ns_ = 0;
  // The same for rc paths (by their slot in rc_paths_).
  reliable::ActiveSet rc_active_;
  uint64_t next_rc_sweep_ns_ = 0;
  std::mt19937_64 token_rng_;
  reliable::ReliabilityCounters counters_;
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_RELIABLE_RNIC_H_
