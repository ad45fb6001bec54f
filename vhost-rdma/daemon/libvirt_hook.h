// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// vrdma-ctl libvirt-hook: libvirt's QEMU hook for vhost-rdma
// (scripts/libvirt-hook/vhost-rdma runs it; docs/operators.md, section 3).
// libvirt calls it as `<hook> DOMAIN OPERATION SUB-OPERATION EXTRA` with the
// domain's XML on stdin:
//   prepare begin  attach the VM on the daemon (attach-vm from the domain's
//                  metadata and its vhost-user socket, libvirt_metadata.h);
//                  any failure exits 1 with the reason on stderr, and
//                  libvirt then refuses to start the domain and prints it;
//   release end    detach the VM (errors are reported, the exit is 0:
//                  libvirt ignores it there);
//   anything else  nothing.
// Domains without the device and the metadata are not touched.
#ifndef VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_HOOK_H_
#define VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_HOOK_H_

#include <string>
#include <vector>

namespace vrdma::daemon {

// Returns the hook's exit status; `domain_xml`: what libvirt wrote on
// stdin. Never writes to stdout (libvirt would take it as a new domain XML
// for some operations); reasons go to stderr.
int RunLibvirtHook(const std::string& control_socket, const std::vector<std::string>& args,
                   const std::string& domain_xml);
// All of stdin (up to 8 MiB kept; the rest is read and dropped, so libvirt
// never blocks writing it).
std::string ReadHookStdin();

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_HOOK_H_
