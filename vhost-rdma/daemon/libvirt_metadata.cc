// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/libvirt_metadata.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace vrdma::daemon {
namespace {

using nlohmann::json;

constexpr char kQemuXmlns[] = "http://libvirt.org/schemas/domain/qemu/1.0";
constexpr char kDeviceModel[] = "vhost-user-rdma-pci";
// A domain's XML is a few KB; refuse anything absurd before parsing it.
constexpr size_t kMaxXmlBytes = 4 << 20;

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using Doc = std::unique_ptr<xmlDoc, DocFree>;

Doc Parse(std::string_view xml, std::string* error) {
  if (xml.size() > kMaxXmlBytes) {
    *error = "XML larger than 4 MiB";
    return nullptr;
  }
  // No network, no entity expansion, no DTD loading; errors are ours to
  // report, not libxml2's to print.
  Doc doc(xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "domain.xml", nullptr,
                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (!doc) {
    const xmlError* e = xmlGetLastError();
    *error = std::string("not well-formed XML") +
             (e && e->message ? std::string(": ") + e->message : std::string());
    while (!error->empty() && error->back() == '\n') error->pop_back();
  }
  return doc;
}

std::string_view Name(const xmlNode* n) { return reinterpret_cast<const char*>(n->name); }

bool InNs(const xmlNode* n, const char* href) {
  return n->ns != nullptr && n->ns->href != nullptr &&
         std::strcmp(reinterpret_cast<const char*>(n->ns->href), href) == 0;
}

std::vector<xmlNode*> Elements(xmlNode* parent) {
  std::vector<xmlNode*> out;
  for (xmlNode* c = parent ? parent->children : nullptr; c; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) out.push_back(c);
  }
  return out;
}

xmlNode* Child(xmlNode* parent, std::string_view name, const char* ns = nullptr) {
  for (xmlNode* c : Elements(parent)) {
    if (Name(c) == name && (ns == nullptr ? c->ns == nullptr : InNs(c, ns))) return c;
  }
  return nullptr;
}

std::string Text(xmlNode* n) {
  xmlChar* t = xmlNodeGetContent(n);
  std::string s = t ? reinterpret_cast<const char*>(t) : "";
  xmlFree(t);
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// An element's children of ours are in our namespace, or in none (written
// inside <vrdma:vrdma> without a prefix).
bool OursOrNone(const xmlNode* n) { return n->ns == nullptr || InNs(n, kVrdmaXmlns); }

// Attributes to JSON members: a value that parses as a JSON number is that
// number (so "25e9" and "-1" reach the control socket's checks as numbers),
// anything else stays a string (a class name, or a typo the checks name).
json AttributesJson(xmlNode* n) {
  json out = json::object();
  for (xmlAttr* a = n->properties; a; a = a->next) {
    xmlChar* v = xmlNodeListGetString(n->doc, a->children, 1);
    const std::string value = v ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
    out[reinterpret_cast<const char*>(a->name)] =
        !parsed.is_discarded() && parsed.is_number() ? parsed : json(value);
  }
  return out;
}

// <vrdma> (or a bare <qos>): fills gids/quotas/qos of *request.
bool ReadVrdmaElement(xmlNode* root, bool want_gids, json* request, std::string* error) {
  if (Name(root) == "qos") {
    if (want_gids) {
      *error = "metadata: a bare <qos> (a live change saved with --config?): starting a domain "
               "needs <vrdma> with its <gid>s";
      return false;
    }
    (*request)["qos"] = AttributesJson(root);
    return true;
  }
  if (Name(root) != kVrdmaXmlKey) {
    *error = "metadata: the element in " + std::string(kVrdmaXmlns) + " must be <vrdma> (or <qos> "
             "for a live QoS change), not <" + std::string(Name(root)) + ">";
    return false;
  }
  json gids = json::array();
  for (xmlNode* c : Elements(root)) {
    const std::string name(Name(c));
    if (!OursOrNone(c) ||
        (name != "gid" && name != "mac" && name != "qos" && name != "quotas")) {
      *error = "metadata: unknown element <" + name + "> in <vrdma> (known: gid, mac, quotas, qos)";
      return false;
    }
    if (name == "gid") {
      gids.push_back(Text(c));
    } else if (request->contains(name)) {
      *error = "metadata: more than one <" + name + ">";
      return false;
    } else if (name == "mac") {
      (*request)["mac"] = Text(c);
    } else {
      (*request)[name] = AttributesJson(c);
    }
  }
  if (want_gids) {
    if (gids.empty()) {
      *error = "metadata: <vrdma> names no <gid> (the VM's RoCEv2 GIDs, e.g. "
               "<vrdma:gid>::ffff:192.0.2.10</vrdma:gid>)";
      return false;
    }
    (*request)["gids"] = gids;
  }
  return true;
}

// "key=value,key=value" of a QEMU option (after its first, driver part);
// QEMU's ",," escape is not supported: false when it appears.
std::optional<json> QemuOpts(std::string_view value, std::string* driver) {
  if (value.find(",,") != std::string_view::npos) return std::nullopt;
  json opts = json::object();
  size_t pos = 0;
  bool first = true;
  while (pos <= value.size()) {
    size_t end = value.find(',', pos);
    if (end == std::string_view::npos) end = value.size();
    const std::string_view part = value.substr(pos, end - pos);
    const size_t eq = part.find('=');
    if (first && eq == std::string_view::npos) {
      *driver = std::string(part);
    } else if (eq != std::string_view::npos) {
      opts[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    }
    first = false;
    pos = end + 1;
  }
  return opts;
}

}  // namespace

DomainVerdict DomainToAttachRequest(std::string_view domain_xml, json* request,
                                    std::string* error) {
  Doc doc = Parse(domain_xml, error);
  if (!doc) return DomainVerdict::kInvalid;
  xmlNode* domain = xmlDocGetRootElement(doc.get());
  if (domain == nullptr || Name(domain) != "domain") {
    *error = "not a libvirt domain (root element is not <domain>)";
    return DomainVerdict::kInvalid;
  }
  // Ours: the metadata element, or the device on the QEMU command line.
  xmlNode* meta = nullptr;
  if (xmlNode* m = Child(domain, "metadata")) {
    for (xmlNode* c : Elements(m)) {
      if (InNs(c, kVrdmaXmlns)) meta = c;
    }
  }
  std::vector<std::string> args;
  if (xmlNode* cl = Child(domain, "commandline", kQemuXmlns)) {
    for (xmlNode* a : Elements(cl)) {
      if (Name(a) != "arg" || !InNs(a, kQemuXmlns)) continue;
      xmlChar* v = xmlGetProp(a, reinterpret_cast<const xmlChar*>("value"));
      args.emplace_back(v ? reinterpret_cast<const char*>(v) : "");
      xmlFree(v);
    }
  }
  std::vector<json> devices;
  json chardevs = json::object();  // id -> {driver, opts}
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "-device" && args[i] != "-chardev") continue;
    const std::string_view value = args[i + 1];
    std::string driver(value.substr(0, value.find(',')));
    auto opts = QemuOpts(value, &driver);
    const bool is_device = args[i] == "-device";
    if (is_device && driver != kDeviceModel) continue;
    if (!opts) {
      *error = "qemu:commandline: \",,\" (an escaped comma) in \"" + args[i + 1] +
               "\" is not supported";
      return DomainVerdict::kInvalid;
    }
    if (is_device) {
      devices.push_back(*opts);
    } else if (opts->contains("id")) {
      chardevs[(*opts)["id"].get<std::string>()] = json{{"driver", driver}, {"opts", *opts}};
    }
  }
  if (meta == nullptr && devices.empty()) return DomainVerdict::kNotOurs;

