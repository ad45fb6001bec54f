// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// The in-process guest driver against the real vhost-user protocol layer and
// a scripted virtio-rdma device (FakeVhostBackend): config read, control
// commands (byte stream, page lists, statuses), doorbell records and their
// recycling, event buffers, and the librxe rings the verbs layer hands over.
#include "guest-driver/lib/virtio_rdma_driver.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "guest-driver/lib/testing/fake_vhost_backend.h"
#include "guest-driver/lib/verbs.h"

namespace vrdma::guest {
namespace {

using testing::FakeVhostBackend;

constexpr uint32_t kDoorbellQueues = 2;
constexpr uint32_t kNumQueues = VIRTIO_RDMA_VQ_DOORBELL0 + kDoorbellQueues;

// A scripted device: answers commands, records everything it sees.
struct FakeRdmaDevice {
  std::mutex mu;
  std::vector<uint32_t> cmds;
  std::vector<uint8_t> last_request;    // request struct + page list
  std::vector<std::pair<uint32_t, virtio_rdma_doorbell>> doorbells;  // (queue, rec)
  std::deque<virtio_rdma_event> to_send;
  uint32_t next_handle = 100;
  uint32_t fail_status = 0;              // answer every command with this
  bool swallow = false;                  // never answer (a hung device)

  void Handle(uint32_t index, vhost::Virtqueue& vq, const vhost::DescChain& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (index == VIRTIO_RDMA_VQ_EVENT) {  // kept until an event is due
      event_chains.push_back(c);
      return;
    }
    if (index >= VIRTIO_RDMA_VQ_DOORBELL0) {
      virtio_rdma_doorbell db{};
      c.Read(0, {reinterpret_cast<uint8_t*>(&db), sizeof(db)});
      doorbells.push_back({index - VIRTIO_RDMA_VQ_DOORBELL0, db});
      vq.Push(c.head, 0);
      return;
    }
    if (swallow) return;
    std::vector<uint8_t> in(c.readable_bytes());
    c.Read(0, in);
    virtio_rdma_cmd_hdr hdr{};
    std::memcpy(&hdr, in.data(), sizeof(hdr));
    cmds.push_back(hdr.cmd);
    last_request.assign(in.begin() + sizeof(hdr), in.end());
    std::vector<uint8_t> out(sizeof(virtio_rdma_resp_hdr));
    virtio_rdma_resp_hdr rh{fail_status, 0};
    auto append = [&](const auto& body) {
      const auto* p = reinterpret_cast<const uint8_t*>(&body);
      out.insert(out.end(), p, p + sizeof(body));
    };
    if (fail_status == 0) {
      switch (hdr.cmd) {
        case VIRTIO_RDMA_CMD_QUERY_DEVICE: {
          virtio_rdma_resp_query_device r{};
          r.max_qp = 77;
          r.vendor_id = 0x1af4;
          append(r);
          break;
        }
        case VIRTIO_RDMA_CMD_CREATE_PD:
          append(virtio_rdma_resp_create_pd{next_handle++, 0});
          break;
        case VIRTIO_RDMA_CMD_REG_MR:
          append(virtio_rdma_resp_reg_mr{next_handle++, 0x1234, 0x5678, 0});
          break;
        case VIRTIO_RDMA_CMD_CREATE_CQ: {
          virtio_rdma_req_create_cq req;
          std::memcpy(&req, last_request.data(), sizeof(req));
          append(virtio_rdma_resp_create_cq{next_handle++, req.cqe});
          break;
        }
        case VIRTIO_RDMA_CMD_CREATE_QP: {
          virtio_rdma_req_create_qp req;
          std::memcpy(&req, last_request.data(), sizeof(req));
          virtio_rdma_resp_create_qp r{};
          r.qpn = next_handle++;
          r.cap = req.cap;
          append(r);
          break;
        }
        case VIRTIO_RDMA_CMD_DESTROY_PD:
        case VIRTIO_RDMA_CMD_DEREG_MR:
        case VIRTIO_RDMA_CMD_DESTROY_CQ:
        case VIRTIO_RDMA_CMD_DESTROY_QP:
          break;
        default:
          rh.status = VIRTIO_RDMA_ERR_UNSUPPORTED;
      }
    }
    std::memcpy(out.data(), &rh, sizeof(rh));
    const size_t n = c.Write(0, out);
    vq.Push(c.head, static_cast<uint32_t>(n));
  }

