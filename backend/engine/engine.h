// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The host engine's API, in checked host types. The device layer
// (vhost-rdma/device) turns guest bytes into these requests after syntax
// checks (sizes, reserved fields, enum ranges, overflow of address + length);
// the engine checks meaning (handles belong to the VM, quotas, state
// machines, page lists inside guest memory) and owns every object.
//
// Threading: control calls (AttachVm .. QueryGid) come from the control
// thread; the engine publishes objects to the data path through the
// Executor. Data calls (Doorbell, PollOnce) come from the data-path thread.
#ifndef VRDMA_BACKEND_ENGINE_ENGINE_H_
#define VRDMA_BACKEND_ENGINE_ENGINE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/base/executor.h"
#include "backend/base/status.h"
#include "backend/memory/guest_memory.h"
#include "backend/rnic/rnic.h"
#include "policy/scheduler_policy.h"

namespace vrdma::engine {

using VmId = uint32_t;

struct Quotas {
  uint32_t max_pd = 256;
  uint32_t max_cq = 1024;
  uint32_t max_qp = 1024;
  uint32_t max_mr = 4096;
  uint32_t max_ah = 1024;
  uint32_t max_srq = 256;
  uint32_t max_mw = 1024;                  // memory windows (VIRTIO_RDMA_F_MW)
  // Kernel consumers (VIRTIO_RDMA_F_KERNEL, docs/virtio-rdma.md §4.8): the
  // operator's opt-in (the local DMA lkey registers the VM's RAM per kernel
  // PD), and the VM's fast-registration MRs (each one of max_mr too; an
  // nvme-rdma controller takes its queue depth's worth per I/O queue, 128
  // by default, and 32 for its admin queue).
  bool kernel_verbs = false;
  uint32_t max_fr_mr = 1024;
  uint64_t max_pinned_bytes = 1ull << 30;  // MR and ring pages mapped
  // Daemon memory the VM's objects cause: the engine's shadow state of its
  // rings and the RNIC's queues for its QPs, CQs and SRQs (quota.h).
  uint64_t max_host_bytes = 64ull << 20;
  // Kernel mappings of its MRs' and rings' page views: one per run of
  // physically contiguous guest pages (GuestPageView). The process has
  // vm.max_map_count in all; the engine admits VMs only while their
  // quotas fit in EngineOptions::mapping_budget.
  uint32_t max_mappings = 4096;
};

using MacAddress = std::array<uint8_t, 6>;

struct VmConfig {
  std::string name;
  std::vector<Gid> gids;                   // 1 .. VIRTIO_RDMA_MAX_GIDS
  // The MAC of the VM's own Ethernet NIC: with it the device is a RoCE v2
  // port on that NIC and offers the GSI QP (docs/virtio-rdma.md §2.1).
  std::optional<MacAddress> mac;
  Quotas quotas;
  policy::TenantQos qos;
};

// Ring geometry as the guest declared it (see struct virtio_rdma_ring_desc).
struct RingSpec {
  uint32_t log2_num_elem = 0;
  uint32_t log2_elem_size = 0;
  std::vector<uint64_t> pages;             // guest-physical, page aligned
};

struct RegMrRequest {
  uint32_t pd = 0;
  uint32_t access = 0;                     // AccessFlags
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t first_page_offset = 0;
  std::vector<uint64_t> pages;
};
struct RegMrResult { uint32_t handle; uint32_t lkey; uint32_t rkey; };

// A memory window (docs/virtio-rdma.md §4.7): rkey is the RNIC's.
struct AllocMwResult { uint32_t handle; uint32_t rkey; };

// A fast-registration MR (docs/virtio-rdma.md §4.8): at most max_pages
// pages, whose addresses a REG_MR WQE copies from the guest-physical
// page_list.
struct AllocMrRequest {
  uint32_t pd = 0;
  uint32_t max_pages = 0;
  uint64_t page_list = 0;
};

struct CreateCqRequest { uint32_t cqe = 0; RingSpec ring; };
struct CreateCqResult { uint32_t handle; uint32_t cqe; };

struct CreateQpRequest {
  uint32_t pd = 0;
  QpType type = QpType::kRc;
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  uint32_t srq = 0;                        // 0: none
  bool sq_sig_all = false;
  // VIRTIO_RDMA_QP_F_KERNEL: its SGEs may name the local DMA lkey (§4.8).
  bool kernel = false;
  QpCaps caps;
  RingSpec sq;
  RingSpec rq;                             // empty pages when srq != 0
};
struct CreateQpResult { uint32_t qpn; QpCaps caps; };

// Guest view of an address vector (virtual GIDs, sgid_index into the VM's
// own GID table).
struct GuestAh {
  Gid dgid{};
  uint8_t sgid_index = 0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t sl = 0;
  uint8_t port_num = 1;
  bool is_global = true;
};

// ModifyQp input: mask uses the IBV_QP_* bits (QpAttrMask and the rest of
// VIRTIO_RDMA_QP_*); only fields named by mask are meaningful.
struct ModifyQpRequest {
  uint32_t qpn = 0;
  uint32_t mask = 0;
  QpState state = QpState::kReset;
  QpState cur_state = QpState::kReset;
  uint32_t access_flags = 0;
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  uint32_t qkey = 0;
  GuestAh ah;
  uint32_t path_mtu_bytes = 1024;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qpn = 0;
};

struct QueryQpResult {
  ModifyQpRequest attr;                    // mask = everything reported
  QpCaps cap;
};

struct CreateSrqRequest {
  uint32_t pd = 0;
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
  RingSpec ring;
};
struct CreateSrqResult { uint32_t handle; uint32_t max_wr; uint32_t max_sge; };

struct DeviceAttr {
  RnicLimits limits;                       // after this VM's quotas
  uint32_t max_ah = 0;
  uint32_t max_qp_rd_atom = 0;
  uint32_t max_mr_pages = 0;
};

// Per-VM counters, for the daemon's stats and for tests.
struct VmStats {
  uint32_t pds = 0, cqs = 0, qps = 0, mrs = 0, ahs = 0, srqs = 0, mws = 0;
  uint32_t fr_mrs = 0;                     // of mrs, fast-registration ones
  uint64_t pinned_bytes = 0;
  uint64_t host_bytes = 0;                 // Quotas::max_host_bytes
  uint32_t mappings = 0;                   // Quotas::max_mappings
  uint64_t wqes_posted = 0;
  uint64_t wqes_rejected = 0;              // failed validation
  uint64_t cqes_written = 0;
  // Of those, by status (IB_WC_*, WcStatusName); the last slot counts
  // statuses outside the IB range.
  std::array<uint64_t, kWcStatusCount + 1> cqes_by_status{};
  // The RNIC reported one of the VM's host CQs in error (an overflow the
  // sizing rule should make impossible): its QPs went to ERR (QP_FATAL).
  uint64_t rnic_cq_errors = 0;
  // Flush work (kWrFlushErr CQEs for ring WQEs of QPs in ERR) left for a
  // later turn because the VM had used its per-turn flush budget.
  uint64_t flush_deferred = 0;
  // Its SENDs (and WRITE_WITH_IMMs) held because the local receiver had no
  // receive posted for them (receive credits, docs/scheduler.md): under a
  // policy that holds sends, they wait instead of meeting RNR on the RNIC.
  uint64_t sends_held_for_receive = 0;
  // GSI datagrams (QP1, the guest's RDMA CM) the engine carried for the
  // VM: sent; and of those, delivered to a VM of this engine, or dropped
  // (no such GID here, its QP1 not ready or without a posted receive).
  uint64_t gsi_sent = 0;
  uint64_t gsi_delivered = 0;
  uint64_t gsi_dropped = 0;
  // The scheduler stage's accounting of the VM's send work (bytes and
  // messages in and out, what it holds, time held, completion latency).
  policy::TenantAccount sched;
  // CLOCK_MONOTONIC, in ns, when the data-path thread took these counters:
  // rates come from two snapshots' counters over their own interval, not
  // over the time a reader waited for them.
  uint64_t sampled_at_ns = 0;
};

// Where the engine reports to the device of a VM; called on the data-path
// thread (CQ notifications, async errors) and must not block.
class VmEventSink {
 public:
  virtual ~VmEventSink() = default;
  // uint32_t type: enum virtio_rdma_event_type.
  virtual void OnEvent(uint32_t type, uint32_t handle) = 0;
  // The end of a data-path turn that raised events: one guest notification
  // for the batch instead of one per event.
  virtual void FlushEvents() {}
};

class Engine {
 public:
  // rnic and executor must outlive the engine. policy may be shared by all
  // VMs (it is told tenants apart by VmId).
  static std::unique_ptr<Engine> Create(Rnic& rnic, Executor& executor,
                                        policy::SchedulerPolicy& policy);
  virtual ~Engine() = default;

