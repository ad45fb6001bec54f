#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A small fake vhost-user backend for the virtio-rdma device, to test the
guest kernel module (virtio_rdma.ko) in a QEMU guest before the real daemon
exists or without it.

It speaks just enough vhost-user (no REPLY_ACK, no STATUS, no EVENT_IDX, no
indirect descriptors) and of the virtio-rdma control queue to let the module
probe, register its ib_device and create objects. It CHECKS what the driver
sends -- request sizes, page lists (aligned, inside guest RAM, the count
promised), ring geometry, and that the rxe_queue_buf header read back through
the page list matches the ring descriptor -- and logs a line per command, so
a wrong page address or size shows up as an error status and a log line.

Data path: an SQ doorbell makes it complete every new send WQE successfully
(no data is moved) and write the completion into the send CQ, raising a
CQ_COMP event if the CQ was armed. That exercises doorbells, CQ rings,
librxe's polling and completion events, not RDMA semantics.

Usage: fake_backend.py SOCKET_PATH [--doorbells N]
"""
import mmap
import os
import select
import socket
import struct
import sys

# vhost-user requests
GET_FEATURES, SET_FEATURES, SET_OWNER, RESET_OWNER = 1, 2, 3, 4
SET_MEM_TABLE, SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE = 5, 8, 9, 10
GET_VRING_BASE, SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR = 11, 12, 13, 14
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM = 15, 16, 17
SET_VRING_ENABLE, GET_CONFIG, SET_CONFIG = 18, 24, 25
PROTO_MQ, PROTO_CONFIG = 0, 9
F_VERSION_1, F_PROTOCOL_FEATURES = 1 << 32, 1 << 30
F_SRQ, F_UD = 1 << 0, 1 << 1

PAGE = 4096
RING_HDR = 384
MAX_GIDS = 8

OK, E_INVALID, E_UNSUPP, E_NORES, E_HANDLE = 0, 1, 2, 3, 4
EV_CQ_COMP = 1
DB_SQ, DB_CQ_ARM, DB_CQ_ARM_SOL = 1, 4, 5


def log(*a):
    print("fake:", *a, flush=True)


class Memory:
    def __init__(self):
        self.regions = []  # (gpa, size, uva, mmap)

    def set_table(self, payload, fds):
        for r in self.regions:
            r[3].close()
        self.regions = []
        n, = struct.unpack_from("<I", payload, 0)
        for i in range(n):
            gpa, size, uva, off = struct.unpack_from("<QQQQ", payload, 8 + 32 * i)
            m = mmap.mmap(fds[i], size + off, mmap.MAP_SHARED,
                          mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fds[i])
            self.regions.append((gpa, size, uva, m, off))
            log(f"region gpa={gpa:#x} size={size:#x}")

    def _find(self, addr, length, by_uva):
        for gpa, size, uva, m, off in self.regions:
            base = uva if by_uva else gpa
            if base <= addr and addr + length <= base + size:
                return m, off + addr - base
        raise ValueError(f"address {addr:#x}+{length} not in guest RAM")

    def read(self, gpa, length):
        m, o = self._find(gpa, length, False)
        return bytes(m[o:o + length])

    def write(self, gpa, data):
        m, o = self._find(gpa, len(data), False)
        m[o:o + len(data)] = data

    def uva_to_gpa(self, uva):
        for gpa, size, base, m, off in self.regions:
            if base <= uva < base + size:
                return gpa + uva - base
        raise ValueError(f"uva {uva:#x} not mapped")


class Vring:
    def __init__(self, mem, index):
        self.mem, self.index = mem, index
        self.num = 0
        self.desc = self.avail = self.used = 0
        self.last_avail = 0
        self.kick = self.call = None
        self.enabled = False

    def ready(self):
        return self.num and self.desc and self.kick is not None

    def pop(self):
        """Returns (head, [(gpa, len, writable)]) or None."""
        avail_idx, = struct.unpack("<H", self.mem.read(self.avail + 2, 2))
        if avail_idx == self.last_avail:
            return None
        slot = self.last_avail % self.num
        head, = struct.unpack("<H", self.mem.read(self.avail + 4 + 2 * slot, 2))
        self.last_avail = (self.last_avail + 1) & 0xffff
        chain, i = [], head
        for _ in range(self.num):
            addr, ln, flags, nxt = struct.unpack("<QIHH", self.mem.read(self.desc + 16 * i, 16))
            chain.append((addr, ln, bool(flags & 2)))
            if not flags & 1:
                break
            i = nxt
        return head, chain

    def push(self, head, written):
        used_idx, = struct.unpack("<H", self.mem.read(self.used + 2, 2))
        slot = used_idx % self.num
        self.mem.write(self.used + 4 + 8 * slot, struct.pack("<II", head, written))
        self.mem.write(self.used + 2, struct.pack("<H", (used_idx + 1) & 0xffff))

    def notify(self):
        if self.call is not None:
            os.write(self.call, struct.pack("<Q", 1))


def gather(mem, chain):
    return b"".join(mem.read(a, n) for a, n, w in chain if not w)


def scatter(mem, chain, data):
    done = 0
    for a, n, w in chain:
        if not w or done >= len(data):
            continue
        part = data[done:done + n]
        mem.write(a, part)
        done += len(part)
    return done


class Device:
    def __init__(self, ndb):
        self.ndb = ndb
        self.mem = Memory()
        self.vrings = [Vring(self.mem, i) for i in range(2 + ndb)]
        self.next_handle = 0x100
        self.next_qpn = 0x11
        self.cqs = {}   # handle -> dict(ring, armed)
        self.qps = {}   # qpn -> dict(sq, send_cq)
        self.errors = 0

    # ----------------------------------------------------------- config --
    def config(self):
        c = bytearray(256)
        struct.pack_into("<IIIIIIIIII", c, 0, 1, self.ndb, 64, 1024, 8, 8,
                         64, 64, 4096, 256)
        struct.pack_into("<Q", c, 40, 1 << 32)            # max_mr_size
        struct.pack_into("<IIIIIIII", c, 48, 64, 64, 16, 1024, 8, 16,
                         1 << 20, 1 << 30)                 # pd ah srq ... msg
        struct.pack_into("<Q", c, 80, 0x0200a5fffe000001)  # node_guid
        c[88:96] = bytes([1, 4, 3, 5, 4, 2, 5, 1])        # ACTIVE, 1024 of 4096, QDR 4X
        gid = bytes(10) + b"\xff\xff" + bytes([10, 77, 0, 9])
        c[128:144] = gid
        return bytes(c)

    # ------------------------------------------------------- control q --
    def handle(self, req):
        cmd, = struct.unpack_from("<I", req, 0)
        body = req[8:]
        try:
            status, resp = self.command(cmd, body)
        except (ValueError, struct.error) as e:
            log(f"cmd {cmd}: REJECTED: {e}")
            self.errors += 1
            status, resp = E_INVALID, b""
        return struct.pack("<II", status, 0) + resp

    def new_handle(self):
        self.next_handle += 1
        return self.next_handle

    def check_pages(self, body, off, n):
        if len(body) < off + 8 * n:
            raise ValueError(f"page list has {(len(body) - off) // 8} entries, npages says {n}")
        pages = struct.unpack_from(f"<{n}Q", body, off)
        for p in pages:
            if p % PAGE:
                raise ValueError(f"page {p:#x} not aligned")
            self.mem.read(p, PAGE)
        return list(pages)

    def check_ring(self, desc, pages, what):
        log2_num, log2_esz, npages, _ = desc
        if len(pages) != npages:
            raise ValueError(f"{what}: {len(pages)} pages, desc says {npages}")
        if log2_num > 16 or RING_HDR + ((1 << log2_num) << log2_esz) > npages * PAGE:
            raise ValueError(f"{what}: geometry {log2_num}/{log2_esz} does not fit {npages} pages")
        esz, mask = struct.unpack("<II", self.mem.read(pages[0], 8))
        if esz != log2_esz or mask != (1 << log2_num) - 1:
            raise ValueError(f"{what}: header says {esz}/{mask:#x}, desc {log2_esz}/{log2_num}")
        log(f"  {what}: 2^{log2_num} x 2^{log2_esz} B, {npages} pages, header read back OK")
        return dict(pages=pages, log2_num=log2_num, log2_esz=log2_esz)

    def command(self, cmd, b):
        if cmd == 1:  # QUERY_DEVICE
            r = bytearray(128)
            struct.pack_into("<QQQQQ", r, 0, 1, 0x0200a5fffe000001, 0x0200a5fffe000001,
                             1 << 32, PAGE)
            struct.pack_into("<21I", r, 40, 0x1af4, 0x106a, 1, 64, 1024, 0, 8, 8, 8,
                             64, 4096, 256, 64, 16, 16, 64, 16, 1024, 8, 64, 1)
            r[124:128] = bytes([0, 15, 1, 0])
            log("QUERY_DEVICE")
            return OK, bytes(r)
        if cmd == 2:  # QUERY_PORT
            r = struct.pack("<IIIIHHBBBBBBBB", 0x04010000, 1 << 30, MAX_GIDS, 0, 1, 0,
                            4, 5, 3, 4, 2, 5, 1, 0)
            log("QUERY_PORT")
            return OK, r
        if cmd == 4:  # CREATE_PD
            h = self.new_handle()
            log(f"CREATE_PD -> {h:#x}")
            return OK, struct.pack("<II", h, 0)
        if cmd in (5, 7, 9, 14, 16, 19):  # DESTROY_* / DEREG_MR
            h, = struct.unpack_from("<I", b, 0)
            self.cqs.pop(h, None)
            self.qps.pop(h, None)
            log(f"DESTROY cmd {cmd} handle {h:#x}")
            return OK, b""
        if cmd == 6:  # REG_MR
            pd, acc, iova, length, fpo, n = struct.unpack_from("<IIQQII", b, 0)
            if fpo >= PAGE or fpo + length > n * PAGE:
                raise ValueError(f"REG_MR offset {fpo} length {length} npages {n}")
            self.check_pages(b, 32, n)
            h = self.new_handle()
            log(f"REG_MR pd {pd:#x} iova {iova:#x} len {length} off {fpo} npages {n} acc {acc:#x} -> {h:#x}")
            return OK, struct.pack("<IIII", h, h, h if acc & 0xe else 0, 0)
        if cmd == 8:  # CREATE_CQ
            desc = struct.unpack_from("<IIII", b, 0)
            cqe, = struct.unpack_from("<I", b, 16)
            ring = self.check_ring(desc, self.check_pages(b, 24, desc[2]), "CQ")
            if cqe >= 1 << ring["log2_num"]:
                raise ValueError("cqe does not fit")
            h = self.new_handle()
            ring["armed"] = False
            self.cqs[h] = ring
            log(f"CREATE_CQ cqe {cqe} -> {h:#x}")
            return OK, struct.pack("<II", h, cqe)
        if cmd == 10:  # REQ_NOTIFY_CQ
            h, fl = struct.unpack_from("<II", b, 0)
            if h in self.cqs:
                self.cqs[h]["armed"] = True
            log(f"REQ_NOTIFY_CQ {h:#x} flags {fl}")
            return (OK if h in self.cqs else E_HANDLE), b""
        if cmd == 11:  # CREATE_QP
            pd, scq, rcq, srq, qpt, sig = struct.unpack_from("<IIIIBB", b, 0)
            cap = struct.unpack_from("<6I", b, 24)
            sqd = struct.unpack_from("<IIII", b, 48)
            rqd = struct.unpack_from("<IIII", b, 64)
            pages = self.check_pages(b, 80, sqd[2] + rqd[2])
            sq = self.check_ring(sqd, pages[:sqd[2]], "SQ")
            if (1 << sq["log2_esz"]) < 208 + max(16 * cap[2], cap[4]):
                raise ValueError("SQ element too small for the caps")
            if not srq:
                rq = self.check_ring(rqd, pages[sqd[2]:], "RQ")
                if (1 << rq["log2_esz"]) < 40 + 16 * cap[3]:
                    raise ValueError("RQ element too small for the caps")
            qpn = self.next_qpn
            self.next_qpn += 1
            self.qps[qpn] = dict(sq=sq, send_cq=scq, sig_all=sig)
            log(f"CREATE_QP type {qpt} caps {cap[:5]} -> qpn {qpn:#x}")
            return OK, struct.pack("<II6I", qpn, 0, *cap)
        if cmd == 12:  # MODIFY_QP
            qpn, = struct.unpack_from("<I", b, 0)
            mask, state = struct.unpack_from("<IB", b, 8)
            log(f"MODIFY_QP {qpn:#x} mask {mask:#x} state {state}")
            return OK, b""
        if cmd == 13:  # QUERY_QP
            return OK, bytes(164)
        if cmd == 15:  # CREATE_AH
            h = self.new_handle()
            log(f"CREATE_AH -> {h:#x}")
            return OK, struct.pack("<II", h, 0)
        if cmd == 17:  # CREATE_SRQ
            pd, mwr, msge, lim = struct.unpack_from("<IIII", b, 0)
            desc = struct.unpack_from("<IIII", b, 16)
            self.check_ring(desc, self.check_pages(b, 32, desc[2]), "SRQ")
            h = self.new_handle()
            log(f"CREATE_SRQ -> {h:#x}")
            return OK, struct.pack("<IIII", h, mwr, msge, 0)
        if cmd == 18:
            return OK, b""
        return E_UNSUPP, b""

    # -------------------------------------------------------- data path --
    def ring_idx(self, ring, off):
        v, = struct.unpack("<I", self.mem.read(ring["pages"][0] + off, 4))
        return v

    def ring_elem_gpa(self, ring, idx):
        off = RING_HDR + ((idx & ((1 << ring["log2_num"]) - 1)) << ring["log2_esz"])
        return ring["pages"][off // PAGE] + off % PAGE

    def sq_doorbell(self, qpn):
        qp = self.qps.get(qpn)
        if not qp:
            return
        sq = qp["sq"]
        prod, cons = self.ring_idx(sq, 128), self.ring_idx(sq, 256)
        while cons != prod:
            wqe = self.mem.read(self.ring_elem_gpa(sq, cons), 64)
            wr_id, _, opcode, flags = struct.unpack_from("<QIII", wqe, 0)
            cons = (cons + 1) & ((1 << sq["log2_num"]) - 1)
            self.mem.write(sq["pages"][0] + 256, struct.pack("<I", cons))
            if qp["sig_all"] or flags & 2:  # IBV_SEND_SIGNALED
                self.complete(qp["send_cq"], wr_id, opcode, qpn)

    def complete(self, cqh, wr_id, opcode, qpn):
        cq = self.cqs.get(cqh)
        if not cq:
            return
        prod = self.ring_idx(cq, 128)
        # ib_uverbs_wc: wr_id, status, opcode, vendor_err, byte_len, ex, qp_num...
        wc = struct.pack("<QIIIIIIIIHHBBBB", wr_id, 0, {0: 1, 1: 1, 2: 0, 3: 0, 4: 2}.get(opcode, 0),
                         0, 0, 0, qpn, 0, 0, 0, 0, 0, 0, 0, 0)
        self.mem.write(self.ring_elem_gpa(cq, prod), wc)
        self.mem.write(cq["pages"][0] + 128,
                       struct.pack("<I", (prod + 1) & ((1 << cq["log2_num"]) - 1)))
        if cq["armed"]:
            cq["armed"] = False
            self.event(EV_CQ_COMP, cqh)

    def event(self, etype, handle):
        vq = self.vrings[1]
        if not vq.ready():
            return
        got = vq.pop()
        if not got:
            log("event lost: no buffer")
            return
        head, chain = got
        n = scatter(self.mem, chain, struct.pack("<IIII", etype, handle, 0, 0))
        vq.push(head, n)
        vq.notify()

    def kick(self, index):
        vq = self.vrings[index]
        try:
            os.read(vq.kick, 8)
        except BlockingIOError:
            pass
        if index == 1:
            return
        while True:
            got = vq.pop()
            if not got:
                break
            head, chain = got
            req = gather(self.mem, chain)
            if index == 0:
                n = scatter(self.mem, chain, self.handle(req))
                vq.push(head, n)
            else:
                vq.push(head, 0)
                handle, kind = struct.unpack_from("<IB", req, 0)
                if kind == DB_SQ:
                    self.sq_doorbell(handle)
                elif kind in (DB_CQ_ARM, DB_CQ_ARM_SOL) and handle in self.cqs:
                    self.cqs[handle]["armed"] = True
        vq.notify()

    # --------------------------------------------------------- protocol --
    def message(self, req, payload, fds):
        """Returns a reply payload or None."""
        u64 = lambda v: struct.pack("<Q", v)
        if req == GET_FEATURES:
            return u64(F_VERSION_1 | F_PROTOCOL_FEATURES | F_SRQ | F_UD)
        if req == GET_PROTOCOL_FEATURES:
            return u64((1 << PROTO_MQ) | (1 << PROTO_CONFIG))
        if req == GET_QUEUE_NUM:
            return u64(len(self.vrings))
        if req == GET_CONFIG:
            off, size, flags = struct.unpack_from("<III", payload, 0)
            data = self.config()[off:off + size]
            return struct.pack("<III", off, size, flags) + data + bytes(len(payload) - 12 - len(data))
        if req == SET_MEM_TABLE:
            self.mem.set_table(payload, fds)
            return None
        if req in (SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ENABLE):
            i, v = struct.unpack_from("<II", payload, 0)
            vq = self.vrings[i]
            if req == SET_VRING_NUM:
                vq.num = v
            elif req == SET_VRING_BASE:
                vq.last_avail = v
            else:
                vq.enabled = bool(v)
            return None
        if req == SET_VRING_ADDR:
            i, fl, d, u, a, lg = struct.unpack_from("<IIQQQQ", payload, 0)
            vq = self.vrings[i]
            vq.desc, vq.used, vq.avail = (self.mem.uva_to_gpa(x) for x in (d, u, a))
            return None
        if req in (SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR):
            v, = struct.unpack_from("<Q", payload, 0)
            i = v & 0xff
            fd = None if v & 0x100 else fds[0]
            if req == SET_VRING_KICK:
                if fd is not None:
                    os.set_blocking(fd, False)
                self.vrings[i].kick = fd
            elif req == SET_VRING_CALL:
                self.vrings[i].call = fd
            elif fd is not None:
                os.close(fd)
            return None
        if req == GET_VRING_BASE:
            i, = struct.unpack_from("<I", payload, 0)
            vq = self.vrings[i]
            vq.kick = None
            return struct.pack("<II", i, vq.last_avail)
        return None  # SET_OWNER, SET_FEATURES, SET_PROTOCOL_FEATURES, ...


def recv_msg(conn):
    hdr, anc, _, _ = conn.recvmsg(12, socket.CMSG_SPACE(8 * 4))
    if len(hdr) < 12:
        return None
    req, flags, size = struct.unpack("<III", hdr)
    fds = []
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds += list(struct.unpack(f"<{len(data) // 4}i", data[:len(data) // 4 * 4]))
    payload = b""
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            return None
        payload += chunk
    return req, flags, payload, fds


def main():
    path = sys.argv[1]
    ndb = int(sys.argv[sys.argv.index("--doorbells") + 1]) if "--doorbells" in sys.argv else 1
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    log(f"listening on {path}")
    conn, _ = srv.accept()
    dev = Device(ndb)
    while True:
        kicks = {vq.kick: i for i, vq in enumerate(dev.vrings) if vq.kick is not None}
        r, _, _ = select.select([conn] + list(kicks), [], [])
        for fd in r:
            if fd is conn:
                m = recv_msg(conn)
                if m is None:
                    log(f"frontend closed; {dev.errors} rejected command(s)")
                    return 0 if dev.errors == 0 else 1
                req, flags, payload, fds = m
                reply = dev.message(req, payload, fds)
                if reply is not None:
                    conn.sendall(struct.pack("<III", req, 0x1 | 0x4, len(reply)) + reply)
            else:
                dev.kick(kicks[fd])


if __name__ == "__main__":
    sys.exit(main())
