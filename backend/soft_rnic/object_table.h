// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A bounded table of RNIC objects addressed by generation-tagged handles:
// handle = index << 8 | tag, tag in 1..255, index in 1..capacity. The tag
// changes every time a slot is reused and free slots are recycled oldest
// first, so a stale handle (a deregistered MR's key, a destroyed QP's QPN)
// does not name a new object for a long time. Index 0 is never used, so no
// handle is 0 (rkey 0 is free to mean "no remote access"). A table built
// with an index base numbers its slots base + 1 .. base + capacity, so two
// tables can share one key space (MRs and memory windows: an rkey names
// one or the other by its index alone, as in rxe).
//
// Create and Destroy run on the control path (they allocate the object);
// Get is O(1) and allocation-free for the data path.
#ifndef VRDMA_BACKEND_SOFT_RNIC_OBJECT_TABLE_H_
#define VRDMA_BACKEND_SOFT_RNIC_OBJECT_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/soft_rnic/fixed_ring.h"

namespace vrdma::soft {

template <typename T>
class ObjectTable {
 public:
  explicit ObjectTable(uint32_t capacity, uint32_t index_base = 0)
      : slots_(capacity + 1), base_(index_base) {
    free_.Init(capacity);
    for (uint32_t i = 1; i <= capacity; ++i) *free_.Push() = i;
  }

  static uint32_t IndexOf(uint32_t handle) { return handle >> 8; }

  // Returns the new object, its handle in *handle; nullptr when full.
  T* Create(uint32_t* handle) {
    if (free_.empty()) return nullptr;
    uint32_t index = free_.front();
    free_.Pop();
    Slot& s = slots_[index];
    s.tag = static_cast<uint8_t>(s.tag % 255 + 1);
    s.obj = std::make_unique<T>();
    *handle = (base_ + index) << 8 | s.tag;
    ++live_;
    return s.obj.get();
  }

  T* Get(uint32_t handle) const {
    const Slot* s = SlotOf(handle);
    if (s == nullptr || s->tag != (handle & 0xff)) return nullptr;
    return s->obj.get();
  }

  // The object in handle's slot whatever its tag: for objects whose key's
  // low byte their owner changes (a memory window's rkey), which compare
  // the whole key themselves.
  T* GetAnyTag(uint32_t handle) const {
    const Slot* s = SlotOf(handle);
    return s == nullptr ? nullptr : s->obj.get();
  }

  bool Destroy(uint32_t handle) {
    if (Get(handle) == nullptr) return false;
    uint32_t index = IndexOf(handle) - base_;
    slots_[index].obj.reset();
    *free_.Push() = index;  // cannot fail: at most capacity indices exist
    --live_;
    return true;
  }

  uint32_t live() const { return live_; }

 private:
  struct Slot {
    std::unique_ptr<T> obj;
    uint8_t tag = 0;
  };
  const Slot* SlotOf(uint32_t handle) const {
    uint32_t index = IndexOf(handle);
    if (index <= base_ || index - base_ >= slots_.size()) return nullptr;
    const Slot& s = slots_[index - base_];
    return s.obj ? &s : nullptr;
  }

  std::vector<Slot> slots_;
  uint32_t base_ = 0;
  FixedRing<uint32_t> free_;
  uint32_t live_ = 0;
};

}  // namespace vrdma::soft

#endif  // VRDMA_BACKEND_SOFT_RNIC_OBJECT_TABLE_H_
