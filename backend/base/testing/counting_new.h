// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test helper for "the data path never allocates": replaces the global
// operator new/delete with ones that count allocations while
// vrdma::testing::g_counting is set. Include it in exactly one source file
// of a test binary (it defines the replacements), set g_counting around the
// calls under test, and expect g_allocs to stay 0.
#ifndef VRDMA_BACKEND_BASE_TESTING_COUNTING_NEW_H_
#define VRDMA_BACKEND_BASE_TESTING_COUNTING_NEW_H_

#include <cstdlib>
#include <new>

namespace vrdma::testing {
inline bool g_counting = false;
inline long g_allocs = 0;
}  // namespace vrdma::testing

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  if (vrdma::testing::g_counting) ++vrdma::testing::g_allocs;
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

#endif  // VRDMA_BACKEND_BASE_TESTING_COUNTING_NEW_H_
