#!/bin/sh
# Runs inside a test guest (called by /sbin/vrdma-init from the 9p share,
# mounted at /run/vrdma). Reads the share's `env` (ROLE, IP, PEER_IP, ...),
# brings up the link to the peer, loads the vhost-rdma module and runs
# roles/$ROLE.sh. Every result goes back to the share under results/.
S=/run/vrdma
R=$S/results
mkdir -p $R
exec >$R/console.log 2>&1
. $S/env
echo "guest $NAME role $ROLE kernel $(uname -r)"

# The TCP link for perftest's out-of-band exchange (no udev: load by hand).
modprobe virtio_net
ip link set lo up
if [ -n "$IP" ]; then
  ip link set eth0 up && ip addr add "$IP/24" dev eth0
fi

# RDMA core, then the device driver (built on the host for this kernel).
# rdma_ucm (with rdma_cm and ib_cm) as on any Debian system, where udev's
# rdma-hw.target loads /etc/rdma/modules/rdma.conf when an RDMA device
# appears. This guest has no udev: without it ib_cm came only with the
# first RDMA CM program, and until then the MAD layer dropped CM REQs (no
# agent for the CM class), so a client that started before its server sent
# REQs that nobody answered, not even with a REJ (roles/roce.sh, cm_early).
modprobe -a ib_core ib_uverbs rdma_ucm
if [ "$RXE" = 1 ]; then
  # Harness self-test: Soft-RoCE on the virtio-net link instead of vhost-rdma.
  modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0; echo "rxe rc=$?"
elif [ -f $S/vrdma.ko ]; then
  for dep in $(modinfo -F depends $S/vrdma.ko | tr ',' ' '); do modprobe "$dep"; done
  insmod $S/vrdma.ko; echo "insmod rc=$?"
else
  echo "no vrdma.ko in the share"
fi
for d in /sys/bus/pci/devices/*; do
  echo "pci $(basename $d) $(cat $d/vendor):$(cat $d/device) driver=$(basename $(readlink $d/driver) 2>/dev/null)"
done >$R/pci.txt
ls /sys/class/infiniband >$R/ibdevs.txt 2>&1
ibv_devinfo -v >$R/ibv_devinfo.txt 2>&1
echo $? >$R/ibv_devinfo.rc

/bin/sh $S/roles/$ROLE.sh
echo $? >$R/role.rc
echo "role $ROLE done"
dmesg >$R/dmesg.txt
