// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The RNIC timing MODEL: a deterministic discrete-event simulation of hosts
// with commodity RNICs joined by one shared-buffer switch. It moves no
// bytes; it decides WHEN each packet, ACK and completion happens.
//
// Send side (one NIC): a post rings a doorbell; after doorbell + WQE fetch
// latency the QP's new WQEs are visible. Ready QPs wait in ONE round-robin
// queue for a free processing unit (PU), through a shared dispatcher that
// admits one WQE per dispatch_gap (the aggregate message-rate ceiling). A PU
// holds its QP for one whole WQE (size-blind, PeRF §2.2), costing wqe_cost
// for the first packet (the per-QP message-rate ceiling: a QP is on at most
// one PU) and seg_cost for each further MTU packet. Packets enter a small TX
// FIFO in front of the link; when it is full, waiting PUs get slots in
// arrival order, which interleaves QPs packet by packet. The link
// serializes at line rate. ACK/NAKs bypass the FIFO.
//
// Fabric: switch egress ports with a shared buffer, ECN marking above a
// threshold (marks are counted; there is no congestion control), drops on
// overflow, random loss. Receive side: RX PUs (one server of cost
// rx_cost/num_rx_pus), RC responder (coalesced ACKs, NAK on a PSN gap,
// RNR NAK when a SEND finds no receive, READ responses scheduled on the
// responder's own PUs and FIFO, i.e. they compete with its outbound WRITEs),
// UC responder (drops a message with a missing packet).
// Requester: RC go-back-N from the NAKed PSN, retransmission timeout on tail
// loss; UC completes when the last packet leaves the link.
// Cross-channel: WAIT (blocks the QP until n more CQEs arrive on a CQ; n = 0
// completes at once and yields the PU) and ENABLE (makes a managed QP's
// posted WQEs visible). Completions honour selective signaling and carry
// the virtual time as hardware timestamp.
// Protocol operations (ops.cc): RNR timer and retry counts per QP, the QP
// error state (the failing WQE completes in error, the rest flushes), UD,
// atomics on the card's atomic units, receive-WQE fetch, RNR NAK cost on
// the RX pipeline, responder ACK coalescing.
#ifndef VRDMA_BACKEND_RNIC_MODEL_SIMULATOR_H_
#define VRDMA_BACKEND_RNIC_MODEL_SIMULATOR_H_

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "backend/rnic_model/event_queue.h"
#include "backend/rnic_model/nic_cache.h"
#include "backend/rnic_model/params.h"
#include "backend/rnic_model/pcie.h"
#include "backend/rnic_model/ring.h"

namespace vrdma::model {

using HostId = uint32_t;
using QpId = uint32_t;
using CqId = uint32_t;

enum class Transport : uint8_t { kRc, kUc, kUd };

inline constexpr QpId kNoQp = UINT32_MAX;
// QpConfig::timeout: use the card's retransmission timeout (NicParams::rto_ps).
inline constexpr uint8_t kCardTimeout = 32;

enum class Op : uint8_t {
  kWrite, kWriteImm, kSend, kSendImm, kRead,
  kWait,     // cross-channel: wait_count more CQEs on wait_cq
  kEnable,   // cross-channel: enable_count (0 = all) WQEs of enable_qp
  kCas,      // RC atomic compare-and-swap on raddr (8 bytes)
  kFaa,      // RC atomic fetch-and-add on raddr (8 bytes)
};

struct Wr {
  uint64_t wr_id = 0;
  Op op = Op::kWrite;
  uint32_t bytes = 0;
  bool signaled = true;
  CqId wait_cq = 0;
  uint32_t wait_count = 0;
  QpId enable_qp = 0;
  uint32_t enable_count = 0;
  // Memory (nic_cache.h): the local MR and offset of the payload, and for
  // WRITE/READ the remote MR and offset. kNoMr: an always-hot region (no
  // MPT/MTT lookups), offset still sets the DMA alignment.
  MrId local_mr = kNoMr;
  uint64_t local_offset = 0;
  MrId remote_mr = kNoMr;
  uint64_t remote_offset = 0;
  // Data travels in the WQE (no payload DMA read). WRITE/SEND of at most
  // pcie.inline_threshold_bytes are inline anyway.
  bool inline_data = false;
  uint64_t raddr = 0;        // atomics: the remote address
  // UD: the address handle (destination host and QP).
  HostId ah_host = 0;
  QpId ah_qp = kNoQp;
  // Carried to the receive completion untouched (the model moves no
  // payload): the immediate of kWriteImm/kSendImm (network order, as
  // rnic.h keeps it) and an opaque tag of the user's (ModelRnic: which
  // snapshot of a SEND's first bytes goes with it; 0 = none).
  uint32_t imm = 0;
  uint32_t carry = 0;
};

enum class CqeStatus : uint8_t {
  kSuccess, kRetryExceeded, kFlushed, kRnrRetryExceeded,
};

struct Cqe {
  uint64_t wr_id = 0;
  QpId qp = 0;
  CqId cq = 0;
  Op op = Op::kWrite;
  bool recv = false;
  CqeStatus status = CqeStatus::kSuccess;
  uint32_t bytes = 0;
  Picos post_time = 0;   // when the WR was posted (send side)
  Picos time = 0;        // hardware timestamp: when the CQE became visible
  QpId src_qp = kNoQp;   // UD receive: the sender's QP
  uint32_t imm = 0;      // receive: the sender's Wr::imm
  uint32_t carry = 0;    // receive: the sender's Wr::carry
};

// Receives completions as they become visible, instead of the CQ ring.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void OnCqe(const Cqe& cqe) = 0;
};
// Told when a CQE becomes visible in a CQ's ring (when no CompletionSink
// takes it): the host side knows which CQ to poll.
class CqeListener {
 public:
  virtual ~CqeListener() = default;
  virtual void OnCqeVisible(CqId cq) = 0;
};
// Receives timers scheduled by the user of the model (the bench's host
// side, the scheduler stage's policy wake-ups).
class TimerSink {
 public:
  virtual ~TimerSink() = default;
  virtual void OnTimer(uint64_t cookie) = 0;
};

