// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What a libvirt domain says about its vhost-rdma device, read from its XML
// (docs/operators.md, "3. libvirt"): the VM's GIDs, quotas and QoS from the
// domain's <metadata> element in the project's namespace, and the vhost-user
// socket from the -chardev that the vhost-user-rdma-pci device of its
// <qemu:commandline> uses. The libvirt hook (vrdma-ctl libvirt-hook) and the
// daemon's libvirt watcher (libvirt_watch.h) both read domains only here.
//
//   <metadata>
//     <vrdma:vrdma xmlns:vrdma="https://vhost-rdma.org/xmlns/vrdma/1">
//       <vrdma:gid>::ffff:192.0.2.10</vrdma:gid>          1 or more
//       <vrdma:quotas max_qp="64" max_pinned_bytes="1073741824"/>   optional
//       <vrdma:qos weight="2" max_rate_bps="10e9" class="latency"/> optional
//     </vrdma:vrdma>
//   </metadata>
//
// A live QoS change (virsh metadata --key vrdma --set '<qos .../>') replaces
// the namespace's element with a bare <qos>: both forms are read.
//
// This file only translates syntax: XML attributes become JSON members (a
// value that reads as a JSON number becomes that number, anything else a
// string), so every rule about the values is the control socket's own
// (vm_request.h's ParseAttachRequest / ParseQos), applied by the daemon.
// Control path only; libxml2 parses, without network or entity expansion.
#ifndef VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_METADATA_H_
#define VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_METADATA_H_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace vrdma::daemon {

// The XML namespace of the metadata element, and the key (prefix) virsh
// uses for it.
inline constexpr char kVrdmaXmlns[] = "https://vhost-rdma.org/xmlns/vrdma/1";
inline constexpr char kVrdmaXmlKey[] = "vrdma";

enum class DomainVerdict {
  kNotOurs,   // neither the metadata element nor a vhost-user-rdma-pci device
  kAttach,    // *request is a complete attach-vm request
  kInvalid,   // ours, but broken: *error says why (the domain must not start)
};

// A domain's XML (as libvirt hands it to a hook on stdin, or
// virDomainGetXMLDesc) to an attach-vm request for the control socket:
// {"cmd":"attach-vm","name":...,"socket":...,"gids":[...],"quotas":{...},
//  "qos":{...}}.
DomainVerdict DomainToAttachRequest(std::string_view domain_xml, nlohmann::json* request,
                                    std::string* error);

// The namespace's metadata element (virDomainGetMetadata's answer: a
// <vrdma> element or a bare <qos>) to the QoS it declares, as a qos object
// of the control socket (only the attributes given; the rest are the
// defaults). False with *error when it is not one of the two forms.
bool MetadataToQos(std::string_view metadata_xml, nlohmann::json* qos, std::string* error);

}  // namespace vrdma::daemon

#endif  // VRDMA_VHOST_RDMA_DAEMON_LIBVIRT_METADATA_H_
