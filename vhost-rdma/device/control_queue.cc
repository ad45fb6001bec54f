// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "vhost-rdma/device/control_queue.h"

#include <chrono>

#include <cstring>

#include "vhost-rdma/device/command_encoder.h"

namespace vrdma::device {
namespace {

uint32_t WriteResponse(const vhost::DescChain& chain,
                       const CommandResponse& resp) {
  const virtio_rdma_resp_hdr hdr = EncodeRespHdr(resp.status);
  uint32_t written = static_cast<uint32_t>(chain.Write(
      0, {reinterpret_cast<const uint8_t*>(&hdr), sizeof(hdr)}));
  if (resp.status == Status::kOk && resp.body_len > 0) {
    written += static_cast<uint32_t>(
        chain.Write(sizeof(hdr), {resp.body.data(), resp.body_len}));
  }
  return written;
}

CommandResponse Error(Status s) {
  CommandResponse r;
  r.status = s;
  return r;
}

}  // namespace

uint32_t ServeControlChain(const vhost::DescChain& chain,
                           CommandHandler& handler,
                           std::vector<uint8_t>* scratch) {
  const uint64_t writable = chain.writable_bytes();
  if (writable < sizeof(virtio_rdma_resp_hdr)) return 0;

  const uint64_t readable = chain.readable_bytes();
  if (readable > MaxCommandBytes(handler.limits()))
    return WriteResponse(chain, Error(Status::kInvalid));
  // One copy out of guest memory; everything below looks only at the copy.
  scratch->resize(readable);
  if (chain.Read(0, {scratch->data(), scratch->size()}) != readable)
    return WriteResponse(chain, Error(Status::kInvalid));

  const uint32_t body = ResponseBodySize(PeekCommandCode(*scratch));
  if (writable < sizeof(virtio_rdma_resp_hdr) + uint64_t{body})
    return WriteResponse(chain, Error(Status::kInvalid));
  return WriteResponse(chain, handler.Handle(*scratch));
}

DrainResult DrainControlQueue(vhost::Virtqueue& vq, CommandHandler& handler,
                              std::vector<uint8_t>* scratch, uint32_t budget,
                              uint64_t slice_ns) {
  DrainResult r;
  const auto start = std::chrono::steady_clock::now();
  bool out_of_time = false;
  while (r.served < budget && !out_of_time) {
    auto next = vq.Pop();
    if (!next.has_value()) break;
    if (!next->ok()) {
      // The ring itself is invalid: the virtqueue marked itself broken and
      // nothing more is read from it until the frontend sets it up again.
      r.broken = true;
      break;
    }
    const vhost::DescChain& chain = next->value();
    vq.Push(chain.head, ServeControlChain(chain, handler, scratch));
    ++r.served;
    r.busy_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count());
    out_of_time = r.busy_ns >= slice_ns;
  }
  if (r.served > 0) vq.NotifyGuest();
  if (r.broken) return r;
  if ((r.served == budget || out_of_time) && vq.HasAvailable()) {
    r.more = true;  // the caller comes back after other fds
  } else {
    // The ring looked empty. Ask for the next kick (with EVENT_IDX the
    // driver kicks only when avail crosses avail_event, so it must be
    // republished after every drain), then look once more: a chain added
    // before the driver saw the new avail_event would otherwise wait for a
    // kick that never comes.
    vq.SetKickEnabled(true);
    r.more = vq.HasAvailable();
  }
  return r;
}

}  // namespace vrdma::device