struct QpConfig {
  Transport transport = Transport::kRc;
  CqId send_cq = 0;
  CqId recv_cq = 0;
  uint32_t sq_depth = 1024;
  bool managed = false;   // WQEs become visible only through ENABLE
  bool sig_all = false;
  // IB min_rnr_timer (encoded 0..31, 1 = 10 us; see RnrTimerPs) this QP
  // asks requesters to wait after its RNR NAKs.
  uint8_t rnr_timer = 1;
  uint8_t rnr_retry = 7;  // RNR NAK retries, 7 = infinite
  uint8_t retry_cnt = 7;  // transport retries (RTO, NAK), 0..7
  // IB local ACK timeout: 4.096 us * 2^timeout, 0 = none; kCardTimeout
  // (the default) = the card's rto_ps.
  uint8_t timeout = kCardTimeout;
};

struct HostStats {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;        // payload
  uint64_t rx_packets = 0;
  uint64_t retransmitted_packets = 0;
  uint64_t naks_sent = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t timeouts = 0;
  uint64_t tx_wire_bytes = 0;     // payload + per-packet overhead, all packets
  uint64_t acks_sent = 0;
  uint64_t recv_drops_no_wqe = 0; // UC/UD SENDs dropped: no receive posted
  uint64_t atomics_executed = 0;
  uint64_t rx_stall_ps = 0;       // RX pipeline time lost to RNR NAKs / atomics
  uint64_t rx_buffer_drops = 0;   // lossy: dropped at a full NIC RX buffer
};
struct FabricStats {
  uint64_t drops_overflow = 0;
  uint64_t drops_random = 0;
  uint64_t pause_events = 0;
  uint64_t ecn_marks = 0;
  uint64_t max_port_bytes = 0;
};

class Simulator {
 public:
  Simulator(const FabricParams& fabric, uint64_t seed);
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  HostId AddHost(const NicParams& nic);
  CqId CreateCq(HostId host);
  QpId CreateQp(HostId host, const QpConfig& config);
  // Both QPs must share a transport (RC or UC); each becomes the other's peer.
  bool Connect(QpId a, QpId b);
  // IB QP attributes of the retry machinery (as QpConfig's fields).
  void SetRetry(QpId qp, uint8_t retry_cnt, uint8_t rnr_retry, uint8_t rnr_timer);
  // The IB local ACK timeout (QpConfig::timeout: 1..31 = 4.096 us *
  // 2^timeout, 0 = none, kCardTimeout = the card's rto_ps).
  void SetTimeout(QpId qp, uint8_t timeout);
  // The delay an IB-encoded min_rnr_timer stands for (IBA table: 0 =
  // 655.36 ms, 1 = 0.01 ms, ..., 31 = 491.52 ms).
  static Picos RnrTimerPs(uint8_t encoded);
  void set_completion_sink(CompletionSink* sink) { sink_ = sink; }
  void set_cqe_listener(CqeListener* listener) { listener_ = listener; }

