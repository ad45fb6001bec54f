// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// What a hostile frontend sends through a real Connection
// (connection_test_fixture.h): malformed messages, memory that can shrink,
// fds of the wrong kind or that can block. Each test names the rule.
#include "vhost-rdma/vhost_user/connection_test_fixture.h"

namespace vrdma::vhost {
namespace {

using namespace connection_testing;  // NOLINT: the fixture's helpers

struct BadMessage {
  const char* name;
  std::function<Status(VhostUserFrontend&)> send;
};

// Sends `fd` as the kick, call or err fd of queue 1 (closes it here).
Status SendVringFd(VhostUserFrontend& fe, Request request, int fd) {
  const uint64_t v = 1;
  Status s = fe.SendRaw(R(request), kV, Bytes(v), {&fd, 1});
  close(fd);
  return s;
}
int PipeReadEnd() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  close(p[1]);
  return p[0];
}
int SocketEnd() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  close(sv[1]);
  return sv[0];
}

// SET_MEM_TABLE with `m` as sent (its nregions may lie) and one 4 KiB memfd,
// sized for one region.
Status SendTableWithOnePage(VhostUserFrontend& fe, VhostUserMemory& m) {
  int fd = memfd_create("a", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(ftruncate(fd, 4096), 0);
  Status s = fe.SendRaw(R(Request::kSetMemTable), kV,
                        {reinterpret_cast<uint8_t*>(&m), MemTablePayloadSize(1)}, {&fd, 1});
  close(fd);
  return s;
}

std::vector<BadMessage> BadMessages() {
  auto eventfd_now = [] { return eventfd(0, EFD_CLOEXEC); };
  return {
      {"vring kick is a pipe", [](VhostUserFrontend& fe) {
         return SendVringFd(fe, Request::kSetVringKick, PipeReadEnd());
       }},
      {"vring kick is a socket", [](VhostUserFrontend& fe) {
         return SendVringFd(fe, Request::kSetVringKick, SocketEnd());
       }},
      {"vring call is a pipe", [](VhostUserFrontend& fe) {
         return SendVringFd(fe, Request::kSetVringCall, PipeReadEnd());
       }},
      {"vring call is a memfd", [](VhostUserFrontend& fe) {
         return SendVringFd(fe, Request::kSetVringCall, memfd_create("x", MFD_CLOEXEC));
       }},
      {"vring err is a socket", [](VhostUserFrontend& fe) {
         return SendVringFd(fe, Request::kSetVringErr, SocketEnd());
       }},
      {"set features wrong size", [](VhostUserFrontend& fe) {
         uint32_t v = 1;
         return fe.SendRaw(R(Request::kSetFeatures), kV, Bytes(v));
       }},
      {"set features not offered", [](VhostUserFrontend& fe) {
         uint64_t v = kFVersion1 | (1ull << 60);
         return fe.SendRaw(R(Request::kSetFeatures), kV, Bytes(v));
       }},
      {"set protocol features not offered", [](VhostUserFrontend& fe) {
         uint64_t v = 1ull << kProtoBackendReq;
         return fe.SendRaw(R(Request::kSetProtocolFeatures), kV, Bytes(v));
       }},
      {"vring num bad index", [](VhostUserFrontend& fe) {
         VhostUserVringState s{2, 64};
         return fe.SendRaw(R(Request::kSetVringNum), kV, Bytes(s));
       }},
      {"vring num oversized", [](VhostUserFrontend& fe) {
         VhostUserVringState s{1, 1024};
         return fe.SendRaw(R(Request::kSetVringNum), kV, Bytes(s));
       }},
      {"vring num not power of two", [](VhostUserFrontend& fe) {
         VhostUserVringState s{1, 100};
         return fe.SendRaw(R(Request::kSetVringNum), kV, Bytes(s));
       }},
      {"vring num while configured", [](VhostUserFrontend& fe) {
         VhostUserVringState s{0, 32};
         return fe.SendRaw(R(Request::kSetVringNum), kV, Bytes(s));
       }},
      {"vring base too big", [](VhostUserFrontend& fe) {
         VhostUserVringState s{1, 0x10000};
         return fe.SendRaw(R(Request::kSetVringBase), kV, Bytes(s));
       }},
      {"vring addr misaligned", [](VhostUserFrontend& fe) {
         VhostUserVringAddr a{1, 0, reinterpret_cast<uint64_t>(fe.guest_ram()) + 8, 0, 0, 0};
         return fe.SendRaw(R(Request::kSetVringAddr), kV, Bytes(a));
       }},
      {"vring addr with log flag", [](VhostUserFrontend& fe) {
         VhostUserVringAddr a{1, 1, 0, 0, 0, 0};
         return fe.SendRaw(R(Request::kSetVringAddr), kV, Bytes(a));
       }},
      {"vring kick missing fd", [](VhostUserFrontend& fe) {
         uint64_t v = 1;
         return fe.SendRaw(R(Request::kSetVringKick), kV, Bytes(v));
       }},
      {"vring kick nofd with fd", [eventfd_now](VhostUserFrontend& fe) {
         uint64_t v = 1 | kVringNoFdMask;
         int fd = eventfd_now();
         Status s = fe.SendRaw(R(Request::kSetVringKick), kV, Bytes(v), {&fd, 1});
         close(fd);
         return s;
       }},
      {"vring call two fds", [eventfd_now](VhostUserFrontend& fe) {
         uint64_t v = 1;
         int fds[2] = {eventfd_now(), eventfd_now()};
         Status s = fe.SendRaw(R(Request::kSetVringCall), kV, Bytes(v), fds);
         close(fds[0]);
         close(fds[1]);
         return s;
       }},
      {"vring call bad index", [eventfd_now](VhostUserFrontend& fe) {
         uint64_t v = 7;
         int fd = eventfd_now();
         Status s = fe.SendRaw(R(Request::kSetVringCall), kV, Bytes(v), {&fd, 1});
         close(fd);
         return s;
       }},
      {"vring call unknown bits", [eventfd_now](VhostUserFrontend& fe) {
         uint64_t v = 1 | (1ull << 40);
         int fd = eventfd_now();
         Status s = fe.SendRaw(R(Request::kSetVringCall), kV, Bytes(v), {&fd, 1});
         close(fd);
         return s;
       }},
      {"fd on a message that takes none", [eventfd_now](VhostUserFrontend& fe) {
         uint64_t v = 0;
         int fd = eventfd_now();
         Status s = fe.SendRaw(R(Request::kSetStatus), kV, Bytes(v), {&fd, 1});
         close(fd);
         return s;
       }},
      {"vring enable bad value", [](VhostUserFrontend& fe) {
         VhostUserVringState s{0, 2};
         return fe.SendRaw(R(Request::kSetVringEnable), kV, Bytes(s));
       }},
      {"get vring base bad index", [](VhostUserFrontend& fe) {
         VhostUserVringState s{9, 0};
         return fe.SendRaw(R(Request::kGetVringBase), kV, Bytes(s));
       }},
      {"mem table fewer fds than regions", [eventfd_now](VhostUserFrontend& fe) {
         VhostUserMemory m{};
         m.nregions = 2;
         m.regions[0] = {0, 4096, 0x10000, 0};
         m.regions[1] = {0x100000, 4096, 0x20000, 0};
         int fd = eventfd_now();
         Status s = fe.SendRaw(R(Request::kSetMemTable), kV,
                               {reinterpret_cast<uint8_t*>(&m), MemTablePayloadSize(2)}, {&fd, 1});
         close(fd);
         return s;
       }},
      {"mem table region beyond file", [](VhostUserFrontend& fe) {
         VhostUserMemory m{};
         m.nregions = 1;
         m.regions[0] = {0, fe.ram_size() * 2, reinterpret_cast<uint64_t>(fe.guest_ram()), 0};
         int fd = memfd_create("short", MFD_CLOEXEC | MFD_ALLOW_SEALING);
         EXPECT_EQ(ftruncate(fd, static_cast<off_t>(fe.ram_size())), 0);
         Status s = fe.SendRaw(R(Request::kSetMemTable), kV,
                               {reinterpret_cast<uint8_t*>(&m), MemTablePayloadSize(1)}, {&fd, 1});
         close(fd);
         return s;
       }},
      {"mem table overlapping regions", [](VhostUserFrontend& fe) {
         VhostUserMemory m{};
         m.nregions = 2;
         m.regions[0] = {0, 8192, 0x10000, 0};
         m.regions[1] = {4096, 8192, 0x90000, 0};
         int fds[2] = {memfd_create("a", MFD_CLOEXEC | MFD_ALLOW_SEALING),
                       memfd_create("b", MFD_CLOEXEC | MFD_ALLOW_SEALING)};
         EXPECT_EQ(ftruncate(fds[0], 8192), 0);
         EXPECT_EQ(ftruncate(fds[1], 8192), 0);
         Status s = fe.SendRaw(R(Request::kSetMemTable), kV,
                               {reinterpret_cast<uint8_t*>(&m), MemTablePayloadSize(2)}, fds);
         close(fds[0]);
         close(fds[1]);
         return s;
       }},
      {"mem table size disagrees with nregions", [](VhostUserFrontend& fe) {
         VhostUserMemory m{};
         m.nregions = 3;
         m.regions[0] = {0, 4096, 0x10000, 0};
         return SendTableWithOnePage(fe, m);
       }},
      {"mem table drops the running ring", [](VhostUserFrontend& fe) {
         // Valid table, but at a user address where the ring no longer is.
         VhostUserMemory m{};
         m.nregions = 1;
         m.regions[0] = {0, 4096, 0x1000, 0};
         return SendTableWithOnePage(fe, m);
       }},
      {"get config out of range", [](VhostUserFrontend& fe) {
         VhostUserConfig c{};
         c.offset = 250;
         c.size = 8;
         return fe.SendRaw(R(Request::kGetConfig), kV,
                           {reinterpret_cast<uint8_t*>(&c), ConfigPayloadSize(8)});
       }},
      {"get config size exceeds payload", [](VhostUserFrontend& fe) {
         VhostUserConfig c{};
         c.size = 64;
         return fe.SendRaw(R(Request::kGetConfig), kV,
                           {reinterpret_cast<uint8_t*>(&c), ConfigPayloadSize(4)});
       }},
      {"set status too big", [](VhostUserFrontend& fe) {
         uint64_t v = 0x100;
         return fe.SendRaw(R(Request::kSetStatus), kV, Bytes(v));
       }},
      {"unknown request", [](VhostUserFrontend& fe) {
         return fe.SendRaw(99, kV, {});
       }},
      {"unsupported request", [](VhostUserFrontend& fe) {
         uint64_t v = 0;
         return fe.SendRaw(R(Request::kSetLogBase), kV, Bytes(v));
       }},
      {"bad version", [](VhostUserFrontend& fe) {
         return fe.SendRaw(R(Request::kGetFeatures), 2, {});
       }},
      {"reply flag on a request", [](VhostUserFrontend& fe) {
         return fe.SendRaw(R(Request::kGetFeatures), kV | kReplyMask, {});
       }},
      {"header claims huge payload", [](VhostUserFrontend& fe) {
         VhostUserHeader h{R(Request::kSetMemTable), kV, 1u << 30};
         return send(fe.socket_fd(), &h, sizeof(h), MSG_NOSIGNAL) == sizeof(h) ? Status::kOk
                                                                                 : Status::kIoError;
       }},
      {"closed mid-message", [](VhostUserFrontend& fe) {
         VhostUserHeader h{R(Request::kSetFeatures), kV, 8};
         uint8_t buf[sizeof(h) + 4] = {};
         std::memcpy(buf, &h, sizeof(h));
         if (send(fe.socket_fd(), buf, sizeof(buf), MSG_NOSIGNAL) != sizeof(buf)) {
           return Status::kIoError;
         }
         return shutdown(fe.socket_fd(), SHUT_WR) == 0 ? Status::kOk : Status::kIoError;
       }},
  };
}

TEST_F(ConnectionTest, MalformedMessagesDisconnectAndServerSurvives) {
  const int baseline_fds = CountOpenFds();
  int expected_disconnects = 0;
  for (const auto& bad : BadMessages()) {
    {
      auto fe = ConnectAndNegotiate();
      ASSERT_NE(fe, nullptr) << bad.name;
      SetupRing(*fe, 0);
      ASSERT_EQ(fe->EnableQueue(0, true), Status::kOk) << bad.name;
      ASSERT_NE(device_.vq(0), nullptr);
      const int resets = device_.resets_;
      ASSERT_EQ(bad.send(*fe), Status::kOk) << bad.name;
      // The server drops the connection (a stalled peer after its timeout).
      ASSERT_TRUE(server_.WaitDisconnects(++expected_disconnects)) << bad.name;
      EXPECT_FALSE(fe->GetStatus().ok()) << bad.name;
      EXPECT_EQ(device_.vq(0), nullptr) << bad.name << ": queue left running";
      EXPECT_EQ(device_.resets_, resets + 1) << bad.name;
      // Rejected for the intended reason (most are kInvalid).
      const std::string name = bad.name;
      Status want = Status::kInvalid;
      if (name == "vring num while configured") want = Status::kBadState;
      if (name == "vring addr with log flag" || name == "unknown request" ||
          name == "unsupported request") {
        want = Status::kUnsupported;
      }
      if (name == "mem table drops the running ring") want = Status::kFault;
      if (name == "closed mid-message") want = Status::kIoError;
      if (name.find(" is a ") != std::string::npos) want = Status::kBadHandle;
      EXPECT_EQ(server_.last_error(), want) << bad.name;
    }
    // Every fd the frontend sent, valid or not, was closed by the server.
    EXPECT_EQ(CountOpenFds(), baseline_fds) << bad.name << ": fd leak";
  }
  // Still serving.
  auto fe = ConnectAndNegotiate();
  ASSERT_NE(fe, nullptr);
  EXPECT_TRUE(fe->GetConfig(0, 4).ok());
}

// --- Hostile frontends: memory that can shrink, fds that can block. -------

// SET_MEM_TABLE of the whole guest RAM from `fd` (closed here), acked.
Status SendMemTableFrom(VhostUserFrontend& fe, int fd) {
  VhostUserMemory m{};
  m.nregions = 1;
  m.regions[0] = {0, fe.ram_size(), reinterpret_cast<uint64_t>(fe.guest_ram()), 0};
  Status s = fe.Request(R(Request::kSetMemTable),
                        {reinterpret_cast<uint8_t*>(&m), MemTablePayloadSize(1)}, {&fd, 1});
  close(fd);
  return s;
}

int UnsealableMemfd(uint64_t bytes) {
  int fd = memfd_create("unsealable", MFD_CLOEXEC);  // no MFD_ALLOW_SEALING
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  return fd;
}

// Rule: a region whose file cannot be sealed against shrinking is refused
// (kAccess, NACKed); the connection and the previous table stay.
TEST_F(ConnectionTest, UnsealedMemTableIsRefused) {
  auto fe = ConnectAndNegotiate();
  ASSERT_NE(fe, nullptr);
  auto before = device_.memory();
  ASSERT_NE(before, nullptr);
  const int baseline_fds = CountOpenFds();
  const int fd = UnsealableMemfd(fe->ram_size());
  EXPECT_EQ(SendMemTableFrom(*fe, fd), Status::kIoError);  // NACK
  // Negotiate sent the first table; this is the second.
  EXPECT_EQ(server_.WaitOutcome(R(Request::kSetMemTable), 2), Status::kAccess);  // sealing rule
  EXPECT_EQ(device_.memory(), before);  // the old table is still in use
  EXPECT_TRUE(fe->GetStatus().ok());
  EXPECT_EQ(server_.disconnects(), 0);
  EXPECT_EQ(CountOpenFds(), baseline_fds);  // the refused fd was closed
}

// Rule: the backend seals what it accepts: a frontend that truncates its
// guest RAM later gets EPERM, and the backend keeps serving the ring.
TEST_F(ConnectionTest, SealedMemTableHoldsAgainstTruncation) {
  auto fe = ConnectAndNegotiate();  // sealable memfd, not sealed by the frontend
  ASSERT_NE(fe, nullptr);
  SetupRing(*fe, 0);
  ASSERT_EQ(fe->EnableQueue(0, true), Status::kOk);
  EXPECT_TRUE(fcntl(fe->memfd(), F_GET_SEALS) & F_SEAL_SHRINK);
  errno = 0;
  EXPECT_EQ(ftruncate(fe->memfd(), 0), -1);
  EXPECT_EQ(errno, EPERM);
  // The tail of guest RAM is still backed (no SIGBUS) and the ring works.
  auto mem = device_.memory();
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(*mem->Translate(fe->ram_size() - 1, 1).value(), 0);
  Virtqueue* vq = device_.vq(0);
  ASSERT_NE(vq, nullptr);
  auto buf = fe->AllocGpa(8, 8);
  PostBuffer(*fe, 1, *buf);
  auto chain = vq->Pop();
  ASSERT_TRUE(chain.has_value() && chain->ok());
  vq->Push(1, 0);
  vq->NotifyGuest();
  EXPECT_EQ(fe->WaitCall(0, 1000), Status::kOk);
}

// The operator's choice: with allow_unsealed the same table is accepted.
TEST(ConnectionOptionsTest, AllowUnsealedMemoryAcceptsUnsealedRegion) {
  FakeDevice device;
  Server server(&device, ConnectionOptions{.memory = {.allow_unsealed = true}});
  auto fe = VhostUserFrontend::Connect(server.path(), kRamBytes);
  ASSERT_TRUE(fe.ok());
  ASSERT_EQ((*fe)->Negotiate(kDeviceFeature), Status::kOk);
  auto before = device.memory();
  EXPECT_EQ(SendMemTableFrom(**fe, UnsealableMemfd((*fe)->ram_size())), Status::kOk);
  EXPECT_EQ(server.WaitOutcome(R(Request::kSetMemTable), 2), Status::kOk);
  EXPECT_NE(device.memory(), before);
  EXPECT_NE(device.memory(), nullptr);
}

// Rule: kick/call/err fds must be eventfds. A pipe as kick fd is refused
// (kBadHandle, NACK, disconnect) and the backend's copy is closed: the
// write end sees no reader left.
TEST_F(ConnectionTest, PipeAsKickFdIsRefusedAndClosed) {
  auto fe = ConnectAndNegotiate();
  ASSERT_NE(fe, nullptr);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  const uint64_t v = 0;
  EXPECT_EQ(fe->Request(R(Request::kSetVringKick), Bytes(v), {&p[0], 1}), Status::kIoError);
  close(p[0]);  // the frontend's copy; the backend's is the last reader
  ASSERT_TRUE(server_.WaitDisconnects(1));
  EXPECT_EQ(server_.last_error(), Status::kBadHandle);  // the eventfd rule
  EXPECT_EQ(server_.last_request(), R(Request::kSetVringKick));
  pollfd w{p[1], POLLOUT, 0};
  ASSERT_EQ(poll(&w, 1, 1000), 1);
  EXPECT_TRUE(w.revents & POLLERR) << "the backend still holds the pipe";
  close(p[1]);
}

// Runs `op` on another thread; true when it returns within 2 s. Otherwise
// runs `unblock` (which must let `op` return) and returns false, so a test
// of "does not block" fails instead of hanging.
bool ReturnsPromptly(const std::function<void()>& op, const std::function<void()>& unblock) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    op();
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool blocked = !done;
  if (blocked) unblock();
  t.join();
  return !blocked;
}

