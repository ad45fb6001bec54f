#!/usr/bin/env bash
# Validates the libvirt domain XML that attaches a vhost-rdma device, both the
# file tests/vm/libvirt/vhost-rdma-vm.xml and the copy shown in
# docs/operators.md (they must be identical), with libvirt's own schema
# (virt-xml-validate from libvirt-clients, installed when missing).
# Also checks that the validator really rejects a broken domain, and that the
# XML carries what the device needs: shared memfd memory, the chardev and the
# vhost-user-rdma-pci device on the same chardev id.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
xml="$here/tests/vm/libvirt/vhost-rdma-vm.xml"
doc="$here/docs/operators.md"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "  PASS  $*"; }
fail() { echo "  FAIL  $*"; fails=$((fails + 1)); }

if ! command -v virt-xml-validate >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive timeout 300 $SUDO apt-get install -y -qq --no-install-recommends \
    libvirt-clients >/dev/null
fi

if timeout 60 virt-xml-validate "$xml" domain >"$tmp/out" 2>&1; then
  pass "$(basename "$xml") validates against libvirt's domain schema"
else
  cat "$tmp/out"; fail "$(basename "$xml") does not validate"
fi

# The documentation shows the same XML: the first ```xml block of the doc.
awk '/^```xml$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$doc" >"$tmp/doc.xml"
if cmp -s "$tmp/doc.xml" "$xml"; then
  pass "docs/operators.md shows exactly $(basename "$xml")"
else
  diff "$xml" "$tmp/doc.xml" | head -20; fail "docs/operators.md and $(basename "$xml") differ"
fi

# Negative control: the validator must reject an element libvirt does not know.
sed 's|<vcpu>|<vhost-rdma-unknown/><vcpu>|' "$xml" >"$tmp/bad.xml"
if timeout 60 virt-xml-validate "$tmp/bad.xml" domain >/dev/null 2>&1; then
  fail "virt-xml-validate accepted a broken domain: the check above proves nothing"
else
  pass "virt-xml-validate rejects a broken domain"
fi

# What the device needs, read from the XML itself.
python3 - "$xml" <<'EOF' || fails=$((fails + 1))
import sys, xml.etree.ElementTree as ET
ns = {"qemu": "http://libvirt.org/schemas/domain/qemu/1.0"}
root = ET.parse(sys.argv[1]).getroot()
ok = True
def check(cond, what):
    global ok
    print(("  PASS  " if cond else "  FAIL  ") + what)
    ok = ok and cond
mb = root.find("memoryBacking")
check(mb is not None and mb.find("source") is not None
      and mb.find("source").get("type") == "memfd"
      and mb.find("access") is not None and mb.find("access").get("mode") == "shared",
      "guest memory is memfd with shared access (the daemon maps it)")
args = [a.get("value") for a in root.iterfind("qemu:commandline/qemu:arg", ns)]
chardevs = {}
for flag, value in zip(args, args[1:]):
    if flag == "-chardev":
        kind, _, rest = value.partition(",")
        opts = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv)
        chardevs[opts.get("id")] = (kind, opts)
devs = [v for f, v in zip(args, args[1:]) if f == "-device" and v.startswith("vhost-user-rdma-pci")]
check(len(devs) == 1, "one vhost-user-rdma-pci device")
if devs:
    opts = dict(kv.split("=", 1) for kv in devs[0].split(",")[1:] if "=" in kv)
    cd = chardevs.get(opts.get("chardev"))
    check(cd is not None and cd[0] == "socket" and cd[1].get("path", "").startswith("/"),
          "the device's chardev is a unix socket chardev defined in the same XML")
sys.exit(0 if ok else 1)
EOF

if ((fails)); then echo "validate-libvirt-xml: $fails failure(s)"; exit 1; fi
echo "validate-libvirt-xml: all checks passed"
