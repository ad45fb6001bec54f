#!/usr/bin/python3
"""Tests daemon_ctl.py's verdicts against canned daemon stats replies.

Run: python3 tests/vm/daemon_ctl_test.py
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CTL = os.path.join(HERE, "daemon_ctl.py")
ZERO = {"pds": 0, "cqs": 0, "qps": 0, "mrs": 0, "ahs": 0, "srqs": 0, "pinned_bytes": 0}


def vm(name, **kw):
    entry = dict(ZERO, name=name, connected=False)
    entry.update(kw)
    return entry


class FakeDaemon:
    """Answers every request on a unix socket with one canned JSON reply."""

    def __init__(self, reply):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "ctl.sock")
        self.reply = reply
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.requests = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            line = b""
            while not line.endswith(b"\n"):
                chunk = c.recv(4096)
                if not chunk:
                    break
                line += chunk
            self.requests.append(json.loads(line))
            c.sendall((json.dumps(self.reply) + "\n").encode())
            c.close()

    def close(self):
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def run(reply, verb, name="vm-c"):
    d = FakeDaemon(reply)
    try:
        p = subprocess.run([sys.executable, CTL, d.path, verb, name],
                           capture_output=True, text=True, timeout=20)
        return p.returncode, p.stdout, d.requests
    finally:
        d.close()


class DaemonCtlTest(unittest.TestCase):
    def test_asks_for_stats(self):
        _, _, reqs = run({"ok": True, "vms": []}, "holds")
        self.assertEqual(reqs, [{"cmd": "stats"}])

    def test_holds_table(self):
        cases = [
            ("qp and mr", [vm("vm-c", qps=1, mrs=1, pds=1, cqs=2)], 0),
            ("qp only", [vm("vm-c", qps=1)], 1),
            ("mr only", [vm("vm-c", mrs=3)], 1),
            ("nothing", [vm("vm-c")], 1),
            ("other VM holds", [vm("vm-a", qps=1, mrs=1), vm("vm-c")], 1),
            ("not attached", [vm("vm-a", qps=1, mrs=1)], 1),
        ]
        for what, vms, want in cases:
            with self.subTest(what):
                rc, _, _ = run({"ok": True, "vms": vms}, "holds")
                self.assertEqual(rc, want)

    def test_released_table(self):
        cases = [
            ("all zero, disconnected", [vm("vm-c")], 0),
            ("detached entirely", [vm("vm-a", qps=4)], 0),
            ("a QP left", [vm("vm-c", qps=1)], 1),
            ("an AH left", [vm("vm-c", ahs=1)], 1),
            ("pinned pages left", [vm("vm-c", pinned_bytes=4096)], 1),
            ("still connected", [vm("vm-c", connected=True)], 1),
            ("unknown format", [{"name": "vm-c", "connected": False}], 1),
        ]
        for what, vms, want in cases:
            with self.subTest(what):
                rc, _, _ = run({"ok": True, "vms": vms}, "released")
                self.assertEqual(rc, want)

    def test_connected_table(self):
        cases = [
            ("connected", [vm("vm-a", connected=True)], 0),
            ("attached, no QEMU", [vm("vm-a")], 1),
            ("not attached", [vm("vm-b", connected=True)], 1),
            ("no connected field", [{"name": "vm-a"}], 1),
        ]
        for what, vms, want in cases:
            with self.subTest(what):
                rc, _, _ = run({"ok": True, "vms": vms}, "connected", "vm-a")
                self.assertEqual(rc, want)

    def test_error_reply_never_passes(self):
        for verb in ("holds", "released", "connected"):
            rc, _, _ = run({"error": "boom"}, verb)
            self.assertNotEqual(rc, 0)

    def test_summary(self):
        _, out, _ = run({"ok": True, "vms": [vm("vm-c", qps=2, mrs=1)]}, "summary")
        self.assertEqual(json.loads(out)["qps"], 2)


if __name__ == "__main__":
    unittest.main()
