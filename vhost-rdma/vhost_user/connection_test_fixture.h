// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The ConnectionTest fixture: a real Connection over a unix socket, driven
// from the in-process frontend, with a memfd as guest RAM and a fake
// device. The server thread accepts connection after connection, so "the
// server survives" is tested by connecting again. Used by
// connection_test.cc (the protocol) and connection_hostile_test.cc (what a
// hostile frontend sends).
#ifndef VRDMA_VHOST_RDMA_VHOST_USER_CONNECTION_TEST_FIXTURE_H_
#define VRDMA_VHOST_RDMA_VHOST_USER_CONNECTION_TEST_FIXTURE_H_

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "vhost-rdma/vhost_user/connection.h"
#include "backend/memory/testing/test_mappings.h"
#include "vhost-rdma/vhost_user/eventfd_io.h"
#include "vhost-rdma/vhost_user/frontend.h"
#include "vhost-rdma/vhost_user/vring.h"

namespace vrdma::vhost::connection_testing {

inline constexpr uint64_t kDeviceFeature = 1ull << 3;
inline constexpr uint64_t kRamBytes = 4 << 20;
inline constexpr uint32_t kV = kVhostUserVersion;
inline uint32_t R(Request r) { return static_cast<uint32_t>(r); }

class FakeDevice : public VhostUserDevice {
 public:
  FakeDevice() {
    for (size_t i = 0; i < config_.size(); ++i) config_[i] = static_cast<uint8_t>(0xa0 + i);
  }
  uint64_t device_features() const override { return kDeviceFeature; }
  uint32_t num_queues() const override { return 2; }
  uint16_t max_queue_size() const override { return 256; }
  std::span<const uint8_t> config() const override { return config_; }
  Status SetFeatures(uint64_t acked) override {
    acked_ = acked;
    return Status::kOk;
  }
  void SetMemory(std::shared_ptr<const GuestMemory> memory) override {
    std::lock_guard<std::mutex> l(mu_);
    memory_ = std::move(memory);
    ++memory_sets_;
  }
  Status StartQueue(uint32_t index, Virtqueue& vq) override {
    std::lock_guard<std::mutex> l(mu_);
    vqs_[index] = &vq;
    ++starts_;
    return Status::kOk;
  }
  void StopQueue(uint32_t index) override {
    std::lock_guard<std::mutex> l(mu_);
    vqs_[index] = nullptr;
    ++stops_;
  }
  void SetStatus(uint8_t status) override { status_ = status; }
  // Like RdmaDevice: drops the VM's objects but keeps the memory table (a
  // driver reset keeps the connection and its table); only SetMemory(nullptr)
  // lets go of it.
  void Reset() override {
    std::lock_guard<std::mutex> l(mu_);
    ++resets_;
  }

  Virtqueue* vq(uint32_t i) {
    std::lock_guard<std::mutex> l(mu_);
    return vqs_[i];
  }
  std::shared_ptr<const GuestMemory> memory() {
    std::lock_guard<std::mutex> l(mu_);
    return memory_;
  }

  std::array<uint8_t, 16> config_{};
  std::atomic<uint64_t> acked_{0};
  std::atomic<uint8_t> status_{0};
  std::atomic<int> resets_{0};
  std::atomic<int> starts_{0};
  std::atomic<int> stops_{0};
  std::atomic<int> memory_sets_{0};