  // Returns how many were accepted (the SQ holds sq_depth uncompleted WQEs).
  // Refused: an op the transport lacks, a UD message over the MTU or with a
  // bad address handle. On a QP in error every WR completes kFlushed.
  int PostSend(QpId qp, std::span<const Wr> wrs);
  void PostRecv(QpId qp, uint64_t wr_id);
  // Without a sink, CQEs wait here. Oldest first.
  int PollCq(CqId cq, std::span<Cqe> out);
  // The same without a copy: f(i, cqe) for each of at most max CQEs.
  template <typename F>
  int DrainCq(CqId cq, int max, F&& f) {
    Ring<Cqe>& ring = cqs_[cq].ring;
    int n = 0;
    for (; n < max && !ring.empty(); ++n) {
      f(n, ring.front());
      ring.pop_front();
    }
    return n;
  }
  uint64_t cqe_count(CqId cq) const { return cqs_[cq].produced; }
  uint32_t qp_host(QpId qp) const { return qps_[qp].host; }

  // Memory regions (simulator_memory.cc). Registration and deregistration
  // take the host's firmware command interface for mr_command_ps each
  // (command_free() tells until when); the MR is usable at once.
  // Deregistering drops the MR's MPT and MTT entries from the caches.
  // page_bytes: a power of two >= 4096 (2 MiB huge pages: fewer entries).
  MrId RegisterMr(HostId host, uint64_t bytes, uint32_t page_bytes = 4096);
  bool DeregisterMr(MrId mr);
  Picos command_free(HostId h) const { return mem_[h].command_free; }
  const PcieStats& pcie_stats(HostId h) const { return mem_[h].pcie.stats(); }
  const NicCacheStats& cache_stats(HostId h) const { return mem_[h].stats; }

  void ScheduleTimer(Picos at, TimerSink* sink, uint64_t cookie);
  // Runs events up to and including time t; now() becomes t. A handler (a
  // sink, listener or timer) may call Stop(): RunUntil then returns after
  // that event with now() at its time, and returns false.
  bool RunUntil(Picos t);
  void Stop() { stop_ = true; }
  // Runs one event; false when none is left.
  bool Step();
  bool idle() const { return events_.empty(); }
  Picos now() const { return now_; }

  const NicParams& nic(HostId h) const { return hosts_[h].p; }
  const HostStats& host_stats(HostId h) const { return hosts_[h].stats; }
  const FabricParams& fabric() const { return fabric_; }
  const FabricStats& fabric_stats() const { return fstats_; }
  uint64_t events_processed() const { return events_processed_; }
  size_t num_qps() const { return qps_.size(); }
  // Bytes of the model's per-QP state summed over every QP: the QP record,
  // its SQ ring, receive and READ-response rings, its memory-side record
  // (what a QP costs the simulator; caches and packets not included).
  uint64_t qp_state_bytes() const;
  uint32_t sq_outstanding(QpId qp) const;
  // WQEs the SQ can still take.
  uint32_t sq_room(QpId qp) const { return qps_[qp].cfg.sq_depth - sq_outstanding(qp); }
  uint32_t rq_posted(QpId qp) const { return qps_[qp].rq_posted; }
  // A retry count ran out: the QP is in the error state.
  bool qp_in_error(QpId qp) const { return qps_[qp].ops.error; }
  // Goodput of a requester QP: payload bytes of its WRITE/SEND packets the
  // responder accepted in order, plus READ response bytes it accepted.
  uint64_t qp_delivered_bytes(QpId qp) const { return qps_[qp].delivered; }

 private:
  enum EventKind : uint32_t {
    kFetch, kDispatch, kPuPacket, kLinkDone, kSwitchArrive, kPortDone,
    kRxDone, kCqeVisible, kRto, kRnrRetry, kUserTimer, kPuContinue,
    kRxDeliver, kAtomicDone, kAckTimer, kLinkWake, kPuResume,
  };
  enum PktType : uint8_t {
    kData, kReadReq, kReadResp, kAck, kNak, kRnrNak, kAtomicReq, kAtomicResp,
  };

