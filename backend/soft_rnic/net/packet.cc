// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The packet header's layout and its syntax checks.
//
//   0 version      1 opcode      2 flags       3 syndrome
//   4 payload_len (16)           6 traffic_class  7 hop_limit
//   8 dest_qpn    12 src_qpn    16 psn        20 flow_label
//  24 qkey        28 imm        32 remote_addr (64)
//  40 rkey        44 dma_len    48 compare_add (64)  56 swap (64)
//  64 dgid (16)   80 sgid (16)  96 payload
#include "backend/soft_rnic/net/packet.h"

#include <cstring>

namespace vrdma::soft::net {
namespace {

template <typename T>
void Put(uint8_t* out, uint32_t off, T v) {
  // Little endian on the wire; every host here is little endian x86-64.
  std::memcpy(out + off, &v, sizeof(T));
}

template <typename T>
T Get(const uint8_t* in, uint32_t off) {
  T v;
  std::memcpy(&v, in + off, sizeof(T));
  return v;
}

constexpr uint32_t k24 = 0xffffff;

}  // namespace

OpInfo OpInfoOf(uint8_t opcode) {
  const uint8_t t = opcode & kTransportMask;
  const uint8_t op = opcode & ~kTransportMask;
  constexpr bool T = true;
  OpInfo i;
  switch (op) {
    case kSendFirst: i = {.valid = T, .send = T, .first = T}; break;
    case kSendMiddle: i = {.valid = T, .send = T}; break;
    case kSendLast: i = {.valid = T, .send = T, .last = T}; break;
    case kSendLastImm: i = {.valid = T, .send = T, .last = T, .imm = T}; break;
    case kSendOnly: i = {.valid = T, .send = T, .first = T, .last = T}; break;
    case kSendOnlyImm:
      i = {.valid = T, .send = T, .first = T, .last = T, .imm = T};
      break;
    case kSendLastInv: i = {.valid = T, .send = T, .last = T, .inv = T}; break;
    case kSendOnlyInv:
      i = {.valid = T, .send = T, .first = T, .last = T, .inv = T};
      break;
    case kWriteFirst: i = {.valid = T, .write = T, .first = T, .reth = T}; break;
    case kWriteMiddle: i = {.valid = T, .write = T}; break;
    case kWriteLast: i = {.valid = T, .write = T, .last = T}; break;
    case kWriteLastImm: i = {.valid = T, .write = T, .last = T, .imm = T}; break;
    case kWriteOnly:
      i = {.valid = T, .write = T, .first = T, .last = T, .reth = T};
      break;
    case kWriteOnlyImm:
      i = {.valid = T, .write = T, .first = T, .last = T, .imm = T, .reth = T};
      break;
    case kReadRequest: i = {.valid = T, .first = T, .last = T, .reth = T}; break;
    case kReadResponseFirst: i = {.valid = T, .first = T}; break;
    case kReadResponseMiddle: i = {.valid = T}; break;
    case kReadResponseLast: i = {.valid = T, .last = T}; break;
    case kReadResponseOnly:
    case kAcknowledge:
    case kAtomicAcknowledge:
    case kCmpSwap:
    case kFetchAdd:
      i = {.valid = T, .first = T, .last = T};
      break;
    default:
      return OpInfo{};
  }
  switch (t) {
    case kRc:
      return i;
    case kUc:
      return (op <= kWriteOnlyImm || op == kSendLastInv || op == kSendOnlyInv)
                 ? i
                 : OpInfo{};
    case kUd:
      return (op == kSendOnly || op == kSendOnlyImm) ? i : OpInfo{};
    default:
      return OpInfo{};
  }
}

Op RequestOp(WrOpcode op, bool first, bool last) {
  const bool write =
      op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm;
  if (first && last) {
    switch (op) {
      case WrOpcode::kRdmaWrite: return kWriteOnly;
      case WrOpcode::kRdmaWriteWithImm: return kWriteOnlyImm;
      case WrOpcode::kSendWithImm: return kSendOnlyImm;
      case WrOpcode::kSendWithInv: return kSendOnlyInv;
      default: return kSendOnly;
    }
  }
  if (first) return write ? kWriteFirst : kSendFirst;
  if (!last) return write ? kWriteMiddle : kSendMiddle;
  switch (op) {
    case WrOpcode::kRdmaWrite: return kWriteLast;
    case WrOpcode::kRdmaWriteWithImm: return kWriteLastImm;
    case WrOpcode::kSendWithImm: return kSendLastImm;
    case WrOpcode::kSendWithInv: return kSendLastInv;
    default: return kSendLast;
  }
}

void EncodeHeader(const Header& h, uint8_t* out) {
  Put<uint8_t>(out, 0, kVersion);
  Put<uint8_t>(out, 1, h.opcode);
  Put<uint8_t>(out, 2, h.flags);
  Put<uint8_t>(out, 3, h.syndrome);
  Put<uint16_t>(out, 4, h.payload_len);
  Put<uint8_t>(out, 6, h.traffic_class);
  Put<uint8_t>(out, 7, h.hop_limit);
  Put<uint32_t>(out, 8, h.dest_qpn);
  Put<uint32_t>(out, 12, h.src_qpn);
  Put<uint32_t>(out, 16, h.psn);
  Put<uint32_t>(out, 20, h.flow_label);
  Put<uint32_t>(out, 24, h.qkey);
  Put<uint32_t>(out, 28, h.imm);
  Put<uint64_t>(out, 32, h.remote_addr);
  Put<uint32_t>(out, 40, h.rkey);
  Put<uint32_t>(out, 44, h.dma_len);
  Put<uint64_t>(out, 48, h.compare_add);
  Put<uint64_t>(out, 56, h.swap);
  std::memcpy(out + 64, h.dgid.data(), 16);
  std::memcpy(out + 80, h.sgid.data(), 16);
}

Check Decode(std::span<const uint8_t> packet, Header* h) {
  if (packet.size() < kHeaderBytes) return Check::kShort;
  const uint8_t* in = packet.data();
  if (Get<uint8_t>(in, 0) != kVersion) return Check::kVersion;
  h->payload_len = Get<uint16_t>(in, 4);
  if (h->payload_len > kMaxPayload ||
      h->payload_len != packet.size() - kHeaderBytes) {
    return Check::kLength;
  }
  h->opcode = Get<uint8_t>(in, 1);
  if (!OpInfoOf(h->opcode).valid) return Check::kOpcode;
  h->flags = Get<uint8_t>(in, 2);
  h->syndrome = Get<uint8_t>(in, 3);
  h->traffic_class = Get<uint8_t>(in, 6);
  h->hop_limit = Get<uint8_t>(in, 7);
  h->dest_qpn = Get<uint32_t>(in, 8);
  h->src_qpn = Get<uint32_t>(in, 12);
  h->psn = Get<uint32_t>(in, 16);
  h->flow_label = Get<uint32_t>(in, 20);
  if ((h->flags & ~kKnownFlags) != 0 || h->dest_qpn > k24 ||
      h->src_qpn > k24 || h->psn > k24 || h->flow_label > 0xfffff) {
    return Check::kField;
  }
  h->qkey = Get<uint32_t>(in, 24);
  h->imm = Get<uint32_t>(in, 28);
  h->remote_addr = Get<uint64_t>(in, 32);
  h->rkey = Get<uint32_t>(in, 40);
  h->dma_len = Get<uint32_t>(in, 44);
  h->compare_add = Get<uint64_t>(in, 48);
  h->swap = Get<uint64_t>(in, 56);
  std::memcpy(h->dgid.data(), in + 64, 16);
  std::memcpy(h->sgid.data(), in + 80, 16);
  return Check::kOk;
}

}  // namespace vrdma::soft::net
