// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Mechanisms for policy unit tests: remembers every control, grant,
// release time, timer, probe and peer message a policy asks for, and
// serves flow and tenant accounts the test sets. Small enough to read in a
// minute; allocation is fine here.
#ifndef VRDMA_POLICY_TESTING_FAKE_MECHANISMS_H_
#define VRDMA_POLICY_TESTING_FAKE_MECHANISMS_H_

#include <map>
#include <utility>
#include <vector>

#include "policy/scheduler_policy.h"

namespace vrdma::policy::testing {

class FakeMechanisms : public Mechanisms {
 public:
  struct Credit {
    uint64_t bytes = 0;
    uint64_t pieces = 0;
  };

  void Configure(FlowId flow, const FlowControl& c) override {
    controls[flow] = c;
    ++configures;
  }
  const FlowControl& control(FlowId flow) const override {
    auto it = controls.find(flow);
    return it == controls.end() ? none_ : it->second;
  }
  void Grant(FlowId flow, uint64_t bytes, uint32_t pieces) override {
    credit[flow].bytes += bytes;
    credit[flow].pieces += pieces;
    grants.push_back({flow, bytes});
  }
  uint64_t credit_bytes(FlowId flow) const override {
    auto it = credit.find(flow);
    return it == credit.end() ? 0 : it->second.bytes;
  }
  void ReleaseAt(FlowId flow, Nanos t) override { release_at[flow] = t; }
  void WakeAt(Nanos t) override { wake_at = t; }
  bool SendProbe(DestId dest) override {
    if (!probe_paths) return false;
    probes.push_back(dest);
    return true;
  }
  bool SendPeerMessage(DestId dest, const PeerMessage& m) override {
    peer.push_back({dest, m});
    return peer_channel;
  }
  const FlowAccount& flow_account(FlowId flow) const override {
    auto it = flow_accounts.find(flow);
    return it == flow_accounts.end() ? no_flow_ : it->second;
  }
  const TenantAccount& tenant_account(TenantId t) const override {
    auto it = tenant_accounts.find(t);
    return it == tenant_accounts.end() ? no_tenant_ : it->second;
  }
  bool cross_channel() const override { return has_cross_channel; }
  bool rnic_pause() const override { return has_rnic_pause; }

  // What the policy asked for.
  std::map<FlowId, FlowControl> controls;
  std::map<FlowId, Credit> credit;
  std::vector<std::pair<FlowId, uint64_t>> grants;
  std::map<FlowId, Nanos> release_at;
  Nanos wake_at = kNever;
  std::vector<DestId> probes;
  std::vector<std::pair<DestId, PeerMessage>> peer;
  int configures = 0;
  // What the test sets.
  std::map<FlowId, FlowAccount> flow_accounts;
  std::map<TenantId, TenantAccount> tenant_accounts;
  bool has_cross_channel = false;
  bool has_rnic_pause = false;  // a preemption control queue exists
  bool probe_paths = true;
  bool peer_channel = true;

 private:
  FlowControl none_{};
  FlowAccount no_flow_{};
  TenantAccount no_tenant_{};
};

}  // namespace vrdma::policy::testing

#endif  // VRDMA_POLICY_TESTING_FAKE_MECHANISMS_H_
