// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/daemon/libvirt_metadata.h"

#include <string>

#include "gtest/gtest.h"

namespace vrdma::daemon {
namespace {

using nlohmann::json;

// The domain of docs/operators.md, section 3, reduced to what is read.
std::string Domain(const std::string& metadata, const std::string& args) {
  return R"(<domain type="qemu" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
  <name>tenant-a</name>
  <metadata>
    <other:app xmlns:other="https://example.org/other"><x/></other:app>
)" + metadata + R"(
  </metadata>
  <devices><disk type="file"/></devices>
  <qemu:commandline>
)" + args + R"(
  </qemu:commandline>
</domain>)";
}

const char kArgs[] = R"(
    <qemu:arg value="-L"/><qemu:arg value="/usr/share/qemu"/>
    <qemu:arg value="-chardev"/>
    <qemu:arg value="socket,id=vrdma0,path=/run/vhost-rdma/tenant-a.sock,reconnect-ms=1000"/>
    <qemu:arg value="-device"/>
    <qemu:arg value="vhost-user-rdma-pci,chardev=vrdma0,queue-size=256"/>)";

const char kMeta[] = R"(<vrdma:vrdma xmlns:vrdma="https://vhost-rdma.org/xmlns/vrdma/1">
      <vrdma:gid>::ffff:192.0.2.10</vrdma:gid>
      <vrdma:gid> fe80::2 </vrdma:gid>
      <vrdma:mac>52:54:00:12:34:56</vrdma:mac>
      <vrdma:quotas max_qp="64"/>
      <vrdma:qos weight="2" max_rate_bps="10e9" class="latency"/>
    </vrdma:vrdma>)";

TEST(LibvirtMetadata, DomainBecomesAnAttachRequest) {
  json req;
  std::string error;
  ASSERT_EQ(DomainToAttachRequest(Domain(kMeta, kArgs), &req, &error), DomainVerdict::kAttach)
      << error;
  EXPECT_EQ(req["cmd"], "attach-vm");
  EXPECT_EQ(req["name"], "tenant-a");
  EXPECT_EQ(req["socket"], "/run/vhost-rdma/tenant-a.sock");
  EXPECT_EQ(req["gids"], json({"::ffff:192.0.2.10", "fe80::2"}));
  EXPECT_EQ(req["mac"], "52:54:00:12:34:56");
  EXPECT_EQ(req["quotas"], json({{"max_qp", 64}}));
  // Numbers stay numbers (10e9 is a JSON number), names stay strings: the
  // control socket's ParseQos judges them.
  EXPECT_TRUE(req["qos"]["max_rate_bps"].is_number());
  EXPECT_EQ(req["qos"]["max_rate_bps"].get<double>(), 10e9);
  EXPECT_EQ(req["qos"]["weight"], 2);
  EXPECT_EQ(req["qos"]["class"], "latency");
}

TEST(LibvirtMetadata, ChildrenWithoutPrefixAreRead) {
  json req;
  std::string error;
  const std::string meta = R"(<vrdma xmlns="https://vhost-rdma.org/xmlns/vrdma/1">
      <gid>::1</gid><qos weight="3"/></vrdma>)";
  ASSERT_EQ(DomainToAttachRequest(Domain(meta, kArgs), &req, &error), DomainVerdict::kAttach)
      << error;
  EXPECT_EQ(req["gids"], json({"::1"}));
  EXPECT_EQ(req["qos"]["weight"], 3);
}

TEST(LibvirtMetadata, OtherDomainsAreNotOurs) {
  json req;
  std::string error;
  EXPECT_EQ(DomainToAttachRequest(Domain("", R"(<qemu:arg value="-S"/>)"), &req, &error),
            DomainVerdict::kNotOurs);
  EXPECT_EQ(DomainToAttachRequest("<domain><name>x</name></domain>", &req, &error),
            DomainVerdict::kNotOurs);
}