  // VM lifecycle (control thread).
  virtual Result<VmId> AttachVm(const VmConfig& config, VmEventSink* sink) = 0;
  // Releases everything the VM owns (QPs to error and destroyed, MRs
  // deregistered, views unmapped); other VMs are unaffected.
  virtual void DetachVm(VmId vm) = 0;
  virtual void SetGuestMemory(VmId vm,
                              std::shared_ptr<const GuestMemory> memory) = 0;
  virtual Result<VmStats> Stats(VmId vm) const = 0;

  // Verbs (control thread).
  virtual Result<DeviceAttr> QueryDevice(VmId vm) const = 0;
  virtual Result<Gid> QueryGid(VmId vm, uint32_t index) const = 0;
  virtual Result<uint32_t> CreatePd(VmId vm) = 0;
  virtual Status DestroyPd(VmId vm, uint32_t pd) = 0;
  virtual Result<RegMrResult> RegMr(VmId vm, const RegMrRequest& req) = 0;
  // kInvalid while windows are bound to the MR (IBA 10.6.7.2.6, as rxe):
  // the MR stays registered and usable.
  virtual Status DeregMr(VmId vm, uint32_t mr) = 0;
  // Memory windows (docs/virtio-rdma.md §4.7): type 1 or 2 in a PD of the
  // VM, counted against Quotas::max_mw; kUnsupported when the RNIC has
  // none. A bound window is unbound by DeallocMw.
  virtual Result<AllocMwResult> AllocMw(VmId vm, uint32_t pd, uint8_t type) = 0;
  virtual Status DeallocMw(VmId vm, uint32_t mw) = 0;
  // A fast-registration MR (docs/virtio-rdma.md §4.8) of at most max_pages
  // pages (1..DeviceAttr::limits.max_fr_pages), invalid until a REG_MR WQE
  // of a kernel QP; DeregMr frees it. Counts against Quotas::max_mr and
  // max_fr_mr; kUnsupported without VIRTIO_RDMA_F_KERNEL (max_fr_mr 0).
  virtual Result<RegMrResult> AllocMr(VmId vm, const AllocMrRequest& req) = 0;
  virtual Result<CreateCqResult> CreateCq(VmId vm,
                                          const CreateCqRequest& req) = 0;
  virtual Status DestroyCq(VmId vm, uint32_t cq) = 0;
  virtual Status ReqNotifyCq(VmId vm, uint32_t cq, bool solicited_only) = 0;
  virtual Result<CreateQpResult> CreateQp(VmId vm,
                                          const CreateQpRequest& req) = 0;
  virtual Status ModifyQp(VmId vm, const ModifyQpRequest& req) = 0;
  virtual Result<QueryQpResult> QueryQp(VmId vm, uint32_t qpn) const = 0;
  virtual Status DestroyQp(VmId vm, uint32_t qpn) = 0;
  virtual Result<uint32_t> CreateAh(VmId vm, uint32_t pd,
                                    const GuestAh& ah) = 0;
  virtual Status DestroyAh(VmId vm, uint32_t ah) = 0;
  virtual Result<CreateSrqResult> CreateSrq(VmId vm,
                                            const CreateSrqRequest& req) = 0;
  virtual Status ModifySrq(VmId vm, uint32_t srq, uint32_t mask,
                           uint32_t max_wr, uint32_t srq_limit) = 0;
  virtual Status DestroySrq(VmId vm, uint32_t srq) = 0;