  void Tick(std::vector<vhost::Virtqueue*>& queues) {
    std::lock_guard<std::mutex> lock(mu);
    vhost::Virtqueue* evq = queues[VIRTIO_RDMA_VQ_EVENT];
    if (evq == nullptr) return;
    while (!to_send.empty() && !event_chains.empty()) {
      const vhost::DescChain& c = event_chains.front();
      const virtio_rdma_event ev = to_send.front();
      c.Write(0, {reinterpret_cast<const uint8_t*>(&ev), sizeof(ev)});
      evq->Push(c.head, sizeof(ev));
      event_chains.pop_front();
      to_send.pop_front();
    }
  }
  std::deque<vhost::DescChain> event_chains;
};

class VirtioRdmaDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = "/tmp/vrdma-drv-test-" + std::to_string(getpid()) + ".sock";
    virtio_rdma_config cfg{};
    cfg.abi_version = VIRTIO_RDMA_ABI_VERSION;
    cfg.num_doorbell_queues = kDoorbellQueues;
    cfg.max_qp = 16;
    cfg.max_mr_pages = 1024;
    cfg.num_gids = 1;
    cfg.gids[0][15] = 7;
    std::vector<uint8_t> bytes(sizeof(cfg));
    std::memcpy(bytes.data(), &cfg, sizeof(cfg));
    FakeVhostBackend::Options o;
    o.socket_path = socket_;
    o.num_queues = kNumQueues;
    o.device_features = (1ull << VIRTIO_RDMA_F_UD);
    o.config = bytes;
    backend_ = std::make_unique<FakeVhostBackend>(
        o,
        [this](uint32_t i, vhost::Virtqueue& vq, const vhost::DescChain& c) {
          dev_.Handle(i, vq, c);
        },
        [this](std::vector<vhost::Virtqueue*>& q) { dev_.Tick(q); });
    ASSERT_EQ(backend_->Start(), Status::kOk);
    DriverOptions opts;
    opts.ram_bytes = 64 << 20;
    opts.doorbell_queues = 2;
    opts.doorbell_queue_size = 8;
    opts.timeout_ms = 3000;
    auto dev = Device::Open(socket_, opts);
    ASSERT_TRUE(dev.ok()) << StatusName(dev.status());
    device_ = std::move(dev.value());
  }
  void TearDown() override {
    device_.reset();
    backend_.reset();
  }

  FakeRdmaDevice dev_;
  std::string socket_;
  std::unique_ptr<FakeVhostBackend> backend_;
  std::unique_ptr<Device> device_;
};

TEST_F(VirtioRdmaDriverTest, ReadsConfigAndReachesDriverOk) {
  EXPECT_EQ(device_->config().abi_version, VIRTIO_RDMA_ABI_VERSION);
  EXPECT_EQ(device_->config().max_qp, 16u);
  EXPECT_EQ(device_->config().gids[0][15], 7);
  EXPECT_EQ(device_->driver().num_doorbell_queues(), 2u);
  EXPECT_TRUE(backend_->last_status() & 0x4);  // VIRTIO_CONFIG_S_DRIVER_OK
  EXPECT_TRUE(backend_->acked_features() & (1ull << VIRTIO_RDMA_F_UD));
}

