// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// libFuzzer: arbitrary bytes as a peer-channel message (docs/reliability.md
// §3.5), the way another host could send them. Decode must never crash,
// read out of bounds or hit undefined behaviour; whatever it accepts must
// re-encode to exactly the same bytes and hold the ranges peer_message.h
// promises (abort on violation).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <variant>

#include "backend/peer_channel/peer_message.h"

namespace {

using namespace vrdma::peer;

void Require(bool ok) {
  if (!ok) std::abort();
}

bool Qpn(uint32_t q) { return q > 1 && q <= 0xffffff; }

void CheckRanges(const PeerMessage& m) {
  Require(m.origin != 0);
  Require((m.type == MsgType::kAck) == (m.seq == 0));
  Require(m.type == MsgType::kAck ? m.behind == 0 : m.behind < m.seq);
  if (const auto* c = std::get_if<Connect>(&m.body)) {
    Require(Qpn(c->src_vqpn) && Qpn(c->dst_vqpn) && Qpn(c->data_qpn) && Qpn(c->backup_qpn));
    Require(c->data_psn <= 0xffffff && c->backup_psn <= 0xffffff);
    Require(c->mode == Mode::kRc || c->mode == Mode::kUc);
    Require(c->rnr_retry <= 7 && c->conn_token != 0 && c->retry_budget_ns != 0);
  } else if (const auto* g = std::get_if<Gids>(&m.body)) {
    Require(g->count >= 1 && g->count <= kMaxGidsPerMessage);
    for (uint32_t i = 0; i < g->count; ++i) {
      Require(g->gids[i] != Gid{});
      for (uint32_t j = 0; j < i; ++j) Require(g->gids[i] != g->gids[j]);
    }
  } else if (const auto* h = std::get_if<Hello>(&m.body)) {
    const bool none = h->ack_qpn == 0 && h->ack_qkey == 0 && h->ack_gid == Gid{};
    Require(h->unit_size == kUnitSize && (none || (Qpn(h->ack_qpn) && h->ack_gid != Gid{})));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  PeerMessage m;
  if (Decode(std::span(data, size), &m) != PeerCheck::kOk) return 0;
  CheckRanges(m);
  uint8_t out[kMaxMessageBytes];
  const size_t n = Encode(m, out);
  Require(n == size && std::memcmp(out, data, size) == 0);
  return 0;
}
