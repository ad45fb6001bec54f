// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The engine fuzzer's interpreter (testing/engine_fuzz_driver.h) on every
// test run, without libFuzzer: the seeds, the checked-in corpus and
// pseudo-random inputs from fixed seeds. A broken invariant aborts with
// its message.
//
// VRDMA_WRITE_FUZZ_SEEDS=<dir> writes the seed inputs there (how
// testing/fuzz_engine_corpus/ was made).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backend/engine/testing/engine_fuzz_driver.h"
#include "backend/engine/testing/engine_fuzz_guest.h"

namespace vrdma::engine::fuzz {
namespace {

TEST(FuzzEngineTest, SeedsMoveDataBetweenVms) {
  const std::vector<std::vector<uint8_t>> seeds = EngineFuzzSeeds();
  if (const char* dir = std::getenv("VRDMA_WRITE_FUZZ_SEEDS")) {
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream f(std::string(dir) + "/seed-" + std::to_string(i),
                      std::ios::binary);
      f.write(reinterpret_cast<const char*>(seeds[i].data()),
              static_cast<std::streamsize>(seeds[i].size()));
    }
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    SCOPED_TRACE("seed " + std::to_string(i));
    const FuzzRunStats s = RunEngineFuzz(seeds[i]);
    // Each seed reaches the data path: receives complete, bytes land.
    EXPECT_GT(s.verbs_ok, 8u);
    EXPECT_GT(s.cqes_success, 0u);
    EXPECT_GT(s.recv_success, 0u);
    EXPECT_GT(s.bytes_changed, 128u);
  }
}

// VRDMA_FUZZ_REPLAY=<file or dir> replays a libFuzzer finding (with
// VRDMA_FUZZ_TRACE=1: every step on stderr).
TEST(FuzzEngineTest, CheckedInCorpus) {
  namespace fs = std::filesystem;
  const char* replay = std::getenv("VRDMA_FUZZ_REPLAY");
  if (replay != nullptr && fs::is_regular_file(replay)) {
    std::ifstream f(replay, std::ios::binary);
    std::vector<uint8_t> in((std::istreambuf_iterator<char>(f)),
                            std::istreambuf_iterator<char>());
    (void)RunEngineFuzz(in);
    return;
  }
  const fs::path dir = replay ? replay : VRDMA_FUZZ_ENGINE_CORPUS;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int n = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::vector<uint8_t> in((std::istreambuf_iterator<char>(f)),
                            std::istreambuf_iterator<char>());
    SCOPED_TRACE(e.path().string());
    (void)RunEngineFuzz(in);
    ++n;
  }
  EXPECT_GE(n, 1);
}

// Random programs, and the seeds with random bytes flipped (mutations that
// keep the exchange's structure), from fixed seeds.
// VRDMA_FUZZ_ITERATIONS and VRDMA_FUZZ_SEED run more, or others.
TEST(FuzzEngineTest, PseudoRandomInputs) {
  const char* seed_env = std::getenv("VRDMA_FUZZ_SEED");
  const char* n_env = std::getenv("VRDMA_FUZZ_ITERATIONS");
  std::mt19937 rng(seed_env ? std::atoi(seed_env) : 20261125);
  const int iterations = n_env ? std::atoi(n_env) : 80;
  const std::vector<std::vector<uint8_t>> seeds = EngineFuzzSeeds();
  uint64_t steps = 0;
  for (int i = 0; i < iterations; ++i) {
    std::vector<uint8_t> in;
    if (i % 2 == 0) {
      in.resize(64 + rng() % 1500);
      for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
    } else {
      in = seeds[i / 2 % seeds.size()];
      const int flips = 1 + rng() % 8;
      for (int k = 0; k < flips; ++k) {
        in[rng() % in.size()] = static_cast<uint8_t>(rng());
      }
      for (int k = rng() % 64; k > 0; --k)
        in.push_back(static_cast<uint8_t>(rng()));
    }
    SCOPED_TRACE("input " + std::to_string(i));
    steps += RunEngineFuzz(in).steps;
  }
  EXPECT_GT(steps, 10u * iterations);
}

// The isolation check itself: it must fire on what it is there to catch.
class FuzzGuestCheckDeathTest : public ::testing::Test {
 protected:
  // VM 1's RAM, a CQ ring on file page 0 and a LOCAL_WRITE MR on pages
  // 2..3 (iova 0x1000, lkey 0x105) of which the guest named 64 bytes.
  FuzzGuestCheckDeathTest() : g_(FuzzGuest::Get(1)) {
    cq_.kind = RingKind::kCq;
    cq_.log2_n = 4;
    cq_.log2_e = 6;
    cq_.fpages = {0};
    mr_.lkey = 0x105;
    mr_.access = 1;
    mr_.iova = 0x1000;
    mr_.length = 2 * kPage;
    mr_.fpages = {2, 3};
    refs_ = {{0x105, 0x1100, 64}};
  }
  void Check() { g_->CheckIsolation({&cq_}, {&mr_}, refs_, false, "test"); }
  FuzzGuest* g_;
  RingRec cq_;
  MrRec mr_;
  std::vector<SgeRef> refs_;
};

TEST_F(FuzzGuestCheckDeathTest, AllowsWhatTheVmHandedOver) {
  g_->ram()[384 + 5] ^= 1;            // a CQE
  g_->ram()[2 * kPage + 0x100] ^= 1;  // the named receive buffer
  g_->ram()[2 * kPage + 0x13f] ^= 1;
  Check();
  EXPECT_EQ(g_->changed_bytes(), 3u);
}

// The guest's RAM is a shared mapping: what a death test's child wrote
// stays, so every case starts from a fresh pattern (FuzzGuest::Get).
TEST_F(FuzzGuestCheckDeathTest, CatchesWritesElsewhere) {
  for (const uint64_t off : {uint64_t{2 * kPage + 0x140},  // MR, not named
                             uint64_t{10 * kPage},         // no object
                             uint64_t{200}}) {             // CQ header
    g_ = FuzzGuest::Get(1);
    EXPECT_DEATH(
        {
          g_->ram()[off] ^= 1;
          Check();
        },
        "changed outside what it registered")
        << off;
  }
}

TEST_F(FuzzGuestCheckDeathTest, CatchesAnotherVmsBytesInRingFields) {
  static constexpr uint8_t kVm0Magic[4] = {kMagic0, 0x5a, 0x96, 0xe0};
  EXPECT_DEATH(
      {
        std::memcpy(g_->ram() + 384 + 64, kVm0Magic, 4);  // in a CQE
        Check();
      },
      "carry VM 0's data");
}

}  // namespace
}  // namespace vrdma::engine::fuzz
