// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// Test helper: how many mappings of a memfd this process holds, from
// /proc/self/maps (tests that run a frontend and a backend in one process
// see both sides' mappings of the guest RAM).
#ifndef VRDMA_BACKEND_MEMORY_TESTING_TEST_MAPPINGS_H_
#define VRDMA_BACKEND_MEMORY_TESTING_TEST_MAPPINGS_H_

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace vrdma::testing {

// Mappings of the memfd behind `fd`; -1 when fd is not a file.
inline int CountMappingsOf(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) {
    // address perms offset dev inode path
    char path[256] = {};
    unsigned long inode = 0;
    if (sscanf(line.c_str(), "%*s %*s %*s %*s %lu %255s", &inode, path) == 2 &&
        inode == st.st_ino && std::strstr(path, "memfd:") != nullptr) {
      ++n;
    }
  }
  return n;
}

}  // namespace vrdma::testing

#endif  // VRDMA_BACKEND_MEMORY_TESTING_TEST_MAPPINGS_H_