// Rule: kick/call fds are made non-blocking. A call eventfd the frontend
// created blocking and pre-filled to the counter's maximum: signalling it
// returns at once (EAGAIN = already signalled) and the ring keeps working.
TEST_F(ConnectionTest, FullCallEventfdDoesNotBlockTheBackend) {
  auto fe = ConnectAndNegotiate();
  ASSERT_NE(fe, nullptr);
  const int call = eventfd(0, EFD_CLOEXEC);  // blocking, as a hostile frontend may
  const int kick = eventfd(0, EFD_CLOEXEC);
  const uint64_t max = 0xfffffffffffffffe;
  ASSERT_EQ(write(call, &max, sizeof(max)), 8);
  Virtqueue* vq = StartQueueWithEventfds(*fe, call, kick);
  ASSERT_NE(vq, nullptr);
  EXPECT_TRUE(fcntl(vq->call_fd, F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(fcntl(vq->kick_fd, F_GETFL) & O_NONBLOCK);
  // No kick yet: a read returns at once ("no kick").
  uint64_t got = 0;
  ssize_t n = 0;
  int err = 0;
  EXPECT_TRUE(ReturnsPromptly(
      [&] {
        n = read(vq->kick_fd, &got, sizeof(got));
        err = errno;
      },
      [&] {
        const uint64_t one = 1;
        (void)!write(kick, &one, sizeof(one));
      }))
      << "the backend blocked reading an empty kick eventfd";
  EXPECT_EQ(n, -1);
  EXPECT_EQ(err, EAGAIN);

  auto buf = fe->AllocGpa(8, 8);
  auto serve_one = [&](uint16_t head) {
    // EVENT_IDX: the driver wants an interrupt for this very buffer.
    Avail(*fe)->ring[kRing] = Used(*fe)->idx;
    PostBuffer(*fe, head, *buf);
    auto chain = vq->Pop();
    ASSERT_TRUE(chain.has_value() && chain->ok());
    vq->Push(head, 0);
    // On a blocking fd this write would wait for the frontend forever;
    // draining the counter unblocks it.
    EXPECT_TRUE(ReturnsPromptly([&] { vq->NotifyGuest(); },
                                [&] { (void)!read(call, &got, sizeof(got)); }))
        << "the backend blocked writing a full call eventfd";
  };
  serve_one(0);
  EXPECT_EQ(Used(*fe)->idx, 1);
  // The guest consumes the (already pending) interrupt; the next one arrives.
  ASSERT_EQ(read(call, &got, sizeof(got)), 8);
  EXPECT_EQ(got, max);
  serve_one(1);
  EXPECT_EQ(Used(*fe)->idx, 2);
  ASSERT_EQ(read(call, &got, sizeof(got)), 8);
  EXPECT_EQ(got, 1u);
  close(call);
  close(kick);
}

// Rule: a call fd the frontend made blocking again (it shares the file
// description) and filled is given up when the watchdog interrupts the
// write, and the connection ends at the frontend's next message.
TEST_F(ConnectionTest, CallFdMadeBlockingAgainEndsTheConnection) {
  auto watchdog = FdWatchdog::Start(std::chrono::milliseconds(5));
  ASSERT_NE(watchdog, nullptr);
  auto fe = ConnectAndNegotiate();
  ASSERT_NE(fe, nullptr);
  const int call = eventfd(0, EFD_CLOEXEC);
  const int kick = eventfd(0, EFD_CLOEXEC);
  Virtqueue* vq = StartQueueWithEventfds(*fe, call, kick);
  ASSERT_NE(vq, nullptr);
  // The daemon made it non-blocking; the frontend undoes that and fills it.
  ASSERT_TRUE(fcntl(call, F_GETFL) & O_NONBLOCK);
  ASSERT_EQ(fcntl(call, F_SETFL, fcntl(call, F_GETFL) & ~O_NONBLOCK), 0);
  const uint64_t max = 0xfffffffffffffffe;
  ASSERT_EQ(write(call, &max, sizeof(max)), 8);

  auto buf = fe->AllocGpa(8, 8);
  Avail(*fe)->ring[kRing] = Used(*fe)->idx;
  PostBuffer(*fe, 0, *buf);
  auto chain = vq->Pop();
  ASSERT_TRUE(chain.has_value() && chain->ok());
  vq->Push(0, 0);
  uint64_t got;
  EXPECT_TRUE(ReturnsPromptly(
      [&] {
        watchdog->WatchThisThread();
        vq->NotifyGuest();
      },
      [&] { (void)!read(call, &got, sizeof(got)); }))
      << "the backend blocked writing a call eventfd made blocking";
  EXPECT_TRUE(vq->call_stalled());
  EXPECT_GE(watchdog->interrupts(), 1u);  // more if preempted inside the call
  // The next message finds the stalled queue: the connection is gone.
  EXPECT_NE(fe->Request(R(Request::kGetFeatures), {}, {}), Status::kOk);
  close(call);
  close(kick);
}

// Rule: a gone frontend takes its guest RAM along: the connection and the
// device let go of the table and the backend's mapping of it is removed.
}  // namespace
}  // namespace vrdma::vhost