TEST_F(VirtioRdmaDriverTest, CommandsRoundTripWithResponses) {
  auto attr = device_->QueryDevice();
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->max_qp, 77u);
  EXPECT_EQ(attr->vendor_id, 0x1af4u);
  auto pd1 = device_->AllocPd();
  auto pd2 = device_->AllocPd();
  ASSERT_TRUE(pd1.ok() && pd2.ok());
  EXPECT_NE((*pd1)->handle(), (*pd2)->handle());
  std::lock_guard<std::mutex> lock(dev_.mu);
  ASSERT_GE(dev_.cmds.size(), 3u);
  EXPECT_EQ(dev_.cmds[0], VIRTIO_RDMA_CMD_QUERY_DEVICE);
  EXPECT_EQ(dev_.cmds[1], VIRTIO_RDMA_CMD_CREATE_PD);
}

TEST_F(VirtioRdmaDriverTest, DeviceErrorStatusIsReturned) {
  { std::lock_guard<std::mutex> lock(dev_.mu); dev_.fail_status = VIRTIO_RDMA_ERR_NO_RESOURCE; }
  auto pd = device_->AllocPd();
  EXPECT_EQ(pd.status(), Status::kNoResource);
  { std::lock_guard<std::mutex> lock(dev_.mu); dev_.fail_status = 0; }
  // A command the fake does not know: ERR_UNSUPPORTED.
  virtio_rdma_req_handle req{1, 0};
  EXPECT_EQ(device_->driver().Command(VIRTIO_RDMA_CMD_MODIFY_SRQ,
                                      {reinterpret_cast<uint8_t*>(&req), sizeof(req)}, {}, {}),
            Status::kUnsupported);
}

TEST_F(VirtioRdmaDriverTest, RegMrSendsPageListCoveringTheBuffer) {
  auto pd = device_->AllocPd();
  ASSERT_TRUE(pd.ok());
  constexpr uint64_t kLen = 3 * 4096 + 10;
  auto mr = device_->RegMr(**pd, kLen, VIRTIO_RDMA_ACCESS_LOCAL_WRITE | VIRTIO_RDMA_ACCESS_REMOTE_READ, 100);
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ((*mr)->lkey(), 0x1234u);
  EXPECT_EQ((*mr)->rkey(), 0x5678u);
  std::vector<uint8_t> req;
  { std::lock_guard<std::mutex> lock(dev_.mu); req = dev_.last_request; }
  virtio_rdma_req_reg_mr r;
  ASSERT_GE(req.size(), sizeof(r));
  std::memcpy(&r, req.data(), sizeof(r));
  EXPECT_EQ(r.pd_handle, (*pd)->handle());
  EXPECT_EQ(r.length, kLen);
  EXPECT_EQ(r.first_page_offset, 100u);
  EXPECT_EQ(r.iova, (*mr)->iova());
  EXPECT_EQ(r.npages, 4u);  // 100 + 3*4096 + 10 bytes span 4 pages
  ASSERT_EQ(req.size(), sizeof(r) + 8 * r.npages);
  auto mem = backend_->memory();
  ASSERT_NE(mem, nullptr);
  for (uint32_t i = 0; i < r.npages; ++i) {
    uint64_t gpa;
    std::memcpy(&gpa, req.data() + sizeof(r) + 8 * i, 8);
    EXPECT_EQ(gpa % 4096, 0u);
    // Writing through the backend's view of page i shows up in the MR.
    auto host = mem->Translate(gpa, 4096);
    ASSERT_TRUE(host.ok());
    (*host)[200] = static_cast<uint8_t>(0xa0 + i);
    EXPECT_EQ((*mr)->data()[i * 4096 + 100], static_cast<uint8_t>(0xa0 + i));
  }
}

