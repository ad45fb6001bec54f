// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Memory ordering with the guest driver (virtio 1.x, 2.7.13 and 2.7.14):
//  - Pop: avail->idx is loaded with acquire, so ring entries and descriptors
//    the driver wrote before publishing the index are visible after it.
//  - Push: the used element is written first, then used->idx is stored with
//    release, so the driver never sees an index ahead of its element.
//  - NotifyGuest / SetKickEnabled: a full fence separates our store (used
//    idx, or the kick re-enable) from our load of the driver's suppression
//    field (avail flags / used_event, or avail idx), the classic store-load
//    pairing with the driver's own full barrier.
#include "vhost-rdma/vhost_user/virtqueue.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "vhost-rdma/vhost_user/eventfd_io.h"
#include "vhost-rdma/vhost_user/vring.h"

namespace vrdma::vhost {
namespace {

constexpr uint32_t kMaxRingSize = 32768;
// An indirect table may not exceed a full ring's worth of entries.
constexpr uint32_t kMaxIndirectEntries = 32768;

uint16_t LoadU16(const void* p) {
  return __atomic_load_n(static_cast<const uint16_t*>(p), __ATOMIC_RELAXED);
}
uint16_t LoadU16Acquire(const void* p) {
  return __atomic_load_n(static_cast<const uint16_t*>(p), __ATOMIC_ACQUIRE);
}
void StoreU16(void* p, uint16_t v) {
  __atomic_store_n(static_cast<uint16_t*>(p), v, __ATOMIC_RELAXED);
}

// Copies one descriptor out of guest memory exactly once: the compiler
// barrier forces the local to be materialised, so later uses can never be
// re-read from (guest-modifiable) memory.
VringDesc CopyDesc(const uint8_t* src) {
  VringDesc d;
  std::memcpy(&d, src, sizeof(d));
  asm volatile("" : : "r"(&d) : "memory");
  return d;
}

uint64_t AvailBytes(uint16_t size) { return 6 + 2ull * size; }
uint64_t UsedBytes(uint16_t size) { return 6 + 8ull * size; }

}  // namespace

uint64_t DescChain::readable_bytes() const {
  uint64_t n = 0;
  for (int i = 0; i < num_readable; ++i) n += descs[i].len;
  return n;
}

uint64_t DescChain::writable_bytes() const {
  uint64_t n = 0;
  for (int i = num_readable; i < num_readable + num_writable; ++i) n += descs[i].len;
  return n;
}

size_t DescChain::Read(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  for (int i = 0; i < num_readable && done < out.size(); ++i) {
    uint64_t len = descs[i].len;
    if (offset >= len) {
      offset -= len;
      continue;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(len - offset, out.size() - done));
    std::memcpy(out.data() + done, descs[i].host + offset, n);
    done += n;
    offset = 0;
  }
  return done;
}

size_t DescChain::Write(uint64_t offset, std::span<const uint8_t> in) const {
  size_t done = 0;
  for (int i = num_readable; i < num_readable + num_writable && done < in.size(); ++i) {
    uint64_t len = descs[i].len;
    if (offset >= len) {
      offset -= len;
      continue;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(len - offset, in.size() - done));
    std::memcpy(descs[i].host + offset, in.data() + done, n);
    done += n;
    offset = 0;
  }
  return done;
}

Status Virtqueue::Setup(std::shared_ptr<const GuestMemory> memory, uint16_t size,
                        const VringAddrs& addrs, uint16_t last_avail_idx, bool event_idx) {
  ready_ = false;
  broken_ = false;
  if (memory == nullptr) return Status::kBadState;
  if (size == 0 || size > kMaxRingSize || (size & (size - 1)) != 0) return Status::kInvalid;
  size_ = size;
  addrs_ = addrs;
  event_idx_ = event_idx;
  memory_ = std::move(memory);
  VRDMA_RETURN_IF_ERROR(Remap(memory_));
  last_avail_idx_ = last_avail_idx;
  // The used index continues from where the device left off; a frontend that
  // restores a ring passes the same value for both (no in-flight requests).
  last_used_idx_ = last_avail_idx;
  signalled_used_ = last_avail_idx;
  ready_ = true;
  return Status::kOk;
}

Status Virtqueue::Remap(std::shared_ptr<const GuestMemory> memory) {
  if (memory == nullptr || size_ == 0) return Status::kBadState;
  auto desc = memory->TranslateUserAddr(addrs_.desc_user_addr, 16ull * size_);
  auto avail = memory->TranslateUserAddr(addrs_.avail_user_addr, AvailBytes(size_));
  auto used = memory->TranslateUserAddr(addrs_.used_user_addr, UsedBytes(size_));
  if (!desc.ok() || !avail.ok() || !used.ok() || addrs_.desc_user_addr % 16 != 0 ||
      addrs_.avail_user_addr % 2 != 0 || addrs_.used_user_addr % 4 != 0) {
    ready_ = false;
    broken_ = true;
    return Status::kFault;
  }
  memory_ = std::move(memory);
  desc_ = *desc;
  avail_ = *avail;
  used_ = *used;
  return Status::kOk;
}

std::optional<Result<DescChain>> Virtqueue::Pop() {
  if (broken_) return Result<DescChain>(Status::kInvalid);
  if (!ready_) return std::nullopt;
  auto* avail = static_cast<VringAvail*>(avail_);
  const uint16_t avail_idx = LoadU16Acquire(&avail->idx);
  const uint16_t pending = static_cast<uint16_t>(avail_idx - last_avail_idx_);
  if (pending == 0) return std::nullopt;
  auto fail = [this](Status s) {
    broken_ = true;
    return std::optional<Result<DescChain>>(Result<DescChain>(s));
  };
  if (pending > size_) return fail(Status::kInvalid);

  const uint16_t mask = size_ - 1;
  const uint16_t head = LoadU16(&avail->ring[last_avail_idx_ & mask]);
  if (head >= size_) return fail(Status::kInvalid);

  DescChain chain;
  chain.head = head;
  int n = 0;
  // Current table: the ring's descriptor table, or an indirect one.
  const uint8_t* table = static_cast<const uint8_t*>(desc_);
  uint32_t table_len = size_;
  bool indirect = false;
  uint32_t idx = head;
  // Every step visits one entry of the current table; a chain longer than
  // its table has a loop.
  uint32_t steps = 0;
  for (;;) {
    if (++steps > table_len) return fail(Status::kInvalid);
    const VringDesc d = CopyDesc(table + 16ull * idx);
    if (d.flags & kVringDescFIndirect) {
      // Only as the sole descriptor of a direct chain (virtio 2.7.5.3.1):
      // no nesting, no NEXT alongside, not after other descriptors.
      if (indirect || n != 0 || (d.flags & kVringDescFNext)) return fail(Status::kInvalid);
      if (d.len == 0 || d.len % 16 != 0 || d.len / 16 > kMaxIndirectEntries) {
        return fail(Status::kInvalid);
      }
      auto t = memory_->Translate(d.addr, d.len);
      if (!t.ok()) return fail(Status::kFault);
      table = *t;
      table_len = d.len / 16;
      indirect = true;
      idx = 0;
      steps = 0;
      continue;
    }
    if (n == DescChain::kMaxDescs) return fail(Status::kInvalid);
    const bool writable = d.flags & kVringDescFWrite;
    if (!writable && chain.num_writable > 0) return fail(Status::kInvalid);
    auto host = memory_->Translate(d.addr, d.len);
    if (!host.ok()) return fail(Status::kFault);
    chain.descs[n++] = CheckedDesc{*host, d.len, writable};
    if (writable) {
      ++chain.num_writable;
    } else {
      ++chain.num_readable;
    }
    if (!(d.flags & kVringDescFNext)) break;
    if (d.next >= table_len) return fail(Status::kInvalid);
    idx = d.next;
  }
  ++last_avail_idx_;
  return Result<DescChain>(chain);
}

void Virtqueue::Push(uint16_t head, uint32_t written) {
  if (!ready_) return;
  auto* used = static_cast<VringUsed*>(used_);
  VringUsedElem* e = &used->ring[last_used_idx_ & (size_ - 1)];
  __atomic_store_n(&e->id, static_cast<uint32_t>(head), __ATOMIC_RELAXED);
  __atomic_store_n(&e->len, written, __ATOMIC_RELAXED);
  ++last_used_idx_;
  __atomic_store_n(&used->idx, last_used_idx_, __ATOMIC_RELEASE);
}

void Virtqueue::NotifyGuest() {
  if (!ready_ || call_fd < 0 || call_stalled()) return;
  if (last_used_idx_ == signalled_used_) return;  // nothing new for the guest
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto* avail = static_cast<VringAvail*>(avail_);
  bool notify;
  if (event_idx_) {
    const uint16_t used_event = LoadU16(&avail->ring[size_]);
    notify = VringNeedEvent(used_event, last_used_idx_, signalled_used_);
  } else {
    notify = !(LoadU16(&avail->flags) & kVringAvailFNoInterrupt);
  }
  signalled_used_ = last_used_idx_;
  // A counter the frontend left at its maximum means "already signalled"
  // (the guest still sees the used index). A write that would block (the
  // frontend made the fd blocking again) is interrupted by the watchdog:
  // this queue never signals that fd again, and its connection ends.
  if (notify && SignalEventFd(call_fd) == EventFdResult::kStalled) {
    call_stalled_.store(true, std::memory_order_release);
  }
}

void Virtqueue::SetKickEnabled(bool enabled) {
  if (!ready_) return;
  auto* used = static_cast<VringUsed*>(used_);
  if (event_idx_) {
    // avail_event lives right after the used ring. Disabling with event
    // index is best effort (the driver kicks at most once more), as in
    // Linux's virtqueue_disable_cb.
    if (enabled) StoreU16(&used->ring[size_], last_avail_idx_);
  } else {
    uint16_t flags = LoadU16(&used->flags);
    flags = enabled ? (flags & ~kVringUsedFNoNotify) : (flags | kVringUsedFNoNotify);
    StoreU16(&used->flags, flags);
  }
  if (enabled) std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool Virtqueue::HasAvailable() const {
  if (!ready_ || broken_) return false;
  const auto* avail = static_cast<const VringAvail*>(avail_);
  return LoadU16Acquire(&avail->idx) != last_avail_idx_;
}

}  // namespace vrdma::vhost
