// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The PCIe link between one host and its NIC, in the RNIC timing MODEL.
//
// Two directions, each a serializer at TLP-level bandwidth (encoded rate x
// lanes x DLLP efficiency): "down" carries host -> NIC traffic (MMIO
// doorbells, read completions), "up" carries NIC -> host traffic (read
// requests, DMA writes). A transfer is split into TLPs by address: writes
// and completions at MPS-/completion-size-aligned boundaries, read requests
// at MRRS-aligned ones, so a 257 B DMA costs one TLP more than a 256 B one
// and an unaligned 256 B DMA two TLPs. Every TLP carries its header bytes.
//
// Timing is computed when the transfer is issued, without events: each
// direction is a first-come first-served pipe ("free at" time), and the
// fixed latencies (doorbell, read round trip, write until visible) come on
// top. Read requests take a tag each; with all tags out, the next request
// waits for the oldest to complete. Because every read's completion time is
// monotonic in issue order, the tags are a ring of (release time, count)
// per read. Nothing here allocates after construction.
#ifndef VRDMA_BACKEND_RNIC_MODEL_PCIE_H_
#define VRDMA_BACKEND_RNIC_MODEL_PCIE_H_

#include <cstdint>
#include <vector>

#include "backend/rnic_model/params.h"

namespace vrdma::model {

struct PcieDirStats {
  uint64_t tlps = 0;
  uint64_t bytes = 0;          // on the link: payload + headers
  uint64_t payload_bytes = 0;
};
struct PcieStats {
  PcieDirStats up;             // NIC -> host: read requests, DMA writes
  PcieDirStats down;           // host -> NIC: doorbells, read completions
  uint64_t reads = 0;          // DMA reads issued (each one or more requests)
  uint64_t writes = 0;         // DMA writes (payload, CQE)
  uint64_t doorbells = 0;
  uint64_t tag_waits = 0;      // read requests that waited for a free tag
};

// TLPs needed to move `bytes` starting at `addr` when TLPs may not cross a
// multiple of `chunk` (a power of two). 0 bytes: one TLP (a zero-length
// request still goes out).
inline uint32_t TlpCount(uint64_t addr, uint32_t bytes, uint32_t chunk) {
  if (bytes == 0) return 1;
  const uint64_t first = addr / chunk, last = (addr + bytes - 1) / chunk;
  return static_cast<uint32_t>(last - first + 1);
}
// The same with chunk = 1 << shift (the hot path).
inline uint32_t TlpCountShift(uint64_t addr, uint32_t bytes, uint32_t shift) {
  if (bytes == 0) return 1;
  return static_cast<uint32_t>(((addr + bytes - 1) >> shift) - (addr >> shift) + 1);
}

class PcieLink {
 public:
  PcieLink() = default;
  PcieLink(const PcieParams& p, Picos doorbell_ps, Picos read_rtt_ps, Picos write_ps);

  // A DMA read of `bytes` at `addr` issued at `now`: when its data is on
  // the NIC. A read that depends on an earlier one (an MTT entry after its
  // MPT entry) passes `after`, the earlier one's completion: the model
  // reserves the link at `now` but counts the round trip from `after`.
  // streamed: the read continues a message whose earlier packets' reads
  // were issued ahead (the DMA engine streams a message's payload), so
  // only its serialization shows, not the round trip.
  Picos Read(Picos now, uint64_t addr, uint32_t bytes, Picos after = 0, bool streamed = false);
  // A posted DMA write: *start is when the link takes its first TLP (back
  // pressure on the writer); returns when host memory has it. `after`: the
  // data is ready only then (after a translation); bandwidth is reserved
  // now, so later transfers do not queue behind a future one.
  Picos Write(Picos now, uint64_t addr, uint32_t bytes, Picos* start = nullptr,
              Picos after = 0);
  // An MMIO doorbell from the CPU: when the NIC sees it.
  Picos Doorbell(Picos now);

  // Serialization time of n bytes on a direction.
  Picos UpTime(uint64_t n) const { return (n * up_q16_) >> 16; }
  Picos DownTime(uint64_t n) const { return (n * down_q16_) >> 16; }
  double gbps() const { return gbps_; }
  const PcieStats& stats() const { return stats_; }
  const PcieParams& params() const { return p_; }

 private:
  PcieParams p_;
  Picos doorbell_ps_ = 0, read_rtt_ps_ = 0, write_ps_ = 0;
  double gbps_ = 0.0;
  uint64_t up_q16_ = 0, down_q16_ = 0;   // picoseconds per byte, 16.16 fixed
  Picos up_free_ = 0, down_free_ = 0;
  uint32_t mps_shift_ = 8, mrrs_shift_ = 9, cpl_shift_ = 8;
  // Reads holding tags, oldest first: when they release, and how many.
  struct TagBatch {
    Picos release = 0;
    uint32_t n = 0;
  };
  std::vector<TagBatch> tags_;   // ring of read_tags slots
  uint32_t tag_head_ = 0, tag_batches_ = 0, tags_in_use_ = 0;
  PcieStats stats_;
};

}  // namespace vrdma::model

#endif  // VRDMA_BACKEND_RNIC_MODEL_PCIE_H_
