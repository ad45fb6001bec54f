// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Error reporting for host code: a small enum (no allocation, usable on the
// data path) and Result<T>. Codes map 1:1 onto the guest-visible
// virtio_rdma_status values so the device layer never has to guess.
#ifndef VRDMA_BACKEND_BASE_STATUS_H_
#define VRDMA_BACKEND_BASE_STATUS_H_

#include <cstdint>
#include <optional>
#include <utility>

namespace vrdma {

enum class Status : uint8_t {
  kOk = 0,
  kInvalid = 1,      // malformed input or out-of-range value
  kUnsupported = 2,  // valid but not offered by this device
  kNoResource = 3,   // quota exhausted or table full
  kBadHandle = 4,    // not an object of this VM (or a stale handle)
  kBadState = 5,     // illegal state for the request
  kBusy = 6,         // object still referenced
  kFault = 7,        // guest address outside guest memory
  kAccess = 8,       // access rights do not allow the operation
  kIoError = 9,      // host-side failure (socket, mmap, RNIC)
};

[[nodiscard]] const char* StatusName(Status s);

// A value or an error status. Deliberately tiny: no message strings, so it
// can be returned on the data path without allocating.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)), status_(Status::kOk) {}  // NOLINT
  Result(Status status) : status_(status) {}                            // NOLINT

  bool ok() const { return status_ == Status::kOk; }
  Status status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace vrdma

// Early return of a non-OK Status (or the status of a Result).
#define VRDMA_RETURN_IF_ERROR(expr)                       \
  do {                                                    \
    if (auto vrdma_s_ = (expr); vrdma_s_ != ::vrdma::Status::kOk) \
      return vrdma_s_;                                    \
  } while (0)

#endif  // VRDMA_BACKEND_BASE_STATUS_H_