  // QoS (control thread): the operator changes a VM's QoS while it runs.
  virtual Status SetQos(VmId vm, const policy::TenantQos& qos) = 0;
  // The scheduler policy's view of a VM, and of the whole host.
  virtual void Report(VmId vm, policy::ReportSink& sink) const = 0;
  virtual void ReportPolicy(policy::ReportSink& sink) const = 0;

  // Data path (data-path thread).
  // A doorbell record (enum virtio_rdma_doorbell_kind, handle). Unknown or
  // foreign handles are counted and ignored.
  virtual void Doorbell(VmId vm, uint8_t kind, uint32_t handle) = 0;
  // One turn of the data path: pending send queues, the scheduler stage,
  // RNIC progress, completions. Returns true when it did work or has work
  // it must poll for now.
  virtual bool PollOnce() = 0;
  // When the data path next has timed work (a paced release, a policy
  // timer) on the engine's clock; policy::kNever when none. An idle loop
  // may sleep until then.
  virtual policy::Nanos NextDeadline() const = 0;
};

struct EngineOptions {
  // Monotonic nanoseconds for the scheduler policy; default steady_clock.
  std::function<policy::Nanos()> clock;
  uint32_t max_vms = 64;
  // WQEs consumed from one SQ per turn (fairness between QPs).
  uint32_t sq_budget = 64;
  // A send queue stays watched for this many turns after its last WQE:
  // each turn the engine loads its producer index and takes new WQEs
  // without waiting for their doorbell (which then finds nothing new). A
  // doorbell costs the guest a system call and the device a virtqueue
  // round trip; while the data-path thread polls anyway, neither needs to
  // be on the way from a posted WQE to the RNIC (io_uring's SQPOLL does the
  // same). 0: only doorbells start work.
  uint32_t sq_watch_turns = 1024;
  // At most this many QPs of one VM are watched at once: the watch is
  // data-path time the VM causes, and it is bounded per VM.
  uint32_t sq_watch_per_vm = 4;
  // The host side signals only every Nth WR the guest signaled, N adapting
  // to the RNIC's load (sched::StageOptions::adaptive_signaling, TPL): fewer
  // CQEs for the RNIC to write and the data path to poll; the guest's own
  // CQEs are unchanged. For an RNIC whose CQEs cost (the daemon turns it on
  // with a physical device).
  bool adaptive_signaling = false;
  // Receive queues refilled by the low-watermark sweep per turn.
  uint32_t sweep_budget = 4;
  // Ring WQEs flushed (kWrFlushErr CQEs written for QPs in ERR) per VM per
  // turn, send and receive rings together; the rest waits for later turns.
  uint32_t flush_budget = 64;
  // Kernel mappings all VMs together may hold (the sum of their
  // Quotas::max_mappings): AttachVm refuses a VM that would exceed it with
  // kNoResource, so a VM at its mapping quota can never make another VM's
  // mapping fail. The daemon derives it from vm.max_map_count.
  uint64_t mapping_budget = UINT64_MAX;
  // Bytes all VMs together may pin (the sum of Quotas::max_pinned_bytes),
  // the same way: a physical RNIC pins every registered region against the
  // daemon's RLIMIT_MEMLOCK, so without it one VM at its quota could make
  // another's REG_MR fail. The daemon derives it from that limit.
  uint64_t pinned_budget = UINT64_MAX;
  // The GID of the daemon's own probe QPs (a policy's reference flow,
  // Justitia's). Zero: ::ffff:127.0.0.1, which a software RNIC takes; a
  // physical RNIC sends only from its port's GIDs, so there it must be one
  // of them (no VM's), or policies run without probes.
  Gid probe_gid{};
};

// Engine::Create with options (tests: a manual clock).
std::unique_ptr<Engine> CreateEngine(Rnic& rnic, Executor& executor,
                                     policy::SchedulerPolicy& policy,
                                     EngineOptions options);

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_ENGINE_H_
