#!/usr/bin/python3
"""Talks to vhost-rdma-daemon's JSON control socket for the VM tests.

  daemon_ctl.py SOCK request '<json>'       one request, prints the reply
  daemon_ctl.py SOCK holds VM               exit 0 if VM holds >= 1 QP and >= 1 MR
  daemon_ctl.py SOCK released VM            exit 0 if VM holds nothing at all
  daemon_ctl.py SOCK connected VM           exit 0 if VM is attached and its QEMU connected
  daemon_ctl.py SOCK summary VM             prints VM's resource counts

{"cmd":"stats"} answers {"ok":true,"vms":[{"name":..,"connected":..,
"pds":..,"cqs":..,"qps":..,"mrs":..,"ahs":..,"srqs":..,"pinned_bytes":..},..]}
(vhost-rdma/daemon/daemon.cc). A VM missing from the list counts as released.
"""
import json
import socket
import sys

# Everything a guest can make the daemon hold on its behalf.
HELD = ("pds", "cqs", "qps", "mrs", "ahs", "srqs", "pinned_bytes")


def request(path, obj, timeout=10.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    s.sendall((json.dumps(obj) + "\n").encode())
    buf = b""
    while True:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
        try:
            return json.loads(buf)
        except ValueError:
            continue
    return json.loads(buf) if buf else None


def find_vm(stats, name):
    for vm in (stats or {}).get("vms", []):
        if vm.get("name") == name:
            return vm
    return None


def held(vm):
    return {k: vm[k] for k in HELD if k in vm}


def main():
    path, verb = sys.argv[1], sys.argv[2]
    if verb == "request":
        print(json.dumps(request(path, json.loads(sys.argv[3]))))
        return 0
    stats = request(path, {"cmd": "stats"})
    if not stats or not stats.get("ok"):
        print(f"stats failed: {stats}", file=sys.stderr)
        return 2
    vm = find_vm(stats, sys.argv[3])
    if verb == "summary":
        print("not attached" if vm is None else json.dumps(
            dict(held(vm), connected=vm.get("connected")), sort_keys=True))
        return 0
    if verb == "holds":
        return 0 if vm is not None and vm.get("qps", 0) > 0 and vm.get("mrs", 0) > 0 else 1
    if verb == "connected":
        return 0 if vm is not None and vm.get("connected") is True else 1
    if verb == "released":
        if vm is None:
            return 0
        missing = [k for k in HELD if k not in vm]
        if missing:  # a stats format we do not understand must not pass
            print(f"stats lack {missing}", file=sys.stderr)
            return 1
        return 0 if all(v == 0 for v in held(vm).values()) and not vm.get("connected") else 1
    print(f"unknown verb {verb}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