// A page list larger than the driver's 64 KiB command scratch travels in a
// buffer of its own, which is returned afterwards.
TEST_F(VirtioRdmaDriverTest, LargePageListUsesItsOwnBuffer) {
  auto pd = device_->AllocPd();
  ASSERT_TRUE(pd.ok());
  const uint64_t free_before = device_->driver().ram().free_bytes();
  constexpr uint64_t kLen = 40ull << 20;  // 10240 pages: an 80 KiB page list
  auto mr = device_->RegMr(**pd, kLen, VIRTIO_RDMA_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(mr.ok()) << StatusName(mr.status());
  std::vector<uint8_t> req;
  { std::lock_guard<std::mutex> lock(dev_.mu); req = dev_.last_request; }
  virtio_rdma_req_reg_mr r;
  std::memcpy(&r, req.data(), sizeof(r));
  EXPECT_EQ(r.npages, 10240u);
  ASSERT_EQ(req.size(), sizeof(r) + 8ull * 10240);
  uint64_t first, last;
  std::memcpy(&first, req.data() + sizeof(r), 8);
  std::memcpy(&last, req.data() + req.size() - 8, 8);
  EXPECT_EQ(last - first, 10239ull * 4096);
  // Only the MR's own pages stay allocated: the command buffer was freed.
  EXPECT_EQ(device_->driver().ram().free_bytes(), free_before - kLen);
  mr->reset();
  EXPECT_EQ(device_->driver().ram().free_bytes(), free_before);
}

// A device that never answers fails the command after the timeout (3 s
// here) instead of hanging the guest; the rekick happened on the way.
TEST_F(VirtioRdmaDriverTest, UnansweredCommandTimesOut) {
  { std::lock_guard<std::mutex> lock(dev_.mu); dev_.swallow = true; }
  const auto t0 = std::chrono::steady_clock::now();
  auto pd = device_->AllocPd();
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(pd.status(), Status::kIoError);
  EXPECT_GE(waited, std::chrono::milliseconds(2900));
  EXPECT_LT(waited, std::chrono::seconds(30));
  EXPECT_GT(device_->driver().rekicks(), 0u);
}

TEST_F(VirtioRdmaDriverTest, DoorbellsArriveInOrderAndBuffersAreRecycled) {
  // 8-entry doorbell queues: 50 doorbells need recycling from the used ring.
  for (uint32_t i = 0; i < 50; ++i) {
    ASSERT_EQ(device_->driver().Doorbell(VIRTIO_RDMA_DB_SQ, 1000 + i, i % 2), Status::kOk);
  }
  for (int spin = 0; spin < 2000; ++spin) {
    { std::lock_guard<std::mutex> lock(dev_.mu); if (dev_.doorbells.size() == 50) break; }
    usleep(1000);
  }
  std::lock_guard<std::mutex> lock(dev_.mu);
  ASSERT_EQ(dev_.doorbells.size(), 50u);
  uint32_t next[2] = {1000, 1001};
  for (const auto& [q, db] : dev_.doorbells) {
    ASSERT_LT(q, 2u);
    EXPECT_EQ(db.kind, VIRTIO_RDMA_DB_SQ);
    EXPECT_EQ(db.handle, next[q]);  // in order per queue
    next[q] += 2;
  }
}

TEST_F(VirtioRdmaDriverTest, EventsAreDeliveredAndBuffersReposted) {
  // More events than the 64 buffers: reposting must keep them flowing.
  int got = 0;
  for (uint32_t i = 0; i < 200; ++i) {
    { std::lock_guard<std::mutex> lock(dev_.mu); dev_.to_send.push_back({VIRTIO_RDMA_EV_CQ_COMP, i, 0, 0}); }
    std::optional<virtio_rdma_event> ev;
    for (int spin = 0; spin < 100000 && !ev; ++spin) {
      ev = device_->driver().PollEvent();
      if (!ev) usleep(10);
    }
    ASSERT_TRUE(ev) << i;
    EXPECT_EQ(ev->type, VIRTIO_RDMA_EV_CQ_COMP);
    EXPECT_EQ(ev->handle, i);
    ++got;
  }
  EXPECT_EQ(got, 200);
}

TEST_F(VirtioRdmaDriverTest, QpRingsAreLibrxeLayoutInTheirPages) {
  auto pd = device_->AllocPd();
  auto cq = device_->CreateCq(100);
  ASSERT_TRUE(pd.ok() && cq.ok());
  {
    std::lock_guard<std::mutex> lock(dev_.mu);
    virtio_rdma_req_create_cq r;
    std::memcpy(&r, dev_.last_request.data(), sizeof(r));
    EXPECT_EQ(r.cqe, 100u);
    EXPECT_EQ(r.ring.log2_num_elem, 7u);  // 128 slots > 100
    EXPECT_EQ(r.ring.log2_elem_size, 6u);
    EXPECT_EQ(r.ring.npages, 3u);          // 384 + 8192 bytes
    EXPECT_EQ(dev_.last_request.size(), sizeof(r) + 8 * 3);
  }
  QpInitAttr qa;
  qa.send_cq = cq->get();
  qa.recv_cq = cq->get();
  qa.max_send_wr = 15;
  qa.max_recv_wr = 31;
  qa.max_send_sge = 2;
  qa.max_recv_sge = 1;
  auto qp = device_->CreateQp(**pd, qa);
  ASSERT_TRUE(qp.ok());
  virtio_rdma_req_create_qp r;
  std::vector<uint64_t> pages;
  {
    std::lock_guard<std::mutex> lock(dev_.mu);
    std::memcpy(&r, dev_.last_request.data(), sizeof(r));
    pages.resize((dev_.last_request.size() - sizeof(r)) / 8);
    std::memcpy(pages.data(), dev_.last_request.data() + sizeof(r), pages.size() * 8);
  }
  EXPECT_EQ(r.sq.log2_num_elem, 4u);
  EXPECT_EQ(r.sq.log2_elem_size, 8u);  // 208 + 2*16 -> 256
  EXPECT_EQ(r.rq.log2_num_elem, 5u);
  EXPECT_EQ(r.rq.log2_elem_size, 6u);  // 40 + 16 -> 64
  ASSERT_EQ(pages.size(), r.sq.npages + r.rq.npages);

  // Post a WQE and read it back through the device's view of the SQ pages,
  // at the byte offsets the ABI fixes.
  SendWr wr;
  wr.wr_id = 0xfeed;
  wr.opcode = IB_UVERBS_WR_RDMA_WRITE;
  wr.send_flags = kSendSignaled;
  wr.num_sge = 2;
  wr.sge[0] = {0x1000, 10, 0x11};
  wr.sge[1] = {0x2000, 20, 0x22};
  wr.remote_addr = 0xabc000;
  wr.rkey = 0x99;
  ASSERT_EQ((*qp)->PostSend(wr), Status::kOk);
  auto mem = backend_->memory();
  auto sq = mem->Translate(pages[0], 4096);
  ASSERT_TRUE(sq.ok());
  auto* hdr = reinterpret_cast<rxe_queue_buf*>(*sq);
  EXPECT_EQ(hdr->log2_elem_size, 8u);
  EXPECT_EQ(hdr->index_mask, 15u);
  EXPECT_EQ(hdr->producer_index, 1u);
  const uint8_t* wqe = *sq + VIRTIO_RDMA_RING_HDR_SIZE;
  const auto* w = reinterpret_cast<const rxe_send_wqe*>(wqe);
  EXPECT_EQ(w->wr.wr_id, 0xfeedu);
  EXPECT_EQ(w->wr.opcode, static_cast<uint32_t>(IB_UVERBS_WR_RDMA_WRITE));
  EXPECT_EQ(w->wr.wr.rdma.remote_addr, 0xabc000u);
  EXPECT_EQ(w->wr.wr.rdma.rkey, 0x99u);
  EXPECT_EQ(w->dma.length, 30u);
  EXPECT_EQ(w->dma.num_sge, 2u);
  rxe_sge sge[2];
  std::memcpy(sge, wqe + VIRTIO_RDMA_SEND_WQE_SGE_OFFSET, sizeof(sge));
  EXPECT_EQ(sge[1].addr, 0x2000u);
  EXPECT_EQ(sge[1].length, 20u);
  EXPECT_EQ(sge[1].lkey, 0x22u);

  // Receives: no doorbell, just the RQ ring (its pages follow the SQ's).
  RecvWr rw;
  rw.wr_id = 7;
  rw.num_sge = 1;
  rw.sge[0] = {0x3000, 64, 0x33};
  ASSERT_EQ((*qp)->PostRecv(rw), Status::kOk);
  auto rq = mem->Translate(pages[r.sq.npages], 4096);
  ASSERT_TRUE(rq.ok());
  auto* rhdr = reinterpret_cast<rxe_queue_buf*>(*rq);
  EXPECT_EQ(rhdr->producer_index, 1u);
  EXPECT_EQ(rhdr->index_mask, 31u);
  const auto* rwqe = reinterpret_cast<const rxe_recv_wqe*>(*rq + VIRTIO_RDMA_RING_HDR_SIZE);
  EXPECT_EQ(rwqe->wr_id, 7u);
  EXPECT_EQ(rwqe->dma.num_sge, 1u);
  rxe_sge rs;
  std::memcpy(&rs, *rq + VIRTIO_RDMA_RING_HDR_SIZE + VIRTIO_RDMA_RECV_WQE_SGE_OFFSET, sizeof(rs));
  EXPECT_EQ(rs.lkey, 0x33u);

  // The SQ doorbell names the QP.
  bool seen = false;
  for (int spin = 0; spin < 2000 && !seen; ++spin) {
    {
      std::lock_guard<std::mutex> lock(dev_.mu);
      for (auto& [q, db] : dev_.doorbells) {
        if (db.kind == VIRTIO_RDMA_DB_SQ && db.handle == (*qp)->qpn()) seen = true;
      }
    }
    if (!seen) usleep(1000);
  }
  EXPECT_TRUE(seen);
}

TEST_F(VirtioRdmaDriverTest, CqPollReadsDeviceWrittenCompletions) {
  auto cq = device_->CreateCq(7);
  ASSERT_TRUE(cq.ok());
  std::vector<uint64_t> pages;
  {
    std::lock_guard<std::mutex> lock(dev_.mu);
    virtio_rdma_req_create_cq r;
    std::memcpy(&r, dev_.last_request.data(), sizeof(r));
    ASSERT_EQ(r.ring.log2_num_elem, 3u);
    pages.resize(r.ring.npages);
    std::memcpy(pages.data(), dev_.last_request.data() + sizeof(r), 8 * pages.size());
  }
  auto host = backend_->memory()->Translate(pages[0], 4096);
  ASSERT_TRUE(host.ok());
  auto* hdr = reinterpret_cast<rxe_queue_buf*>(*host);
  ib_uverbs_wc out[4];
  EXPECT_EQ((*cq)->Poll(out), 0);
  for (uint32_t round = 0; round < 5; ++round) {
    for (uint32_t i = 0; i < 3; ++i) {
      ib_uverbs_wc wc{};
      wc.wr_id = round * 10 + i;
      wc.byte_len = 100 + i;
      std::memcpy(hdr->data + (uint64_t{hdr->producer_index} << 6), &wc, sizeof(wc));
      __atomic_store_n(&hdr->producer_index, (hdr->producer_index + 1) & 7u, __ATOMIC_RELEASE);
    }
    EXPECT_EQ((*cq)->Poll({out, 2}), 2);
    EXPECT_EQ(out[0].wr_id, round * 10 + 0);
    EXPECT_EQ(out[1].byte_len, 101u);
    EXPECT_EQ((*cq)->Poll(out), 1);
    EXPECT_EQ(out[0].wr_id, round * 10 + 2);
    EXPECT_EQ(hdr->consumer_index, hdr->producer_index);
  }
}

}  // namespace
}  // namespace vrdma::guest