// Each broken domain is refused with a reason naming what is wrong.
TEST(LibvirtMetadata, BrokenDomainsAreRefusedWithAReason) {
  const std::string socket_only = R"(<qemu:arg value="-chardev"/>
      <qemu:arg value="socket,id=vrdma0,path=/run/a.sock"/>)";
  struct Case {
    std::string xml;
    std::string says;
  } cases[] = {
      {Domain("", kArgs), "no <metadata> element in https://vhost-rdma.org/xmlns/vrdma/1"},
      {Domain(kMeta, socket_only), "but 0 vhost-user-rdma-pci devices"},
      {Domain(kMeta, std::string(kArgs) + kArgs), "but 2 vhost-user-rdma-pci devices"},
      {Domain(kMeta, R"(<qemu:arg value="-device"/>
          <qemu:arg value="vhost-user-rdma-pci,chardev=nope"/>)"),
       "chardev \"nope\" is not a -chardev socket"},
      {Domain(R"(<v:vrdma xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1"><v:qos/></v:vrdma>)",
              kArgs),
       "names no <gid>"},
      {Domain(R"(<v:vrdma xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1"><v:gid>::1</v:gid>
          <v:gids/></v:vrdma>)", kArgs),
       "unknown element <gids>"},
      {Domain(R"(<v:vrdma xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1"><v:gid>::1</v:gid>
          <v:qos/><v:qos/></v:vrdma>)", kArgs),
       "more than one <qos>"},
      {Domain(R"(<v:qos xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1" weight="2"/>)", kArgs),
       "a bare <qos>"},
      {Domain(R"(<v:config xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1"/>)", kArgs),
       "must be <vrdma>"},
      {Domain(kMeta, R"(<qemu:arg value="-device"/>
          <qemu:arg value="vhost-user-rdma-pci,chardev=a,,b"/>)"),
       "escaped comma"},
      {"<domain><name>x</name>", "not well-formed XML"},
      {"<network/>", "not a libvirt domain"},
  };
  for (const Case& c : cases) {
    json req;
    std::string error;
    EXPECT_EQ(DomainToAttachRequest(c.xml, &req, &error), DomainVerdict::kInvalid) << c.says;
    EXPECT_NE(error.find(c.says), std::string::npos) << "error: " << error << "\nwant: " << c.says;
  }
}

// An entity defined in the document is not expanded (no billion laughs, no
// external files).
TEST(LibvirtMetadata, EntitiesAreNotExpanded) {
  const std::string xml = R"(<?xml version="1.0"?>
<!DOCTYPE domain [<!ENTITY e SYSTEM "file:///etc/passwd">]>
<domain><name>&e;</name></domain>)";
  json req;
  std::string error;
  EXPECT_EQ(DomainToAttachRequest(xml, &req, &error), DomainVerdict::kNotOurs);
}

TEST(LibvirtMetadata, LiveQosFromEitherForm) {
  json qos;
  std::string error;
  ASSERT_TRUE(MetadataToQos(
      R"(<vrdma:qos xmlns:vrdma="https://vhost-rdma.org/xmlns/vrdma/1" max_rate_bps="2e9"/>)",
      &qos, &error))
      << error;
  EXPECT_EQ(qos, json({{"max_rate_bps", 2e9}}));
  ASSERT_TRUE(MetadataToQos(kMeta, &qos, &error)) << error;
  EXPECT_EQ(qos["weight"], 2);
  // <vrdma> without <qos>: the default QoS.
  ASSERT_TRUE(MetadataToQos(
      R"(<v:vrdma xmlns:v="https://vhost-rdma.org/xmlns/vrdma/1"><v:gid>::1</v:gid></v:vrdma>)",
      &qos, &error));
  EXPECT_EQ(qos, json::object());
  // Bad values are passed on as they are, for ParseQos to refuse.
  ASSERT_TRUE(MetadataToQos(R"(<qos weight="-1" max_rate_bps="lots" extra="1"/>)", &qos, &error));
  EXPECT_EQ(qos, json({{"weight", -1}, {"max_rate_bps", "lots"}, {"extra", 1}}));
  EXPECT_FALSE(MetadataToQos("<limits/>", &qos, &error));
  EXPECT_NE(error.find("must be <vrdma>"), std::string::npos) << error;
  EXPECT_FALSE(MetadataToQos("<qos", &qos, &error));
}

}  // namespace
}  // namespace vrdma::daemon
