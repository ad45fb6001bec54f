# The tenant that vanishes (the host SIGKILLs this VM's QEMU). Before that it
# holds resources of both kinds the daemon must release:
# - a verbs server waiting for a client that never comes: ibv_rc_pingpong
#   creates its PD, MR, CQ and QP and posts receives before it waits
#   (perftest's servers only create theirs after a client connected);
# - traffic in flight: an ib_write_bw pair on this VM's own GID that runs
#   for ten minutes, so WQEs are posted and MRs in use when the VM dies.
. /run/vrdma/lib.sh
ibv_rc_pingpong -d $DEV -g $GIDX -n 100000000 </dev/null >$R/victim-pingpong.out 2>&1 &
ib_write_bw $PT_COMMON -D 600 -p 18601 </dev/null >$R/victim-bw-server.out 2>&1 &
i=0
while [ $i -lt 30 ]; do
  ib_write_bw $PT_COMMON -D 600 -p 18601 127.0.0.1 </dev/null >$R/victim-bw-client.out 2>&1 &
  sleep 3
  # Still running after 3 s: connected and transferring.
  kill -0 $! 2>/dev/null && break
  i=$((i + 1))
done
touch $R/victim.started
wait
