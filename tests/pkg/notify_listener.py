#!/usr/bin/env python3
# Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
"""The service manager's end of sd_notify, for tests/pkg/run-pkg.sh.

Binds an AF_UNIX datagram socket (what systemd passes as NOTIFY_SOCKET)
and appends one line per datagram to LOG:
    <Unix time, seconds> <sender pid> <fields, newlines as '|'>
The sender's pid comes from SCM_CREDENTIALS, as systemd's NotifyAccess=main
check uses it. Runs until killed.
"""
import os
import socket
import struct
import sys
import time


def main() -> None:
    path, log_path = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.bind(path)
    os.chmod(path, 0o666)  # the daemon runs as its own user
    with open(log_path, "a", buffering=1) as log:
        log.write(f"{time.time():.3f} 0 LISTENING\n")
        while True:
            data, ancdata, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12))
            pid = 0
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", payload[:12])[0]
            text = data.decode(errors="replace").strip("\n").replace("\n", "|")
            log.write(f"{time.time():.3f} {pid} {text}\n")


if __name__ == "__main__":
    main()
