// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Decode: the header's checks, then the body's, each body by one function
// that checks its size first and its reserved bytes last. Encode writes
// the bytes and accepts them only if Decode does, so every rule on a field
// lives in Decode alone.
#include "backend/peer_channel/peer_message.h"

#include <cstring>

#include "backend/base/byte_order.h"

namespace vrdma::peer {
namespace {

bool Zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

constexpr uint32_t k24 = 0xffffff;
bool QpnOk(uint32_t q) { return q <= k24 && q > 1; }
bool PsnOk(uint32_t p) { return p <= k24; }

// Body sizes of the fixed-size types, by MsgType value (0: none; GIDS is
// checked by its count).
constexpr size_t kBodyBytes[] = {0, 8, 32, 0, 40, 40, 16, 32, 16, 8, 8, 8, 8};
constexpr uint8_t kMaxType = static_cast<uint8_t>(MsgType::kCredit);

PeerCheck DecodeHello(const uint8_t* b, Hello* h) {
  h->unit_size = LoadLe32(b);
  h->ack_qpn = LoadLe32(b + 4);
  h->ack_qkey = LoadLe32(b + 8);
  std::memcpy(h->ack_gid.data(), b + 16, 16);
  if (h->unit_size != kUnitSize) return PeerCheck::kUnitSize;
  // No ACK QP at all: a daemon without the layer.
  const bool none = h->ack_qpn == 0 && h->ack_qkey == 0 && h->ack_gid == Gid{};
  if (!none && !QpnOk(h->ack_qpn)) return PeerCheck::kQpn;
  if (!none && h->ack_gid == Gid{}) return PeerCheck::kZeroGid;
  if (!Zero(b + 12, 4)) return PeerCheck::kReserved;
  return PeerCheck::kOk;
}

PeerCheck DecodeGids(std::span<const uint8_t> body, Gids* g) {
  if (body.size() < kGidsFixedBytes) return PeerCheck::kBodyLength;
  const uint8_t* b = body.data();
  if (b[0] != 1 && b[0] != 2) return PeerCheck::kGidOp;
  g->add = b[0] == 1;
  g->count = b[1];
  if (g->count == 0 || g->count > kMaxGidsPerMessage) return PeerCheck::kGidCount;
  if (body.size() != kGidsFixedBytes + size_t{16} * g->count) return PeerCheck::kBodyLength;
  if (!Zero(b + 2, 6)) return PeerCheck::kReserved;
  g->gids = {};
  for (uint32_t i = 0; i < g->count; ++i) {
    std::memcpy(g->gids[i].data(), b + kGidsFixedBytes + 16 * i, 16);
    if (g->gids[i] == Gid{}) return PeerCheck::kZeroGid;
    // At most 30 x 29 / 2 comparisons of 16 bytes.
    for (uint32_t j = 0; j < i; ++j) {
      if (g->gids[j] == g->gids[i]) return PeerCheck::kDuplicateGid;
    }
  }
  return PeerCheck::kOk;
}

PeerCheck DecodeConnect(const uint8_t* b, Connect* c) {
  c->src_vqpn = LoadLe32(b);
  c->dst_vqpn = LoadLe32(b + 4);
  c->data_qpn = LoadLe32(b + 8);
  c->data_psn = LoadLe32(b + 12);
  c->backup_qpn = LoadLe32(b + 16);
  c->backup_psn = LoadLe32(b + 20);
  c->conn_token = LoadLe32(b + 24);
  c->mode = static_cast<Mode>(b[28]);
  c->rnr_retry = b[29];
  c->retry_budget_ns = LoadLe64(b + 32);
  if (!QpnOk(c->src_vqpn) || !QpnOk(c->dst_vqpn) || !QpnOk(c->data_qpn) ||
      !QpnOk(c->backup_qpn)) {
    return PeerCheck::kQpn;
  }
  if (!PsnOk(c->data_psn) || !PsnOk(c->backup_psn)) return PeerCheck::kPsn;
  // A framed mode: native pairs answer CONNECT_NATIVE, they are not asked.
  if (c->mode != Mode::kRc && c->mode != Mode::kUc) return PeerCheck::kMode;
  if (c->rnr_retry > 7) return PeerCheck::kRnrRetry;
  if (c->conn_token == 0) return PeerCheck::kToken;
  if (c->retry_budget_ns == 0) return PeerCheck::kRetryBudget;
  if (!Zero(b + 30, 2)) return PeerCheck::kReserved;
  return PeerCheck::kOk;
}

PeerCheck DecodeConnectNative(const uint8_t* b, ConnectNative* c) {
  c->src_vqpn = LoadLe32(b);
  c->dst_vqpn = LoadLe32(b + 4);
  c->conn_token = LoadLe32(b + 8);
  if (!QpnOk(c->src_vqpn) || !QpnOk(c->dst_vqpn)) return PeerCheck::kQpn;
  if (c->conn_token == 0) return PeerCheck::kToken;
  if (!Zero(b + 12, 4)) return PeerCheck::kReserved;
  return PeerCheck::kOk;
}

PeerCheck DecodeSwitch(const uint8_t* b, Switch* s) {
  s->vqpn = LoadLe32(b);
  s->conn_token = LoadLe32(b + 4);
  s->data_qpn = LoadLe32(b + 8);
  s->data_psn = LoadLe32(b + 12);
  s->backup_qpn = LoadLe32(b + 16);
  s->backup_psn = LoadLe32(b + 20);
  s->to_mode = static_cast<Mode>(b[24]);
  if (!QpnOk(s->vqpn) || !QpnOk(s->data_qpn) || !QpnOk(s->backup_qpn)) return PeerCheck::kQpn;
  if (!PsnOk(s->data_psn) || !PsnOk(s->backup_psn)) return PeerCheck::kPsn;
  if (b[24] > static_cast<uint8_t>(Mode::kUc)) return PeerCheck::kMode;
  if (s->conn_token == 0) return PeerCheck::kToken;
  if (!Zero(b + 25, 7)) return PeerCheck::kReserved;
  return PeerCheck::kOk;
}

PeerCheck DecodeBody(MsgType type, std::span<const uint8_t> body, Body* out) {
  const uint8_t* b = body.data();
  if (type != MsgType::kGids && body.size() != kBodyBytes[static_cast<uint8_t>(type)]) {
    return PeerCheck::kBodyLength;
  }
  switch (type) {
    case MsgType::kAck: {
      Ack a{LoadLe64(b)};
      *out = a;
      return a.acked_seq == 0 ? PeerCheck::kAckSeq : PeerCheck::kOk;
    }
    case MsgType::kHello:
      return DecodeHello(b, &out->emplace<Hello>());
    case MsgType::kGids:
      return DecodeGids(body, &out->emplace<Gids>());
    case MsgType::kConnect:
    case MsgType::kConnectOk:
      return DecodeConnect(b, &out->emplace<Connect>());
    case MsgType::kConnectNative:
      return DecodeConnectNative(b, &out->emplace<ConnectNative>());
    case MsgType::kSwitch:
      return DecodeSwitch(b, &out->emplace<Switch>());
    case MsgType::kDrained: {
      Drained& d = out->emplace<Drained>(Drained{LoadLe32(b), LoadLe32(b + 4), LoadLe32(b + 8)});
      if (!QpnOk(d.vqpn)) return PeerCheck::kQpn;
      return Zero(b + 12, 4) ? PeerCheck::kOk : PeerCheck::kReserved;
    }
    case MsgType::kReady: {
      Ready& r = out->emplace<Ready>(Ready{LoadLe32(b)});
      if (!QpnOk(r.vqpn)) return PeerCheck::kQpn;
      return Zero(b + 4, 4) ? PeerCheck::kOk : PeerCheck::kReserved;
    }
    case MsgType::kRecover: {
      Recover& r = out->emplace<Recover>(Recover{LoadLe32(b), LoadLe32(b + 4)});
      return QpnOk(r.vqpn) && QpnOk(r.failed_qpn) ? PeerCheck::kOk : PeerCheck::kQpn;
    }
    case MsgType::kRecovered: {
      Recovered& r = out->emplace<Recovered>(Recovered{LoadLe32(b), LoadLe32(b + 4)});
      if (!QpnOk(r.vqpn)) return PeerCheck::kQpn;
      return PsnOk(r.epsn) ? PeerCheck::kOk : PeerCheck::kPsn;
    }
    case MsgType::kCredit: {
      Credit& c = out->emplace<Credit>(Credit{LoadLe32(b), LoadLe32(b + 4)});
      return QpnOk(c.dest_qpn) ? PeerCheck::kOk : PeerCheck::kQpn;
    }
  }
  return PeerCheck::kType;  // not reached: the type was checked
}

// Writes the body of m (already known to be type's alternative); returns
// its size.
size_t EncodeBody(const PeerMessage& m, uint8_t* b) {
  switch (m.type) {
    case MsgType::kAck:
      StoreLe64(b, std::get<Ack>(m.body).acked_seq);
      return 8;
    case MsgType::kHello: {
      const Hello& h = std::get<Hello>(m.body);
      StoreLe32(b, h.unit_size);
      StoreLe32(b + 4, h.ack_qpn);
      StoreLe32(b + 8, h.ack_qkey);
      std::memcpy(b + 16, h.ack_gid.data(), 16);
      return 32;
    }
    case MsgType::kGids: {
      const Gids& g = std::get<Gids>(m.body);
      const uint32_t n = g.count <= kMaxGidsPerMessage ? g.count : 0;
      b[0] = g.add ? 1 : 2;
      b[1] = g.count;
      for (uint32_t i = 0; i < n; ++i) {
        std::memcpy(b + kGidsFixedBytes + 16 * i, g.gids[i].data(), 16);
      }
      return kGidsFixedBytes + size_t{16} * n;
    }
    case MsgType::kConnect:
    case MsgType::kConnectOk: {
      const Connect& c = std::get<Connect>(m.body);
      StoreLe32(b, c.src_vqpn);
      StoreLe32(b + 4, c.dst_vqpn);
      StoreLe32(b + 8, c.data_qpn);
      StoreLe32(b + 12, c.data_psn);
      StoreLe32(b + 16, c.backup_qpn);
      StoreLe32(b + 20, c.backup_psn);
      StoreLe32(b + 24, c.conn_token);
      b[28] = static_cast<uint8_t>(c.mode);
      b[29] = c.rnr_retry;
      StoreLe64(b + 32, c.retry_budget_ns);
      return 40;
    }
    case MsgType::kConnectNative: {
      const ConnectNative& c = std::get<ConnectNative>(m.body);
      StoreLe32(b, c.src_vqpn);
      StoreLe32(b + 4, c.dst_vqpn);
      StoreLe32(b + 8, c.conn_token);
      return 16;
    }
    case MsgType::kSwitch: {
      const Switch& s = std::get<Switch>(m.body);
      StoreLe32(b, s.vqpn);
      StoreLe32(b + 4, s.conn_token);
      StoreLe32(b + 8, s.data_qpn);
      StoreLe32(b + 12, s.data_psn);
      StoreLe32(b + 16, s.backup_qpn);
      StoreLe32(b + 20, s.backup_psn);
      b[24] = static_cast<uint8_t>(s.to_mode);
      return 32;
    }
    case MsgType::kDrained: {
      const Drained& d = std::get<Drained>(m.body);
      StoreLe32(b, d.vqpn);
      StoreLe32(b + 4, d.next_mid);
      StoreLe32(b + 8, d.rcv_sent);
      return 16;
    }
    case MsgType::kReady:
      StoreLe32(b, std::get<Ready>(m.body).vqpn);
      return 8;
    case MsgType::kRecover: {
      const Recover& r = std::get<Recover>(m.body);
      StoreLe32(b, r.vqpn);
      StoreLe32(b + 4, r.failed_qpn);
      return 8;
    }
    case MsgType::kRecovered: {
      const Recovered& r = std::get<Recovered>(m.body);
      StoreLe32(b, r.vqpn);
      StoreLe32(b + 4, r.epsn);
      return 8;
    }
    case MsgType::kCredit: {
      const Credit& c = std::get<Credit>(m.body);
      StoreLe32(b, c.dest_qpn);
      StoreLe32(b + 4, c.posted);
      return 8;
    }
  }
  return 0;
}

// The variant alternative each type carries.
size_t AlternativeOf(MsgType t) {
  switch (t) {
    case MsgType::kAck: return 0;
    case MsgType::kHello: return 1;
    case MsgType::kGids: return 2;
    case MsgType::kConnect:
    case MsgType::kConnectOk: return 3;
    case MsgType::kConnectNative: return 4;
    case MsgType::kSwitch: return 5;
    case MsgType::kDrained: return 6;
    case MsgType::kReady: return 7;
    case MsgType::kRecover: return 8;
    case MsgType::kRecovered: return 9;
    case MsgType::kCredit: return 10;
  }
  return std::variant_npos;
}

}  // namespace

const char* PeerCheckName(PeerCheck c) {
  static constexpr const char* kNames[] = {
      "peer_accepted",    "peer_short",         "peer_long",        "peer_length",
      "peer_version",     "peer_type",          "peer_reserved",    "peer_origin",
      "peer_seq",         "peer_body_length",   "peer_qpn",         "peer_psn",
      "peer_mode",        "peer_rnr_retry",     "peer_token",       "peer_retry_budget",
      "peer_unit_size",   "peer_gid_op",        "peer_gid_count",   "peer_zero_gid",
      "peer_duplicate_gid", "peer_ack_seq"};
  static_assert(std::size(kNames) == static_cast<size_t>(PeerCheck::kCount));
  const auto i = static_cast<size_t>(c);
  return i < std::size(kNames) ? kNames[i] : "peer_unknown_check";
}

PeerCheck Decode(std::span<const uint8_t> bytes, PeerMessage* out) {
  if (bytes.size() < kHeaderBytes) return PeerCheck::kShort;
  if (bytes.size() > kMaxMessageBytes) return PeerCheck::kLong;
  const uint8_t* p = bytes.data();
  if (LoadLe16(p + 2) != bytes.size()) return PeerCheck::kLength;
  if (p[1] != kVersion) return PeerCheck::kVersion;
  if (p[0] == 0 || p[0] > kMaxType) return PeerCheck::kType;
  out->type = static_cast<MsgType>(p[0]);
  out->behind = LoadLe32(p + 4);
  out->origin = LoadLe64(p + 8);
  out->seq = LoadLe64(p + 16);
  if (out->origin == 0) return PeerCheck::kOrigin;
  // ACKs are not sequenced (never resent, never acknowledged).
  if ((out->type == MsgType::kAck) != (out->seq == 0)) return PeerCheck::kSeq;
  if (out->type == MsgType::kAck ? out->behind != 0 : out->behind >= out->seq) {
    return PeerCheck::kSeq;
  }
  return DecodeBody(out->type, bytes.subspan(kHeaderBytes), &out->body);
}

size_t Encode(const PeerMessage& m, std::span<uint8_t> out) {
  if (m.body.index() != AlternativeOf(m.type)) return 0;
  std::array<uint8_t, kMaxMessageBytes> buf{};
  const size_t len = kHeaderBytes + EncodeBody(m, buf.data() + kHeaderBytes);
  buf[0] = static_cast<uint8_t>(m.type);
  buf[1] = kVersion;
  StoreLe16(buf.data() + 2, static_cast<uint16_t>(len));
  StoreLe32(buf.data() + 4, m.behind);
  StoreLe64(buf.data() + 8, m.origin);
  StoreLe64(buf.data() + 16, m.seq);
  // The rules on every field are Decode's: a message it would refuse is
  // not sent.
  PeerMessage check;
  if (len > out.size() || Decode(std::span(buf.data(), len), &check) != PeerCheck::kOk) {
    return 0;
  }
  std::memcpy(out.data(), buf.data(), len);
  return len;
}

}  // namespace vrdma::peer