  struct Packet {
    HostId src = 0, dst = 0;
    QpId src_qp = 0, dst_qp = 0;
    PktType type = kData;
    Op op = Op::kWrite;
    bool first = false, last = false, ecn = false;
    uint32_t payload = 0;
    uint32_t psn = 0;          // request PSN, or PSN being (N)ACKed
    uint32_t msg_bytes = 0;    // READ request length
    uint64_t wqe = 0;          // READ request/response: requester WQE index
    uint32_t idx = 0;          // READ response packet index
    bool retransmit = false;
    Picos dma_ready = 0;       // payload on the NIC (may not leave before)
    bool recv_fetch = false;   // waited for a receive WQE fetch
    // AckReq: the last packet of a message after which the requester has
    // nothing more fetched to send on this QP (its burst ends here).
    bool ack_req = false;
    uint8_t rnr_timer = 0;     // RNR NAK: the responder's min_rnr_timer
    uint64_t raddr = 0;        // atomic request
    uint32_t imm = 0;          // data: the WR's imm and carry tag
    uint32_t carry = 0;
  };

  struct Wqe {
    Wr wr;
    Picos post_time = 0;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;
    uint64_t wait_target = 0;
    bool done = false;
    bool sent_once = false;
  };

  struct RespJob { uint64_t wqe = 0; uint32_t bytes = 0; uint32_t npkts = 0; };

  // Flow = one schedulable stream on the send engine: a QP's SQ (flow 2q)
  // or its READ-response queue (flow 2q+1).
  struct FlowState {
    bool queued = false;
    bool on_pu = false;
  };

  // Per-QP state of the protocol operations (ops.cc).
  struct QpOps {
    bool error = false;
    uint8_t rnr_left = 7;      // RNR retries left (unused when rnr_retry = 7)
    uint8_t retry_left = 7;    // transport retries left
    bool rnr_blocked = false;  // responder: RNR NAK sent, waiting for the retry
    // Responder receive path: request packets are handled in order, a
    // receive-consuming one after its receive WQE fetch.
    Picos rx_release = 0;
    uint32_t rx_fetching = 0;
    // Responder ACK coalescing.
    uint32_t unacked = 0;      // accepted packets since the last ACK
    uint32_t ack_psn = 0;      // last accepted PSN
    bool ack_timer_armed = false;
    bool acked_once = false;
    Picos last_ack = 0;        // when this QP last sent an ACK
  };

  struct Qp {
    HostId host = 0;
    QpConfig cfg;
    QpId peer = UINT32_MAX;
    std::vector<Wqe> sq;       // ring, power-of-two capacity
    uint64_t mask = 0;
    uint64_t head = 0;         // oldest uncompleted
    uint64_t proc = 0;         // next to process
    uint64_t fetched = 0;      // visible to the NIC
    uint64_t visible = 0;      // managed: enabled; else == tail
    uint64_t tail = 0;         // posted
    uint32_t proc_pkt = 0;     // packets of sq[proc] already generated
    uint32_t next_psn = 0;
    uint32_t max_psn = 0;      // one past the highest PSN ever assigned
    bool blocked_wait = false;
    uint64_t wait_wqe = 0;     // index of the WAIT blocking the QP
    uint32_t reads_outstanding = 0;
    bool blocked_reads = false;
    bool rewind_pending = false;
    uint32_t rewind_psn = 0;
    bool rnr_wait = false;
    // RTO bookkeeping.
    bool rto_armed = false;
    Picos last_progress = 0;
    // READ responses received for the oldest incomplete READ.
    uint32_t resp_next_idx = 0;
    bool resp_rerequested = false;
    // Responder state.
    uint32_t expected_psn = 0;
    bool nak_sent = false;
    bool uc_broken = false;
    uint32_t rq_posted = 0;
    uint64_t delivered = 0;
    Ring<uint64_t> rq;
    Ring<RespJob> resp;
    uint32_t resp_pkt = 0;     // packets of resp.front() generated
    FlowState flow[2];
    QpOps ops;
  };

  struct Cq {
    HostId host = 0;
    uint64_t produced = 0;
    Ring<Cqe> ring;
    std::vector<QpId> waiters;
  };

  struct Pu {
    uint32_t flow = 0;
    bool busy = false;
    bool holding = false;      // has a packet waiting for FIFO space
    uint32_t pkt = 0;
    uint32_t visit_wqes = 0;   // WQEs served in this visit of the QP
  };

  struct Port {                // switch egress port towards one host
    Ring<uint32_t> q;
    uint64_t bytes = 0;
    bool busy = false;
    bool paused = false;           // above xoff until below xon
    std::vector<HostId> waiters;   // NIC links paused on this port
  };