 private:
  std::mutex mu_;
  Virtqueue* vqs_[2] = {nullptr, nullptr};
  std::shared_ptr<const GuestMemory> memory_;
};

// Accepts connections one after the other and serves each until it ends.
class Server {
 public:
  explicit Server(FakeDevice* device, const ConnectionOptions& options = {})
      : device_(device), options_(options) {
    static std::atomic<int> counter{0};
    path_ = "/tmp/vrdma-conn-test-" + std::to_string(getpid()) + "-" +
            std::to_string(counter++) + ".sock";
    unlink(path_.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 4), 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  int disconnects() const { return disconnects_; }
  Status last_error() const { return last_error_; }
  // The request of the last complete message (the trace).
  uint32_t last_request() const { return last_request_; }
  // The outcome of the n-th (1-based) message `request` the server traced,
  // waiting for it (the client may see a reply before the server traced
  // the message); kIoError when it never comes.
  Status WaitOutcome(uint32_t request, int n, int timeout_ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      {
        std::lock_guard<std::mutex> l(trace_mu_);
        int seen = 0;
        for (const auto& [req, st] : traced_) {
          if (req == request && ++seen == n) return st;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) return Status::kIoError;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  bool WaitDisconnects(int n, int timeout_ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (disconnects_ < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) != 1) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Connection conn(fd, device_, options_);
      conn.set_trace([this](const VhostUserHeader& h, Status st) {
        last_request_ = h.request;
        std::lock_guard<std::mutex> l(trace_mu_);
        traced_.emplace_back(h.request, st);
      });
      while (!stop_) {
        pollfd c{conn.fd(), POLLIN, 0};
        if (poll(&c, 1, 20) != 1) continue;
        Status st = conn.HandleMessage();
        if (st != Status::kOk) {
          last_error_ = st;
          break;
        }
      }
      conn.Shutdown();
      ++disconnects_;
    }
  }

  FakeDevice* device_;
  const ConnectionOptions options_;
  std::string path_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> disconnects_{0};
  std::atomic<Status> last_error_{Status::kOk};
  std::atomic<uint32_t> last_request_{0};
  std::mutex trace_mu_;
  std::vector<std::pair<uint32_t, Status>> traced_;  // every connection's
  std::thread thread_;
};

inline int CountOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

template <typename T>
std::span<const uint8_t> Bytes(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof(T)};
}

class ConnectionTest : public ::testing::Test {
 protected:
  std::unique_ptr<VhostUserFrontend> Connect() {
    auto fe = VhostUserFrontend::Connect(server_.path(), kRamBytes);
    EXPECT_TRUE(fe.ok());
    return fe.ok() ? std::move(fe.value()) : nullptr;
  }
  std::unique_ptr<VhostUserFrontend> ConnectAndNegotiate() {
    auto fe = Connect();
    if (fe) {
      EXPECT_EQ(fe->Negotiate(kDeviceFeature), Status::kOk);
    }
    return fe;
  }
  // Lays a 64-entry ring out in guest RAM and sets queue `index` up.
  uint64_t SetupRing(VhostUserFrontend& fe, uint32_t index, uint16_t base = 0) {
    auto gpa = fe.AllocGpa(VringBytes(kRing), 4096);
    EXPECT_TRUE(gpa.ok());
    ring_gpa_ = *gpa;
    Avail(fe)->idx = base;
    EXPECT_EQ(fe.SetupQueue(index, kRing, ring_gpa_, ring_gpa_ + VringAvailOffset(kRing),
                            ring_gpa_ + VringUsedOffset(kRing), base),
              Status::kOk);
    return ring_gpa_;
  }
  VringDesc* Desc(VhostUserFrontend& fe) {
    return reinterpret_cast<VringDesc*>(fe.GpaToHost(ring_gpa_, 16 * kRing));
  }
  VringAvail* Avail(VhostUserFrontend& fe) {
    return reinterpret_cast<VringAvail*>(fe.GpaToHost(ring_gpa_ + VringAvailOffset(kRing), 8));
  }
  VringUsed* Used(VhostUserFrontend& fe) {
    return reinterpret_cast<VringUsed*>(fe.GpaToHost(ring_gpa_ + VringUsedOffset(kRing), 8));
  }
  // The driver posts one 8-byte writable buffer.
  void PostBuffer(VhostUserFrontend& fe, uint16_t head, uint64_t buf_gpa) {
    Desc(fe)[head] = VringDesc{buf_gpa, 8, kVringDescFWrite, 0};
    VringAvail* a = Avail(fe);
    a->ring[a->idx % kRing] = head;
    __atomic_store_n(&a->idx, static_cast<uint16_t>(a->idx + 1), __ATOMIC_RELEASE);
  }

  static constexpr uint16_t kRing = 64;
  // Queue 0 of fe set up and started with the frontend's own call and kick
  // eventfds; nullptr (and a test failure) when that fails.
  Virtqueue* StartQueueWithEventfds(VhostUserFrontend& fe, int call, int kick) {
    SetupRing(fe, 0);
    const uint64_t idx = 0;
    EXPECT_EQ(fe.Request(R(Request::kSetVringCall), Bytes(idx), {&call, 1}), Status::kOk);
    EXPECT_EQ(fe.Request(R(Request::kSetVringKick), Bytes(idx), {&kick, 1}), Status::kOk);
    EXPECT_EQ(fe.EnableQueue(0, true), Status::kOk);
    return device_.vq(0);
  }

  FakeDevice device_;
  Server server_{&device_};
  uint64_t ring_gpa_ = 0;
};


}  // namespace vrdma::vhost::connection_testing

#endif  // VRDMA_VHOST_RDMA_VHOST_USER_CONNECTION_TEST_FIXTURE_H_
