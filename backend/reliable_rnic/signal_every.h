// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// SignalEvery: the layer's own sends (data-QP chunks and SENDs, ACKs) are
// signaled one in `every`, as TPL proposes for a busy sender
// (docs/reliability.md §2.1 "The layer's send completions"): the others
// complete silently unless they fail or are flushed, which every RNIC
// completes whether signaled or not. A send queue completes in order, so
// one completion accounts for every post up to it (Ends).
#ifndef VRDMA_BACKEND_RELIABLE_RNIC_SIGNAL_EVERY_H_
#define VRDMA_BACKEND_RELIABLE_RNIC_SIGNAL_EVERY_H_

#include <algorithm>
#include <cstdint>

#include "backend/rnic/rnic.h"

namespace vrdma::reliable {

class SignalEvery {
 public:
  // One in `every` of a queue of `depth` sends: at most half the queue
  // (so a send queue never fills with sends nobody will see end), at
  // least one.
  SignalEvery(uint32_t every, uint32_t depth)
      : every_(std::max<uint32_t>(std::min(every, depth / 2), 1)) {}

  // The send flags of the next post (call once per post).
  uint32_t Flags() {
    if (++since_ < every_) return 0;
    since_ = 0;
    return kSendSignaled;
  }

  // A completion of the post whose sequence's low bits (`mask`) are
  // `index`: how many posts it ends, from done (the posts ended so far)
  // on; 0 for an index outside [done, posted).
  static uint64_t Ends(uint64_t done, uint64_t posted, uint32_t index,
                       uint32_t mask) {
    const uint64_t gap = (index + 1 - static_cast<uint32_t>(done)) & mask;
    return gap <= posted - done ? gap : 0;
  }

 private:
  uint32_t every_;
  uint32_t since_ = 0;
};

}  // namespace vrdma::reliable

#endif  // VRDMA_BACKEND_RELIABLE_RNIC_SIGNAL_EVERY_H_
