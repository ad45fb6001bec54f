// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The daemon's libvirt watcher (--libvirt-uri; docs/operators.md, section
// 3): a thread of its own that follows libvirt through its C API and turns
// what it sees into ordinary control-socket requests, so that libvirt input
// takes exactly the path (and the checks) of any operator's:
//   - a metadata-change event of a running domain in the vrdma namespace
//     (virsh metadata DOMAIN --uri https://vhost-rdma.org/xmlns/vrdma/1
//     --key vrdma --set '<qos .../>' --live): the domain's live metadata is
//     read and sent as set-qos with "replace":true and "source":"libvirt"
//     (metadata declares the whole QoS); an unreadable element as set-qos
//     with "invalid", so the refusal shows in stats too;
//   - when it connects (the daemon started, or libvirtd came back): every
//     running domain with the device that the daemon does not know is
//     attached from its XML (a restarted daemon gets its VMs back, and
//     their QEMUs reconnect with reconnect-ms), and every known one gets
//     its live metadata's QoS.
// libvirt's default event loop (virEventRegisterDefaultImpl) runs on this
// thread; the daemon's control thread never waits for libvirt.
#ifndef VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_WATCH_H_
#define VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_WATCH_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace vrdma::daemon {

class LibvirtWatcher {
 public:
  // Starts the thread: it connects to `uri` (read-only; retrying every 2 s
  // while libvirtd is away) and talks to the daemon at `control_socket`.
  static std::unique_ptr<LibvirtWatcher> Start(const std::string& uri,
                                               const std::string& control_socket);
  // Stops the thread (within ~100 ms, or a control request's timeout).
  ~LibvirtWatcher();

  LibvirtWatcher(const LibvirtWatcher&) = delete;
  LibvirtWatcher& operator=(const LibvirtWatcher&) = delete;

 private:
  LibvirtWatcher(std::string uri, std::string control_socket)
      : uri_(std::move(uri)), control_socket_(std::move(control_socket)) {}
  void Run();

  const std::string uri_;
  const std::string control_socket_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_WATCH_H_