  xmlNode* name = Child(domain, "name");
  const std::string vm_name = name ? Text(name) : "";
  const std::string where = "domain " + vm_name + ": ";
  if (meta == nullptr) {
    *error = where + "has a " + kDeviceModel + " device but no <metadata> element in " +
             kVrdmaXmlns + " (its GIDs and QoS: docs/operators.md, section 3)";
    return DomainVerdict::kInvalid;
  }
  if (devices.size() != 1) {
    *error = where + "has vhost-rdma metadata but " + std::to_string(devices.size()) + " " +
             kDeviceModel + " devices in <qemu:commandline> (exactly one is served)";
    return DomainVerdict::kInvalid;
  }
  const json& dev = devices[0];
  const std::string chardev_id = dev.value("chardev", "");
  auto cd = chardevs.find(chardev_id);
  if (chardev_id.empty() || cd == chardevs.end() || (*cd)["driver"] != "socket" ||
      !(*cd)["opts"].contains("path")) {
    *error = where + kDeviceModel + "'s chardev \"" + chardev_id +
             "\" is not a -chardev socket,id=...,path=... in <qemu:commandline>";
    return DomainVerdict::kInvalid;
  }
  json req{{"cmd", "attach-vm"},
           {"name", vm_name},
           {"socket", (*cd)["opts"]["path"].get<std::string>()}};
  std::string why;
  if (!ReadVrdmaElement(meta, /*want_gids=*/true, &req, &why)) {
    *error = where + why;
    return DomainVerdict::kInvalid;
  }
  *request = std::move(req);
  return DomainVerdict::kAttach;
}

bool MetadataToQos(std::string_view metadata_xml, json* qos, std::string* error) {
  Doc doc = Parse(metadata_xml, error);
  if (!doc) return false;
  xmlNode* root = xmlDocGetRootElement(doc.get());
  if (root == nullptr) {
    *error = "metadata: empty";
    return false;
  }
  json parts = json::object();
  if (!ReadVrdmaElement(root, /*want_gids=*/false, &parts, error)) return false;
  *qos = parts.value("qos", json::object());
  return true;
}

}  // namespace vrdma::daemon
