// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
#include "backend/memory/guest_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "backend/memory/testing/test_mappings.h"

namespace vrdma {
namespace {

constexpr uint64_t kPage = 4096;

// A memfd of `bytes` whose byte i holds (i / kPage) & 0xff + salt, so a test
// can tell which file page it is looking at.
// Sealable (as QEMU's memory-backend-memfd): Map adds F_SEAL_SHRINK.
int MakeMemfd(uint64_t bytes, uint8_t salt = 0) {
  int fd = memfd_create("guest_memory_test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  std::vector<uint8_t> page(kPage);
  for (uint64_t p = 0; p < bytes / kPage; ++p) {
    memset(page.data(), static_cast<uint8_t>(p + salt), kPage);
    EXPECT_EQ(pwrite(fd, page.data(), kPage, static_cast<off_t>(p * kPage)),
              static_cast<ssize_t>(kPage));
  }
  return fd;
}

bool FdIsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

// What the protocol layer does by default: every rule, no unsealed files.
Result<std::shared_ptr<const GuestMemory>> MapStrict(std::vector<GuestRegionSpec> specs) {
  return GuestMemory::Map(std::move(specs), GuestMemoryOptions{});
}

TEST(GuestMemoryTest, MapsAndTranslatesTwoRegions) {
  int a = MakeMemfd(16 * kPage, 0);
  int b = MakeMemfd(16 * kPage, 100);
  auto mem = MapStrict({
      {.guest_phys_addr = 0, .size = 8 * kPage, .user_addr = 0x7000'0000, .mmap_offset = 0, .fd = a},
      {.guest_phys_addr = 0x100000, .size = 8 * kPage, .user_addr = 0x8000'0000,
       .mmap_offset = 4 * kPage, .fd = b},
  });
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ((*mem)->region_count(), 2u);
  EXPECT_EQ((*mem)->total_bytes(), 16 * kPage);
  for (size_t i = 0; i < 2; ++i) {
    const GuestMemory::RegionView r = (*mem)->region(i);
    EXPECT_EQ(r.gpa, i == 0 ? 0u : 0x100000u);
    EXPECT_EQ(r.size, 8 * kPage);
    EXPECT_EQ(r.host, *(*mem)->Translate(r.gpa, r.size));
  }

  auto p = (*mem)->Translate(3 * kPage + 5, 10);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(**p, 3);
  auto q = (*mem)->Translate(0x100000 + kPage, 1);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(**q, 100 + 5);  // file page 5 (offset 4 pages + 1)
  auto u = (*mem)->TranslateUserAddr(0x8000'0000 + kPage, 1);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(*u, *q);

  // Writes through the mapping reach the file (MAP_SHARED).
  **q = 0xab;
  uint8_t byte = 0;
  ASSERT_EQ(pread(b, &byte, 1, 5 * kPage), 1);
  EXPECT_EQ(byte, 0xab);

  auto loc = (*mem)->Locate(0x100000 + 2 * kPage + 7);
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->offset, 6 * kPage + 7);
  EXPECT_EQ(loc->bytes_to_end, 6 * kPage - 7);
}

TEST(GuestMemoryTest, UnalignedMmapOffset) {
  int a = MakeMemfd(4 * kPage, 0);
  auto mem = MapStrict(
      {{.guest_phys_addr = 0, .size = 2 * kPage, .user_addr = 0, .mmap_offset = kPage + 16,
        .fd = a}});
  ASSERT_TRUE(mem.ok());
  auto p = (*mem)->Translate(kPage - 16, 1);  // file offset 2*kPage
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(**p, 2);
  auto q = (*mem)->Translate(kPage - 17, 1);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(**q, 1);
  EXPECT_TRUE((*mem)->Translate(0, 2 * kPage).ok());
  EXPECT_EQ((*mem)->Translate(0, 2 * kPage + 1).status(), Status::kFault);
}

struct TranslateCase {
  const char* name;
  uint64_t gpa;
  uint64_t len;
  bool ok;
};

TEST(GuestMemoryTest, TranslateRejectsMaliciousRanges) {
  int a = MakeMemfd(4 * kPage);
  int b = MakeMemfd(4 * kPage);
  // Two regions that are adjacent in GPA space but not in the host mapping:
  // a range crossing them must fault, never be served from one mapping.
  auto mem = MapStrict({
      {.guest_phys_addr = 0x10000, .size = 4 * kPage, .user_addr = 0x10000, .mmap_offset = 0,
       .fd = a},
      {.guest_phys_addr = 0x14000, .size = 4 * kPage, .user_addr = 0x90000, .mmap_offset = 0,
       .fd = b},
  });
  ASSERT_TRUE(mem.ok());
  const TranslateCase cases[] = {
      {"start", 0x10000, 1, true},
      {"whole first", 0x10000, 4 * kPage, true},
      {"zero len inside", 0x12000, 0, true},
      {"last byte of second", 0x17fff, 1, true},
      {"below", 0xffff, 1, false},
      {"straddles start", 0xffff, 2, false},
      {"crosses regions", 0x13fff, 2, false},
      {"past end", 0x18000, 1, false},
      {"zero len at end", 0x18000, 0, false},
      {"wraps around", 0x10010, UINT64_MAX - 8, false},
      {"huge gpa", UINT64_MAX, 1, false},
      {"huge len", 0x10000, UINT64_MAX, false},
      {"len one too many", 0x14000, 4 * kPage + 1, false},
  };
  for (const auto& c : cases) {
    auto r = (*mem)->Translate(c.gpa, c.len);
    EXPECT_EQ(r.ok(), c.ok) << c.name;
    if (!c.ok) {
      EXPECT_EQ(r.status(), Status::kFault) << c.name;
    }
  }
  EXPECT_FALSE((*mem)->Locate(0x18000).ok());
  EXPECT_FALSE((*mem)->Locate(0).ok());
  EXPECT_EQ((*mem)->TranslateUserAddr(0x13fff, 2).status(), Status::kFault);
  EXPECT_EQ((*mem)->TranslateUserAddr(0x14000, 1).status(), Status::kFault);  // gap
  EXPECT_TRUE((*mem)->TranslateUserAddr(0x90000, 4 * kPage).ok());
}

struct SpecCase {
  const char* name;
  std::vector<GuestRegionSpec> specs;  // fd -1 is replaced by a fresh memfd
};

TEST(GuestMemoryTest, MapRejectsBadSpecs) {
  constexpr uint64_t kBig = 16 * kPage;
  const std::vector<SpecCase> cases = {
      {"empty", {}},
      {"zero size", {{0, 0, 0, 0, -1}}},
      {"gpa overflow", {{UINT64_MAX - kPage + 1, 2 * kPage, 0, 0, -1}}},
      {"uva overflow", {{0, 2 * kPage, UINT64_MAX - kPage + 1, 0, -1}}},
      {"offset overflow", {{0, 2 * kPage, 0, UINT64_MAX - kPage + 1, -1}}},
      {"beyond file end", {{0, kBig + kPage, 0, 0, -1}}},
      {"offset beyond file end", {{0, 2 * kPage, 0, kBig - kPage, -1}}},
      {"gpa overlap", {{0, 4 * kPage, 0, 0, -1}, {3 * kPage, 4 * kPage, 0x100000, 0, -1}}},
      {"gpa contained", {{0, 8 * kPage, 0, 0, -1}, {kPage, kPage, 0x100000, 0, -1}}},
      {"uva overlap", {{0, 4 * kPage, 0x100000, 0, -1}, {0x100000, 4 * kPage, 0x103000, 0, -1}}},
      {"too many", std::vector<GuestRegionSpec>(9)},
  };
  for (auto c : cases) {
    std::vector<int> fds;
    uint64_t next = 0;
    for (auto& s : c.specs) {
      if (c.specs.size() == 9) {  // distinct, valid, non-overlapping regions
        s = {next, kPage, next, 0, -1};
        next += kPage;
      }
      s.fd = MakeMemfd(kBig);
      fds.push_back(s.fd);
    }
    auto r = MapStrict(c.specs);
    EXPECT_EQ(r.status(), Status::kInvalid) << c.name;
    for (int fd : fds) EXPECT_FALSE(FdIsOpen(fd)) << c.name << ": fd leaked";
  }
}

TEST(GuestMemoryTest, MapRejectsBadFd) {
  EXPECT_FALSE(MapStrict({{0, kPage, 0, 0, -1}}).ok());
}

TEST(GuestMemoryTest, ClosesFdsOnDestruction) {
  int a = MakeMemfd(kPage);
  {
    auto mem = MapStrict({{0, kPage, 0, 0, a}});
    ASSERT_TRUE(mem.ok());
    EXPECT_TRUE(FdIsOpen(a));
  }
  EXPECT_FALSE(FdIsOpen(a));
}

TEST(GuestMemoryTest, SealsSealableFilesAgainstShrinking) {
  int a = memfd_create("sealable", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(a, 0);
  ASSERT_EQ(ftruncate(a, 4 * kPage), 0);
  int other = dup(a);  // what the frontend keeps
  auto mem = MapStrict({{0, 4 * kPage, 0, 0, a}});
  ASSERT_TRUE(mem.ok());
  // The frontend can no longer shrink it: the seal holds.
  EXPECT_EQ(ftruncate(other, kPage), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_TRUE(fcntl(other, F_GET_SEALS) & F_SEAL_SHRINK);
  EXPECT_EQ(*(*mem)->Translate(4 * kPage - 1, 1).value(), 0);  // still mapped, no SIGBUS
  close(other);
}

// A memfd without MFD_ALLOW_SEALING (born with F_SEAL_SEAL) cannot be
// sealed: a frontend could truncate it under the mapping. Refused with
// kAccess, the sealing rule, unless the operator allows unsealed memory.
TEST(GuestMemoryTest, RefusesFileThatCannotBeSealed) {
  int a = memfd_create("unsealable", MFD_CLOEXEC);
  ASSERT_GE(a, 0);
  ASSERT_EQ(ftruncate(a, 4 * kPage), 0);
  int other = dup(a);
  auto mem = MapStrict({{0, 4 * kPage, 0, 0, a}});
  EXPECT_EQ(mem.status(), Status::kAccess);
  EXPECT_FALSE(FdIsOpen(a));  // closed on refusal too
  EXPECT_EQ(ftruncate(other, kPage), 0);  // nothing sealed it

  // The operator's choice (hugetlbfs files cannot be sealed either).
  auto allowed =
      GuestMemory::Map({{0, kPage, 0, 0, dup(other)}}, GuestMemoryOptions{.allow_unsealed = true});
  ASSERT_TRUE(allowed.ok());
  EXPECT_EQ((*allowed)->total_bytes(), kPage);
  // The size rule still holds when sealing is waived.
  auto too_big = GuestMemory::Map({{0, 2 * kPage, 0, 0, dup(other)}},
                                  GuestMemoryOptions{.allow_unsealed = true});
  EXPECT_EQ(too_big.status(), Status::kInvalid);
  close(other);
}

// Sealable, but already sealed without F_SEAL_SHRINK (F_SEAL_SEAL forbids
// adding it): refused like an unsealable file.
TEST(GuestMemoryTest, RefusesFileSealedWithoutShrinkSeal) {
  int a = memfd_create("sealed-open", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(a, 0);
  ASSERT_EQ(ftruncate(a, 4 * kPage), 0);
  ASSERT_EQ(fcntl(a, F_ADD_SEALS, F_SEAL_SEAL), 0);
  EXPECT_EQ(MapStrict({{0, 4 * kPage, 0, 0, a}}).status(), Status::kAccess);
}

// QEMU's memory-backend-memfd (seal=on, the default) seals GROW, SHRINK and
// SEAL itself: F_ADD_SEALS then fails, but the seal is in force.
TEST(GuestMemoryTest, AcceptsFileTheFrontendSealed) {
  int a = memfd_create("qemu-like", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(a, 0);
  ASSERT_EQ(ftruncate(a, 4 * kPage), 0);
  ASSERT_EQ(fcntl(a, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL), 0);
  auto mem = MapStrict({{0, 4 * kPage, 0, 0, a}});
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ((*mem)->total_bytes(), 4 * kPage);
}

// Guest RAM is a regular file; a pipe or an eventfd is refused before any
// seal or mmap is tried (kInvalid), also when unsealed memory is allowed.
TEST(GuestMemoryTest, RefusesFdThatIsNotARegularFile) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  const int efd = eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  EXPECT_EQ(GuestMemory::Map({{0, kPage, 0, 0, p[0]}}, GuestMemoryOptions{.allow_unsealed = true})
                .status(),
            Status::kInvalid);
  EXPECT_EQ(MapStrict({{0, kPage, 0, 0, efd}}).status(), Status::kInvalid);
  EXPECT_FALSE(FdIsOpen(p[0]));
  EXPECT_FALSE(FdIsOpen(efd));
}

constexpr uint32_t kNoLimit = UINT32_MAX;

TEST(GuestPageViewTest, MapsScatteredPagesContiguously) {
  int a = MakeMemfd(16 * kPage, 0);
  int b = MakeMemfd(16 * kPage, 50);
  auto mem = MapStrict({
      {0, 16 * kPage, 0x1000'0000, 0, a},
      {0x100000, 8 * kPage, 0x2000'0000, 8 * kPage, b},
  });
  ASSERT_TRUE(mem.ok());
  // Pages 3,4 (one file run), then 9, then a page from region b, then 3 again.
  const uint64_t pages[] = {3 * kPage, 4 * kPage, 9 * kPage, 0x100000 + kPage, 3 * kPage};
  auto view = GuestPageView::Map(**mem, pages, kNoLimit);
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->size(), 5 * kPage);
  const uint8_t expect[] = {3, 4, 9, 50 + 9, 3};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(view->data()[i * kPage], expect[i]) << i;
    EXPECT_EQ(view->data()[i * kPage + kPage - 1], expect[i]) << i;
  }
  // Shared with guest RAM both ways.
  view->data()[10] = 0xee;
  EXPECT_EQ(*(*mem)->Translate(3 * kPage + 10, 1).value(), 0xee);
  EXPECT_EQ(view->data()[4 * kPage + 10], 0xee);  // same page mapped twice

  GuestPageView moved = std::move(*view);
  EXPECT_EQ(view->data(), nullptr);
  EXPECT_EQ(moved.data()[2 * kPage], 9);
}

// What a view costs in kernel mappings is known before it is made, is what
// the kernel then holds, and a budget refuses it before anything is mapped.
TEST(GuestPageViewTest, MappingsAreCountedAndBounded) {
  int a = MakeMemfd(64 * kPage);
  auto mem = MapStrict({{0, 64 * kPage, 0x1000'0000, 0, a}});
  ASSERT_TRUE(mem.ok());
  const int table = testing::CountMappingsOf(a);  // the table's own mapping
  // Physically contiguous: one mapping however many pages.
  std::vector<uint64_t> contiguous;
  for (uint64_t i = 8; i < 40; ++i) contiguous.push_back(i * kPage);
  // Scattered (every other page) and aliased (one page 16 times): one each.
  std::vector<uint64_t> scattered, aliased;
  for (uint64_t i = 0; i < 16; ++i) scattered.push_back(2 * i * kPage);
  for (uint64_t i = 0; i < 16; ++i) aliased.push_back(5 * kPage);
  EXPECT_EQ(GuestPageView::CountMappings(**mem, contiguous).value(), 1u);
  EXPECT_EQ(GuestPageView::CountMappings(**mem, scattered).value(), 16u);
  EXPECT_EQ(GuestPageView::CountMappings(**mem, aliased).value(), 16u);

  auto one = GuestPageView::Map(**mem, contiguous, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->mappings(), 1u);
  EXPECT_EQ(testing::CountMappingsOf(a), table + 1);
  auto many = GuestPageView::Map(**mem, scattered, 16);
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->mappings(), 16u);
  EXPECT_EQ(testing::CountMappingsOf(a), table + 1 + 16);

  EXPECT_EQ(GuestPageView::Map(**mem, aliased, 15).status(), Status::kNoResource);
  EXPECT_EQ(testing::CountMappingsOf(a), table + 1 + 16) << "a refused view mapped something";
  *many = GuestPageView();
  EXPECT_EQ(testing::CountMappingsOf(a), table + 1);
}

TEST(GuestPageViewTest, RejectsBadPages) {
  int a = MakeMemfd(8 * kPage);
  int b = MakeMemfd(8 * kPage);
  auto mem = MapStrict({
      {0, 4 * kPage, 0, 0, a},
      {0x100000, 2 * kPage, 0x100000, 100, b},  // not page aligned in the file
  });
  ASSERT_TRUE(mem.ok());
  struct Case {
    const char* name;
    std::vector<uint64_t> pages;
    Status status;
  } cases[] = {
      {"empty", {}, Status::kInvalid},
      {"unaligned", {kPage + 8}, Status::kInvalid},
      {"out of range", {4 * kPage}, Status::kFault},
      {"one bad among good", {0, kPage, 0x900000}, Status::kFault},
      {"huge", {UINT64_MAX & ~(kPage - 1)}, Status::kFault},
      {"unaligned file offset", {0x100000}, Status::kInvalid},
  };
  for (const auto& c : cases) {
    auto v = GuestPageView::Map(**mem, c.pages, kNoLimit);
    EXPECT_FALSE(v.ok()) << c.name;
    EXPECT_EQ(v.status(), c.status) << c.name;
  }
}

TEST(GuestPageViewTest, ViewOutlivesMemoryTable) {
  int a = MakeMemfd(4 * kPage, 7);
  GuestPageView view;
  {
    auto mem = MapStrict({{0, 4 * kPage, 0, 0, a}});
    ASSERT_TRUE(mem.ok());
    const uint64_t pages[] = {2 * kPage};
    auto v = GuestPageView::Map(**mem, pages, kNoLimit);
    ASSERT_TRUE(v.ok());
    view = std::move(*v);
  }
  EXPECT_EQ(view.data()[0], 9);
}

}  // namespace
}  // namespace vrdma
