// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine fuzzer: set-up, control verbs and the invariants checked after
// every step (engine_fuzz_driver.h). The data-path operations are in
// engine_fuzz_datapath.cc.
#include "backend/engine/testing/engine_fuzz_driver.h"


#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "backend/engine/engine_impl.h"
#include "backend/engine/testing/engine_fuzz_state.h"
#include "backend/memory/testing/test_mappings.h"
#include "policy/policy_registry.h"
#include "vhost-rdma/abi/virtio_rdma.h"

namespace vrdma::engine::fuzz {
namespace {

// Kernel mappings all VMs may hold: two VMs with the default quota (4096)
// do not fit.
constexpr uint64_t kMappingBudget = 4200;

RnicLimits FuzzRnicLimits() {
  RnicLimits l = DefaultSoftRnicLimits();
  // Small tables, so the RNIC's own limits are reached too.
  l.max_qp = 24;
  l.max_cq = 32;
  l.max_mr = 48;
  l.max_pd = 16;
  l.max_srq = 8;
  l.max_cqe = 4096;
  l.max_qp_wr = 1024;
  l.max_srq_wr = 1024;
  return l;
}

// Quota sets an attach picks from: small (edges are reached), one zero.
Quotas QuotaSet(uint8_t sel) {
  Quotas q;
  switch (sel % 4) {
    case 0:
      q = {.max_pd = 3,
           .max_cq = 4,
           .max_qp = 4,
           .max_mr = 8,
           .max_ah = 2,
           .max_srq = 2,
           .max_pinned_bytes = 48 * kPage,
           .max_host_bytes = 1 << 20,
           .max_mappings = 24};
      break;
    case 1:
      q = {.max_pd = 2,
           .max_cq = 2,
           .max_qp = 2,
           .max_mr = 3,
           .max_ah = 1,
           .max_srq = 1,
           .max_pinned_bytes = 12 * kPage,
           .max_host_bytes = 96 << 10,
           .max_mappings = 6};
      break;
    case 2:  // the RNIC runs out first
      q = {.max_pd = 8,
           .max_cq = 8,
           .max_qp = 8,
           .max_mr = 16,
           .max_ah = 4,
           .max_srq = 4,
           .max_pinned_bytes = 1ull << 30};
      break;
    default:
      q = {.max_pd = 1,
           .max_cq = 1,
           .max_qp = 1,
           .max_mr = 1,
           .max_ah = 0,
           .max_srq = 0,
           .max_pinned_bytes = 2 * kPage,
           .max_host_bytes = 16 << 10,
           .max_mappings = 2};
      break;
  }
  return q;
}


template <typename T>
size_t LiveCount(const std::vector<T>& v) {
  return std::count_if(v.begin(), v.end(), [](const T& x) { return !x.dead; });
}

}  // namespace

Driver::Driver(uint8_t config)
    : rnic_(FuzzRnicLimits(), [this] { return now_; }),
      trace_(std::getenv("VRDMA_FUZZ_TRACE") != nullptr) {
  const std::vector<std::string> names = policy::PolicyNames();
  std::string error;
  const std::string& name = names[config % names.size()];
  // Bit 2: knobs that make the policies split and pace small messages.
  std::vector<std::string> knobs;
  if (config & 4) {
    if (name == "justitia") knobs = {"token_bytes=512"};
    if (name.starts_with("perf")) knobs = {"sub_msg_size=1024", "always_isolate=1"};
  }
  policy_ = policy::MakePolicy(name, policy::CardProfile{}, knobs, 0, &error);
  if (!policy_) Fail("MakePolicy: %s", error.c_str());
  EngineOptions o;
  o.clock = [this] { return now_; };
  o.flush_budget = 1 + (config >> 4) % 64;
  o.mapping_budget = kMappingBudget;
  engine_ = CreateEngine(rnic_, exec_, *policy_, o);
  for (int v = 0; v < kVms; ++v) {
    vm_[v].guest = FuzzGuest::Get(static_cast<uint8_t>(v));
    vm_[v].memory = vm_[v].guest->MakeMemory(0);
  }
  Attach(0, 0);
  Attach(1, 0);
}

Driver::~Driver() {
  for (int v = 0; v < kVms; ++v) {
    if (vm_[v].attached) Detach(v);
  }
  CheckAll("final detach", true);
  const SoftRnicCounts c = rnic_.ObjectCounts();
  if (c.qps > 2 || c.cqs > 1 || c.mrs > 1 || c.pds > 1 || c.srqs || c.ahs)
    Fail("objects left on the RNIC with no VM attached");
  engine_.reset();
  if (!(rnic_.ObjectCounts() == SoftRnicCounts{}))
    Fail("objects left on the RNIC after the engine was destroyed");
}

void Driver::Run(ByteReader& in) {
  while (!in.empty() && stats_.steps < 400) {
    const Op op = static_cast<Op>(in.U8() % kOpCount);
    Step(op, in);
    ++stats_.steps;
  }
}

void Driver::Step(Op op, ByteReader& in) {
  const int v =
      op == kOpDoorbell || op == kOpPoll || op == kOpConnect || op == kOpStaleVm
          ? 0
          : in.U8() % kVms;
  const bool needs_vm = op != kOpAttach && op != kOpSetMemory &&
                        op != kOpSetQos &&
                        op != kOpRawWrite && op != kOpDoorbell &&
                        op != kOpPoll && op != kOpConnect && op != kOpStaleVm;
  if (needs_vm && !vm_[v].attached) return;
  static const char* const kNames[kOpCount] = {
      "CreatePd",  "DestroyPd", "RegMr",     "DeregMr",    "CreateCq",
      "DestroyCq", "ReqNotify", "CreateQp",  "ModifyQp",   "QueryQp",
      "DestroyQp", "CreateSrq", "ModifySrq", "DestroySrq", "CreateAh",
      "DestroyAh", "PostSend",  "PostRecv",  "RawWqe",     "RawWrite",
      "Doorbell",  "Poll",      "DrainCq",   "SetMemory",  "Detach",
      "Attach",    "Connect",   "StaleVm",   "SetQos"};
  if (trace_)
    std::fprintf(stderr, "step %llu: %s v%d\n",
                 static_cast<unsigned long long>(stats_.steps), kNames[op], v);
  switch (op) {
    case kOpCreatePd:
      CreatePd(v);
      break;
    case kOpDestroyPd:
      DestroyPd(v, in);
      break;
    case kOpRegMr:
      RegMr(v, in);
      break;
    case kOpDeregMr:
      DeregMr(v, in);
      break;
    case kOpCreateCq:
      CreateCq(v, in);
      break;
    case kOpDestroyCq:
      DestroyCq(v, in);
      break;
    case kOpReqNotifyCq: {
      const uint32_t h = PickHandle(
          v, &VmModel::cqs, [](const CqRec& c) { return c.handle; }, in);
      (void)engine_->ReqNotifyCq(vm_[v].id, h, in.U8() & 1);
      break;
    }
    case kOpCreateQp:
      CreateQp(v, in);
      break;
    case kOpModifyQp:
      ModifyQpOp(v, in);
      break;
    case kOpQueryQp:
      QueryQp(v, in);
      break;
    case kOpDestroyQp:
      DestroyQp(v, in);
      break;
    case kOpCreateSrq:
      CreateSrq(v, in);
      break;
    case kOpModifySrq:
      ModifySrq(v, in);
      break;
    case kOpDestroySrq:
      DestroySrq(v, in);
      break;
    case kOpCreateAh:
      CreateAh(v, in);
      break;
    case kOpDestroyAh:
      DestroyAh(v, in);
      break;
    case kOpPostSend:
      PostSend(v, in);
      break;
    case kOpPostRecv:
      PostRecv(v, in);
      break;
    case kOpRawWqe:
      RawWqe(v, in);
      break;
    case kOpRawWrite:
      RawWrite(v, in);
      break;
    case kOpDoorbell:
      Doorbell(in);
      break;
    case kOpPoll:
      Poll(in);
      break;
    case kOpDrainCq:
      DrainCq(v, in);
      break;
    case kOpSetMemory: {
      VmModel& vm = vm_[v];
      vm.layout = in.U8() % FuzzGuest::kLayouts;
      vm.memory = vm.guest->MakeMemory(vm.layout);
      if (vm.attached) engine_->SetGuestMemory(vm.id, vm.memory);
      break;
    }
    case kOpDetach:
      Detach(v);
      break;
    case kOpAttach:
      Attach(v, in.U8());
      break;
    case kOpConnect:
      Connect(in);
      break;
    case kOpStaleVm:
      StaleVm(in);
      break;
    case kOpSetQos:
      SetQos(v, in);
      break;
    case kOpCount:
      break;
  }
  // The guest's own writes need no scan (the engine did not run).
  const bool guest_only = op == kOpRawWqe || op == kOpRawWrite ||
                          op == kOpDrainCq || op == kOpSetMemory;
  CheckAll(kNames[op], !guest_only);
  if (op == kOpRegMr || op == kOpCreateCq || op == kOpCreateQp ||
      op == kOpCreateSrq || op == kOpConnect) {
    for (int o = 0; o < kVms; ++o) CheckMappings(o, kNames[op]);
  }
}

// ---------------------------------------------------------------- VMs

void Driver::Attach(int v, uint8_t quota_sel) {
  VmModel& vm = vm_[v];
  VmConfig c;
  c.name = "fuzz" + std::to_string(v);
  if (quota_sel & 0x80) {
    // Another attached VM's GID: must be refused (one owner per GID).
    for (int o = 0; o < kVms; ++o) {
      if (o == v || !vm_[o].attached) continue;
      c.gids = {vm_[o].gids[0]};
      Result<VmId> r = engine_->AttachVm(c, nullptr);
      if (r.ok()) Fail("AttachVm accepted VM %d's GID", o);
      break;
    }
  }
  if (vm.attached) return;
  c.gids = {VmGid(v, 0), VmGid(v, 1)};
  c.quotas = QuotaSet(quota_sel);
  c.qos.weight = 1 + (quota_sel >> 2) % 4;
  c.qos.app_class = static_cast<policy::TenantClass>((quota_sel >> 4) % 3);
  if (quota_sel & 0x40) c.qos.max_rate_bps = 1'000'000'000;
  uint64_t admitted = c.quotas.max_mappings;
  for (const VmModel& o : vm_)
    admitted += o.attached ? o.quotas.max_mappings : 0;
  Result<VmId> r = engine_->AttachVm(c, nullptr);
  // Refused only beyond the mapping budget: its GIDs are free (it never
  // attached, or its detach released them).
  if (r.ok() != (admitted <= kMappingBudget)) {
    Fail("AttachVm(VM %d) with %llu of %llu mappings admitted: %s", v,
         static_cast<unsigned long long>(admitted),
         static_cast<unsigned long long>(kMappingBudget),
         StatusName(r.status()));
  }
  if (!r.ok()) return;
  vm.attached = true;
  vm.id = *r;
  vm.gids = c.gids;
  vm.quotas = c.quotas;
  engine_->SetGuestMemory(vm.id, vm.memory);
}

void Driver::Detach(int v) {
  VmModel& vm = vm_[v];
  engine_->DetachVm(vm.id);
  vm.attached = false;
  vm.stale_id = vm.id;
  for (auto& x : vm.pds) x.dead = true;
  for (auto& x : vm.ahs) x.dead = true;
  for (auto& x : vm.mrs) x.dead = true;
  for (auto& x : vm.cqs) x.dead = true;
  for (auto& x : vm.qps) x.dead = true;
  for (auto& x : vm.srqs) x.dead = true;
  if (engine_->Stats(vm.id).ok()) Fail("Stats of a detached VM answered");
  CheckMappings(v, "detach");
}

void Driver::StaleVm(ByteReader& in) {
  const int v = in.U8() % kVms;
  const VmModel& vm = vm_[v];
  VmId id = vm.stale_id.value_or(in.U32());
  if (vm.attached && vm.id == id) return;
  for (int o = 0; o < kVms; ++o) {
    if (vm_[o].attached && vm_[o].id == id) return;  // reused id: live
  }
  if (engine_->CreatePd(id).ok()) Fail("CreatePd on detached VM id %u", id);
  if (engine_->Stats(id).ok()) Fail("Stats on detached VM id %u", id);
  if (engine_->QueryDevice(id).ok()) Fail("QueryDevice on stale id %u", id);
  engine_->Doorbell(id, VIRTIO_RDMA_DB_SQ, in.U32());
  engine_->DetachVm(id);
}

namespace {
// Reports must be well-formed: keys, numbers that are numbers.
class CheckingSink : public policy::ReportSink {
 public:
  void Number(std::string_view key, double value) override {
    if (key.empty() || value != value) Fail("report: bad number");
  }
  void Text(std::string_view key, std::string_view) override {
    if (key.empty()) Fail("report: empty key");
  }
};
}  // namespace

void Driver::SetQos(int v, ByteReader& in) {
  const VmModel& vm = vm_[v];
  const uint8_t b = in.U8();
  policy::TenantQos q;
  q.weight = b & 7;  // 0 is invalid
  q.app_class = static_cast<policy::TenantClass>((b >> 3) % 3);
  q.max_rate_bps = (b & 0x20) ? uint64_t{in.U16()} << 16 : 0;
  q.latency_target_ns = (b & 0x40) ? uint64_t{in.U16()} << 10 : 0;
  const Status s = engine_->SetQos(vm.id, q);
  if (s == Status::kOk && (q.weight == 0 || !vm.attached)) {
    Fail("SetQos accepted weight %u for VM %d (attached %d)", q.weight, v,
         vm.attached);
  }
  CheckingSink sink;
  engine_->Report(vm.id, sink);
  engine_->ReportPolicy(sink);
}

// ---------------------------------------------------------------- checks

void Driver::CheckAll(const char* step, bool scan) {
  char what[64];
  std::snprintf(what, sizeof what, "step %llu (%s)",
                static_cast<unsigned long long>(stats_.steps), step);
  CheckAccounting(what);
  for (int v = 0; v < kVms && scan; ++v) {
    VmModel& vm = vm_[v];
    std::vector<const RingRec*> rings;
    std::vector<const MrRec*> mrs;
    for (const CqRec& c : vm.cqs) rings.push_back(&c.ring);
    for (const QpRec& q : vm.qps) {
      rings.push_back(&q.sq);
      if (q.rq) rings.push_back(&*q.rq);
    }
    for (const SrqRec& s : vm.srqs) rings.push_back(&s.ring);
    for (const MrRec& m : vm.mrs) mrs.push_back(&m);
    const uint64_t before = vm.guest->changed_bytes();
    vm.guest->CheckIsolation(rings, mrs, vm.refs, vm.all_local, what);
    stats_.bytes_changed += vm.guest->changed_bytes() - before;
    if (trace_) {
      for (const CqRec& c : vm.cqs) {
        uint32_t p = 0;
        vm.guest->RingRead(c.ring, 128, &p, 4);
        std::fprintf(stderr, "  VM %d CQ %#x producer %u\n", v, c.handle, p);
      }
    }
    if (trace_ && vm.guest->changed_bytes() != before) {
      std::fprintf(
          stderr, "  VM %d: %llu bytes changed\n", v,
          static_cast<unsigned long long>(vm.guest->changed_bytes() - before));
    }
  }
  Purge();
}

void Driver::CheckAccounting(const char* step) {
  SoftRnicCounts want;
  for (int v = 0; v < kVms; ++v) {
    const VmModel& vm = vm_[v];
    if (!vm.attached) continue;
    VmStats m{};
    m.pds = LiveCount(vm.pds);
    m.ahs = LiveCount(vm.ahs);
    m.mrs = LiveCount(vm.mrs);
    m.cqs = LiveCount(vm.cqs);
    m.qps = LiveCount(vm.qps);
    m.srqs = LiveCount(vm.srqs);
    for (const MrRec& x : vm.mrs)
      if (!x.dead) m.pinned_bytes += x.fpages.size() * kPage;
    for (const CqRec& x : vm.cqs)
      if (!x.dead) m.pinned_bytes += x.ring.fpages.size() * kPage;
    for (const QpRec& x : vm.qps) {
      if (x.dead) continue;
      m.pinned_bytes += x.sq.fpages.size() * kPage;
      if (x.rq) m.pinned_bytes += x.rq->fpages.size() * kPage;
    }
    for (const SrqRec& x : vm.srqs)
      if (!x.dead) m.pinned_bytes += x.ring.fpages.size() * kPage;
    Result<VmStats> r = engine_->Stats(vm.id);
    if (!r.ok()) Fail("%s: Stats(VM %d) failed", step, v);
    const VmStats& s = *r;
    if (s.pds != m.pds || s.ahs != m.ahs || s.mrs != m.mrs || s.cqs != m.cqs ||
        s.qps != m.qps || s.srqs != m.srqs ||
        s.pinned_bytes != m.pinned_bytes) {
      Fail(
          "%s: VM %d stats pd/ah/mr/cq/qp/srq/pinned %u/%u/%u/%u/%u/%u/%llu, "
          "created %u/%u/%u/%u/%u/%u/%llu",
          step, v, s.pds, s.ahs, s.mrs, s.cqs, s.qps, s.srqs,
          static_cast<unsigned long long>(s.pinned_bytes), m.pds, m.ahs, m.mrs,
          m.cqs, m.qps, m.srqs,
          static_cast<unsigned long long>(m.pinned_bytes));
    }
    const Quotas& q = vm.quotas;
    if (s.pds > q.max_pd || s.ahs > q.max_ah || s.mrs > q.max_mr ||
        s.cqs > q.max_cq || s.qps > q.max_qp || s.srqs > q.max_srq ||
        s.pinned_bytes > q.max_pinned_bytes ||
        s.host_bytes > q.max_host_bytes || s.mappings > q.max_mappings) {
      Fail("%s: VM %d above its quotas (host bytes %llu, mappings %u)", step, v,
           static_cast<unsigned long long>(s.host_bytes), s.mappings);
    }
    // Every charge is given back: nothing left once the VM owns nothing;
    // a view maps at most one run per page.
    uint64_t pages = m.pinned_bytes / kPage;
    if (s.mappings > pages ||
        (m.pds + m.ahs + m.mrs + m.cqs + m.qps + m.srqs == 0 &&
         s.host_bytes != 0)) {
      Fail("%s: VM %d charges host bytes %llu, mappings %u for %llu pages",
           step, v, static_cast<unsigned long long>(s.host_bytes), s.mappings,
           static_cast<unsigned long long>(pages));
    }
    mappings_charged_[v] = s.mappings;
    want.pds += m.pds;
    want.ahs += m.ahs;
    want.mrs += m.mrs;
    want.cqs += m.cqs;
    // QP1 is the engine's own, never the RNIC's (gsi.h).
    want.qps += m.qps - static_cast<uint32_t>(std::count_if(
                            vm.qps.begin(), vm.qps.end(), [](const QpRec& x) {
                              return !x.dead && x.type == QpType::kGsi;
                            }));
    want.srqs += m.srqs;
    want.gids += static_cast<uint32_t>(vm.gids.size());
  }
  SoftRnicCounts probe = want;  // the daemon's probe path (policies)
  probe.pds += 1;
  probe.cqs += 1;
  probe.mrs += 1;
  probe.qps += 2;
  probe.gids += 1;
  const SoftRnicCounts c = rnic_.ObjectCounts();
  if (!(c == want) && !(c == probe)) {
    Fail(
        "%s: SoftRnic holds pd/mr/cq/srq/qp/ah/gid %u/%u/%u/%u/%u/%u/%u, "
        "the attached VMs own %u/%u/%u/%u/%u/%u/%u",
        step, c.pds, c.mrs, c.cqs, c.srqs, c.qps, c.ahs, c.gids, want.pds,
        want.mrs, want.cqs, want.srqs, want.qps, want.ahs, want.gids);
  }
}

void Driver::CheckMappings(int v, const char* step) {
  const VmModel& vm = vm_[v];
  // The fuzzer's own mapping and the frontend table's regions, and the
  // engine's page views: none once detached, never more than it charged
  // (the kernel may merge adjacent ones).
  const int base =
      1 + (vm.memory ? static_cast<int>(vm.memory->region_count()) : 0);
  const int views = vrdma::testing::CountMappingsOf(vm.guest->fd()) - base;
  const int charged = vm.attached ? static_cast<int>(mappings_charged_[v]) : 0;
  if (views < 0 || views > charged) {
    Fail("%s: VM %d's memfd has %d page-view mappings, %d charged", step, v,
         views, charged);
  }
}

void Driver::Purge() {
  for (VmModel& vm : vm_) {
    auto purge = [](auto& list) {
      std::erase_if(list, [](const auto& x) { return x.dead; });
    };
    purge(vm.pds);
    purge(vm.ahs);
    purge(vm.mrs);
    purge(vm.cqs);
    purge(vm.qps);
    purge(vm.srqs);
    if (vm.refs.size() > 4096) {
      vm.refs.clear();
      vm.all_local = true;
    }
  }
}

// ---------------------------------------------------------------- helpers

std::vector<uint64_t> Driver::Pages(VmModel& vm, size_t n, uint8_t mode,
                                    ByteReader& in) {
  std::vector<uint64_t> out;
  mode %= 8;
  for (size_t i = 0; i < n; ++i) {
    if (mode <= 4) {  // fresh, contiguous in the file
      out.push_back(FuzzGuest::Gpa(vm.next_page + i, vm.layout));
    } else if (mode == 5) {  // any page of the VM: aliasing
      out.push_back(FuzzGuest::Gpa(in.U8(), vm.layout));
    } else if (mode == 6) {  // raw
      out.push_back(in.U8() < 128 ? FuzzGuest::Gpa(in.U8(), vm.layout) + in.U8()
                                  : in.U64());
    } else {  // the other table's address of the page
      out.push_back(FuzzGuest::Gpa(vm.next_page + i, (vm.layout + 1) % 2));
    }
  }
  if (mode <= 4 || mode == 7) vm.next_page = (vm.next_page + n) % kVmPages;
  return out;
}

std::vector<uint32_t> Driver::Resolve(const VmModel& vm,
                                      const std::vector<uint64_t>& gpas,
                                      const char* what) {
  if (trace_) {
    std::fprintf(stderr, "  %s pages:", what);
    for (uint64_t g : gpas) {
      std::fprintf(stderr, " %d",
                   static_cast<int>(FuzzGuest::FilePage(g, vm.layout).value_or(999)));
    }
    std::fprintf(stderr, "\n");
  }
  std::vector<uint32_t> fp;
  for (uint64_t g : gpas) {
    std::optional<uint32_t> p = FuzzGuest::FilePage(g, vm.layout);
    if (!p) {
      Fail("%s accepted gpa %#llx outside the VM's memory (table %d)", what,
           static_cast<unsigned long long>(g), vm.layout);
    }
    fp.push_back(*p);
  }
  return fp;
}

void Driver::NoteAliasing(VmModel& vm) {
  // Ring pages shared with another ring or a writable MR: ring bytes may
  // then come from the device or the peer, so SGEs in them are unknown.
  std::vector<int> use(kVmPages, 0);
  auto add = [&](const std::vector<uint32_t>& pages) {
    std::vector<uint32_t> p = pages;
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    for (uint32_t x : p) ++use[x];
  };
  std::vector<uint32_t> ring_pages;
  for (const CqRec& c : vm.cqs)
    add(c.ring.fpages),
        ring_pages.insert(ring_pages.end(), c.ring.fpages.begin(),
                          c.ring.fpages.end());
  for (const QpRec& q : vm.qps) {
    add(q.sq.fpages);
    ring_pages.insert(ring_pages.end(), q.sq.fpages.begin(), q.sq.fpages.end());
    if (q.rq) {
      add(q.rq->fpages);
      ring_pages.insert(ring_pages.end(), q.rq->fpages.begin(),
                        q.rq->fpages.end());
    }
  }
  for (const SrqRec& s : vm.srqs)
    add(s.ring.fpages),
        ring_pages.insert(ring_pages.end(), s.ring.fpages.begin(),
                          s.ring.fpages.end());
  for (const MrRec& m : vm.mrs) {
    if (m.access & 0xb) add(m.fpages);
  }
  for (uint32_t p : ring_pages) {
    if (use[p] > 1) vm.all_local = true;
  }
}

// A create verb's result for the model: true when the object exists.
bool Driver::OwnCreate(VmModel& vm, Status s, const char* what) {
  if (trace_)
    std::fprintf(stderr, "  %s(vm %u): %s\n", what, vm.id, StatusName(s));
  if (s != Status::kOk) return false;
  ++stats_.verbs_ok;
  return true;
}

// ---------------------------------------------------------------- entry

FuzzRunStats RunEngineFuzz(std::span<const uint8_t> input) {
  if (input.empty()) return {};
  ByteReader in(input.subspan(1));
  FuzzRunStats stats;
  {
    Driver d(input[0]);
    d.Run(in);
    stats = d.stats();
  }
  return stats;
}

}  // namespace vrdma::engine::fuzz
