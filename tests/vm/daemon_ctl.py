#!/usr/bin/python3
"""Talks to vhost-rdma-daemon's JSON control socket for the VM tests.

  daemon_ctl.py SOCK request '<json>'       one request, prints the reply
  daemon_ctl.py SOCK holds VM               exit 0 if VM holds >= 1 QP and >= 1 MR
  daemon_ctl.py SOCK released VM            exit 0 if VM holds no resource at all
  daemon_ctl.py SOCK summary VM             prints VM's resource counts

The reply to {"cmd":"stats"} is searched for the object whose "name" is VM;
its resource counters are the numeric fields named after verbs objects
(qp, mr, cq, pd, srq, ah; singular or plural, optionally with a prefix or
suffix such as "num_qps" or "qp_count"). A VM missing from the stats counts
as released (detached).
"""
import json
import re
import socket
import sys

RESOURCE = re.compile(r"(^|_)(qp|mr|cq|pd|srq|ah|mw)s?($|_)")


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


def find_vm(node, name):
    if isinstance(node, dict):
        if node.get("name") == name or node.get("vm") == name:
            return node
        for key, value in node.items():
            if key == name and isinstance(value, dict):
                return value
            found = find_vm(value, name)
            if found is not None:
                return found
    elif isinstance(node, list):
        for value in node:
            found = find_vm(value, name)
            if found is not None:
                return found
    return None


def counters(vm):
    out = {}

    def walk(node, prefix):
        for key, value in node.items():
            full = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(value, full + ".")
            elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and RESOURCE.search(key.lower()):
                out[full] = value
    walk(vm, "")
    return out


def count(c, kind):
    return sum(v for k, v in c.items()
               if re.search(rf"(^|[._]){kind}s?($|_)", k.lower()))


def main():
    path, verb = sys.argv[1], sys.argv[2]
    if verb == "request":
        print(json.dumps(request(path, json.loads(sys.argv[3]))))
        return 0
    stats = request(path, {"cmd": "stats"})
    vm = find_vm(stats, sys.argv[3])
    c = counters(vm) if vm is not None else {}
    if verb == "summary":
        print("detached" if vm is None else json.dumps(c, sort_keys=True))
        return 0
    if verb == "holds":
        return 0 if vm is not None and count(c, "qp") > 0 and count(c, "mr") > 0 else 1
    if verb == "released":
        return 0 if vm is None or all(v == 0 for v in c.values()) else 1
    print(f"unknown verb {verb}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
