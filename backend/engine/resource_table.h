// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A per-VM table of objects named by generation-tagged handles:
//   handle = slot_index | generation << 16, generation in [1, 0xffff],
// so a handle is never 0 and a handle kept after its object was destroyed
// (stale) or made up by a guest (foreign, out of range) fails with
// kBadHandle instead of reaching another object. Slots and the free list are
// allocated once, at construction; Insert/Remove never grow the table, so
// the capacity is the quota.
//
// Threading: the table itself has no locks. The engine mutates it only on
// the data-path thread (inside Executor::RunSync) and the control thread
// reads it only while no mutation can run (it is the only thread that asks
// for mutations), see docs/architecture.md.
#ifndef VRDMA_BACKEND_ENGINE_RESOURCE_TABLE_H_
#define VRDMA_BACKEND_ENGINE_RESOURCE_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/base/status.h"

namespace vrdma::engine {

inline constexpr uint32_t kHandleIndexBits = 16;
inline constexpr uint32_t kMaxTableCapacity = 1u << kHandleIndexBits;

inline constexpr uint32_t HandleIndex(uint32_t handle) {
  return handle & (kMaxTableCapacity - 1);
}
inline constexpr uint32_t HandleGeneration(uint32_t handle) {
  return handle >> kHandleIndexBits;
}

template <typename T>
class ResourceTable {
 public:
  // capacity is clamped to [0, kMaxTableCapacity].
  explicit ResourceTable(uint32_t capacity)
      : slots_(capacity > kMaxTableCapacity ? kMaxTableCapacity : capacity) {
    free_.reserve(slots_.size());
    // Hand out low indices first (pop from the back).
    for (uint32_t i = static_cast<uint32_t>(slots_.size()); i > 0; --i) {
      free_.push_back(i - 1);
    }
  }

  ResourceTable(const ResourceTable&) = delete;
  ResourceTable& operator=(const ResourceTable&) = delete;

  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t size() const {
    return capacity() - static_cast<uint32_t>(free_.size());
  }
  bool full() const { return free_.empty(); }

  // The handle the next Insert will return (kNoResource when full). Lets a
  // caller build an object that knows its own handle before publishing it.
  Result<uint32_t> PeekNextHandle() const {
    if (free_.empty()) return Status::kNoResource;
    uint32_t index = free_.back();
    return MakeHandle(index, NextGeneration(slots_[index].generation));
  }

  // Takes ownership; kNoResource when full. Never allocates.
  Result<uint32_t> Insert(std::unique_ptr<T> object) {
    if (free_.empty() || !object) return Status::kNoResource;
    uint32_t index = free_.back();
    free_.pop_back();
    Slot& slot = slots_[index];
    slot.generation = NextGeneration(slot.generation);
    slot.object = std::move(object);
    return MakeHandle(index, slot.generation);
  }

  // nullptr for 0, out-of-range, stale or free handles.
  T* Lookup(uint32_t handle) const {
    uint32_t index = HandleIndex(handle);
    if (index >= slots_.size()) return nullptr;
    const Slot& slot = slots_[index];
    if (slot.object == nullptr || slot.generation != HandleGeneration(handle)) {
      return nullptr;
    }
    return slot.object.get();
  }

  // Returns the object (nullptr for a bad handle); the slot's generation
  // stays, so the old handle is stale from now on.
  std::unique_ptr<T> Remove(uint32_t handle) {
    if (Lookup(handle) == nullptr) return nullptr;
    Slot& slot = slots_[HandleIndex(handle)];
    free_.push_back(HandleIndex(handle));
    return std::move(slot.object);
  }

  // Calls fn(handle, T&) for every live object, in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].object)
        fn(MakeHandle(i, slots_[i].generation), *slots_[i].object);
    }
  }

  // Live handles, for teardown (control path: allocates).
  std::vector<uint32_t> Handles() const {
    std::vector<uint32_t> out;
    ForEach([&](uint32_t h, T&) { out.push_back(h); });
    return out;
  }

 private:
  struct Slot {
    std::unique_ptr<T> object;
    uint32_t generation = 0;  // 0 only before first use
  };
  static uint32_t NextGeneration(uint32_t g) { return g >= 0xffff ? 1 : g + 1; }
  static uint32_t MakeHandle(uint32_t index, uint32_t generation) {
    return index | (generation << kHandleIndexBits);
  }

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace vrdma::engine

#endif  // VRDMA_BACKEND_ENGINE_RESOURCE_TABLE_H_