  struct Host {
    NicParams p;
    std::vector<Pu> pus;
    std::vector<uint32_t> free_pus;
    Ring<uint32_t> ready;      // flows waiting for a PU, round robin
    Picos dispatch_free = 0;
    bool dispatch_pending = false;
    Ring<uint32_t> fifo;       // packets waiting for the link
    Ring<uint32_t> fifo_waiters;  // PUs holding a packet
    Ring<uint32_t> ctrl;       // ACK/NAK, ahead of the FIFO
    bool link_busy = false;
    bool link_paused = false;  // PFC: waiting on a paused egress port
    uint32_t link_pkt = 0;
    Picos rx_free = 0;
    Port port;
    HostStats stats;
    std::vector<Picos> atomic_free;  // per atomic unit: busy until
    std::vector<Picos> wire;   // p.wire_time_ps(payload), payload <= MTU
    Picos wire_ps(uint32_t payload) const {
      return payload < wire.size() ? wire[payload] : p.wire_time_ps(payload);
    }
  };

  // Events.
  void Dispatch(const Event& e);
  void OnFetch(QpId qp, uint64_t upto);
  void OnDispatch(HostId h);
  void OnPuPacket(HostId h, uint32_t pu);
  void OnLinkDone(HostId h);
  void OnSwitchArrive(uint32_t pkt);
  void OnPortDone(HostId h);
  void OnRxDone(uint32_t pkt);
  void OnCqeVisible(uint64_t token);
  void OnRto(QpId qp);
  void OnRxDeliver(uint32_t pkt);
  void OnAtomicDone(QpId qp, uint64_t wqe);
  void OnAckTimer(QpId qp);
  void OnRnrRetry(QpId qp, uint32_t psn);

  // Protocol operations (ops.cc).
  // A retry of the given kind: false (and the QP is failed) when the count
  // is exhausted.
  bool TakeRetry(QpId qp, bool rnr);
  // The QP's retransmission timeout; 0 = none.
  Picos RtoPs(const Qp& q) const;
  void ResetRetries(Qp& q);
  // The QP enters the error state: the oldest WQE completes with status,
  // every other posted WQE and receive with kFlushed.
  void FailQp(QpId qp, CqeStatus status);
  void FlushWr(QpId qp, const Wr& wr, Picos post_time, CqeStatus status);
  // Responder: an in-order packet was accepted; ACK now or coalesce.
  void AckAccepted(QpId qp, const Packet& pk);
  void SendAck(QpId qp);
  void ExecuteAtomic(QpId qp, const Packet& pk);
  void SendAtomicResp(QpId qp, uint64_t wqe);
  // The RX pipeline of h is busy until `until` (RNR NAK, atomic hand-off).
  void StallRx(HostId h, Picos until);
  // When a switch port may start its next packet towards h: the NIC's RX
  // buffer holds rx_backlog_limit of pipeline work at most.
  Picos PortStart(HostId h) const;
  void RxUd(Packet& pk);
  static bool IsReadLike(Op op) { return op == Op::kRead || op == Op::kCas || op == Op::kFaa; }
  static bool IsAtomic(Op op) { return op == Op::kCas || op == Op::kFaa; }
  // Whether this packet consumes a receive WQE at the responder.
  static bool ConsumesRecv(const Packet& pk, Transport t);

  // Send engine.
  bool FlowHasWork(uint32_t flow);
  void MakeReady(uint32_t flow);
  void TryDispatch(HostId h);
  void StartWqe(HostId h, uint32_t pu);
  void ReleasePu(HostId h, uint32_t pu);
  // A WQE is done on this PU: serve the QP's next one or give the QP back.
  void WqeDoneOnPu(HostId h, uint32_t pu);
  void PushToFifo(HostId h, uint32_t pu);
  void AfterPush(HostId h, uint32_t pu);
  void StartLink(HostId h);
  // Control packets (ACK/NAK, atomic responses) leave ahead of the TX FIFO:
  // NewCtrl addresses one from from_qp to its peer, the caller fills what
  // its type carries, LaunchCtrl queues it.
  uint32_t NewCtrl(QpId from_qp, PktType type);
  void LaunchCtrl(uint32_t id);
  void SendCtrl(QpId from_qp, PktType type, uint32_t psn);
  void Rewind(QpId qp, uint32_t psn);
  void ApplyRewind(QpId qp);
  void ArmRto(QpId qp);

