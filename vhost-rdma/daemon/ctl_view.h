// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-ctl's human views of the daemon's stats reply (daemon.h): plain
// text tables for `vms`, `stats VM` and `qos VM`; `--json` prints the JSON
// instead. Pure formatting, no I/O.
#ifndef VRDMA_VHOST_RDMA_DAEMON_CTL_VIEW_H_
#define VRDMA_VHOST_RDMA_DAEMON_CTL_VIEW_H_

#include <string>

#include <nlohmann/json.hpp>

namespace vrdma::daemon {

// The VM named `name` in a stats reply, or null.
nlohmann::json FindVmStats(const nlohmann::json& stats, const std::string& name);
// One line per VM: name, connection, objects, memory, traffic, QoS.
std::string VmsTable(const nlohmann::json& stats);
// Every number and text of one VM's stats entry, one "key value" line each,
// nested objects flattened ("scheduler.held_ns").
std::string VmStatsText(const nlohmann::json& vm);
// The QoS asked, what the policy (named `policy`) applies of it, and the
// last change.
std::string QosText(const nlohmann::json& vm, const std::string& policy);

// vrdma-ctl top: per-VM rates between two stats replies `dt_s` seconds
// apart: completed WRs/s and payload Gb/s, the interval's mean completion
// latency, the share of the interval the policy held the VM's work back,
// paced bytes/s and the queue depth now. As JSON ({"vms":[{...}]}), and as
// a table.
nlohmann::json TopRates(const nlohmann::json& prev, const nlohmann::json& cur, double dt_s);
std::string TopTable(const nlohmann::json& rates);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_CTL_VIEW_H_