  // Completion side.
  void MarkAcked(QpId qp, uint32_t psn);
  void Retire(QpId qp);
  void EmitCqe(const Cqe& cqe);
  void CqeArrived(CqId cq);

  // Receive side.
  void HandleRequest(uint32_t pkt);
  void RxRc(Packet& pk);
  void RxUc(Packet& pk);
  void RxRequesterResponse(Packet& pk);
  // The READ or atomic at wqe got its (last) response.
  void CompleteReadLike(QpId qp, uint64_t wqe);
  void DeliverRecv(Qp& q, QpId qpid, const Packet& pk);

  // PCIe and caches (simulator_memory.cc): small hooks called from the
  // send engine, the receive side and the completion path.
  Picos PostFetchDone(QpId qpid, uint64_t from, uint64_t to);
  void WqesFetched(QpId qpid, uint64_t upto);
  Picos WqeWindowStall(HostId h, QpId qpid);
  Picos WqeStartStall(HostId h, uint32_t flow);
  void TxPayloadDma(HostId h, uint32_t pu, Packet& pk);
  Picos PuFreeAt(HostId h, uint32_t pu) const;
  bool TakeReadyPacket(HostId h);
  void PuNextWqe(HostId h, uint32_t pu);
  Picos RxDone(HostId h, uint32_t pkt, Picos start);
  Picos CqeVisibleAt(HostId h);
  // Translation of [addr, addr + len) of `mr`: MPT (when `mpt`) and MTT
  // lookups, misses chained as dependent DMA reads, from `from` (or now_);
  // returns when the translation is done (then on all hits).
  Picos Translate(HostId h, MrId mr, uint64_t addr, uint32_t len, bool mpt, Picos from = 0);
  Picos MissRead(HostId h, uint32_t bytes, Picos after);

  // Schedules an event; `host` picks its FIFO lane of the event queue
  // (event_queue.h): one lane per kind and host parity.
  void Schedule(Picos at, EventKind kind, uint32_t a, uint64_t b, HostId host) {
    events_.Push(at, kind, a, b, static_cast<uint32_t>(kind) * 2 + (host & 1));
  }

  uint32_t AllocPacket();
  void FreePacket(uint32_t id) { free_pkts_.push_back(id); }
  Wqe& WqeAt(Qp& q, uint64_t i) { return q.sq[i & q.mask]; }
  static uint32_t Npkts(uint32_t bytes, uint32_t mtu) {
    return bytes == 0 ? 1 : (bytes + mtu - 1) / mtu;
  }

  FabricParams fabric_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  EventQueue events_;
  Picos now_ = 0;
  uint64_t events_processed_ = 0;
  std::vector<Host> hosts_;
  std::vector<Qp> qps_;
  std::vector<Cq> cqs_;
  std::vector<Packet> pkts_;
  std::vector<uint32_t> free_pkts_;
  std::vector<Cqe> pending_cqes_;      // slots for kCqeVisible
  std::vector<uint32_t> free_cqe_slots_;
  struct UserTimer { TimerSink* sink; uint64_t cookie; };
  std::vector<UserTimer> timers_;
  std::vector<uint32_t> free_timers_;
  uint64_t switch_bytes_ = 0;
  CompletionSink* sink_ = nullptr;
  CqeListener* listener_ = nullptr;
  bool stop_ = false;
  FabricStats fstats_;
  // PCIe links, caches and MRs (nic_cache.h), and per QP: its prefetched
  // WQE window and its last receive completion (keeps a QP's packets in
  // order when misses stall the receive side).
  struct QpMemory {
    uint64_t wqe_end = 0;      // WQEs below this index are (being) fetched
    uint64_t wqe_pending = 0;  // WQEs from here on arrive at wqe_ready
    Picos wqe_ready = 0;       // when the last prefetch read completes
    Picos rx_done = 0;
  };
  std::vector<NicMemory> mem_;
  std::vector<MemoryRegion> mrs_ = std::vector<MemoryRegion>(1);  // [kNoMr]: hot
  std::vector<QpMemory> qp_mem_;
};

// The completion time of one signaled RC WRITE of `bytes` between two
// hosts with `nic` on an otherwise idle `fabric` (its own Simulator): the
// fabric's round trip without queues, as an operator measures it with
// ib_write_lat before traffic; what a software transport over it takes as
// the fabric's base RTT (docs/reliability.md §4.5).
Picos IdleWriteRoundTripPs(const NicParams& nic, const FabricParams& fabric,
                           uint32_t bytes);

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_SIMULATOR_H_
