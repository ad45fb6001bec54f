# Sourced by server.sh and client.sh after the perftests when the port is
# RoCE (lib.sh's ROCE=1: Soft-RoCE, or vrdma0 with VIRTIO_RDMA_F_ROCE): the
# tools a user runs on Soft-RoCE, unmodified and with no extra flags: RDMA CM
# (perftest -R, rping, ucmatose, udaddy: address and route resolution over
# eth0, CM MADs on QP1), UD with address handles (perftest -c UD, also
# sleeping on CQ events with -e; ibv_ud_pingpong), ibv_*_pingpong on the
# IPv4 GID's index, and RC atomics (perftest's ib_atomic_*:
# compare-and-swap and fetch-and-add).
# vm-a (server) and vm-b (client) run the list in the same order; results
# land in results/<tag>.{out,rc}, the host checks them (run-e2e.sh).
# Tag, then "perftest" (lib.sh's PT_COMMON and, on the client, the peer are
# added) or "cmd" (the whole command; the roles add -s/-c and the peer).
# Every client retries "not listening yet" failures (lib.sh's
# run_cmd_client): it may start before its server listens.
# Verbs-only tools first, then the ones that need RDMA CM (the GSI QP);
# ucmatose -c 8: eight connections at once, so the CM's AHs (made and
# destroyed in atomic context) overlap.
# cm_early, the first RDMA CM test (rping): its server starts
# CM_EARLY_DELAY seconds late, so the client's first REQ finds nobody
# listening: the server's CM must answer it at once with a REJ (invalid
# service ID), the client retries and connects (run-e2e.sh checks the first
# try's REJ and its duration). rping, not perftest -R: perftest 4.5 makes
# two RDMA CM connections, the second to a listener its server creates only
# after both sides synchronised on the first; a client whose second REQ
# comes first gets a REJ there, crashes (exit 139) and leaves the server
# waiting (newer perftest retries that connect). Seen on Soft-RoCE with a
# client retrying against a server that had just started, so
# write_lat_cm's client starts PT_CM_CLIENT_DELAY seconds after its server.
# send_bw_ud_ev: UD may drop a datagram that finds no receive, and perftest
# in event mode waits for every one of its 1000: the server posts all 1000
# receives at once (-r 1000), else a TCG guest slow to repost under load
# lost some on Soft-RoCE (961 of 1000) and the run timed out.
# write_lat_cm (perftest -R) runs with lib.sh's restart (-r
# PT_CM_ATTEMPT): when the client's second connection is REJected, its
# server's attempt times out and starts again, and the client tries again
# after it.
ROCE_TESTS="
atomic_bw     perftest ib_atomic_bw -n 1000
atomic_lat    perftest ib_atomic_lat -n 200
send_bw_ud    perftest ib_send_bw -c UD -n 1000
send_lat_ud   perftest ib_send_lat -c UD -n 200
send_bw_ud_ev perftest ib_send_bw -c UD -e -n 1000 -r 1000
rc_pingpong   cmd      ibv_rc_pingpong -d @DEV@ -g @GIDX@ -n 200
ud_pingpong   cmd      ibv_ud_pingpong -d @DEV@ -g @GIDX@ -n 200
cm_early      cmd      rping -v -C 10
write_lat_cm  perftest ib_write_lat -R -n 200
rping         cmd      rping -v -C 10
ucmatose      cmd      ucmatose
udaddy        cmd      udaddy
ucmatose_c8   cmd      ucmatose -c 8
"
# Long enough for the client to start first (both sides begin a test when
# the previous one ended) and get its REJ; short enough to stay within the
# client's retries (lib.sh's run_cmd_client).
CM_EARLY_DELAY=8
PT_CM_CLIENT_DELAY=4
# One attempt of write_lat_cm's server: its client's 4 s delay and 200
# iterations take under 10 s between TCG guests.
PT_CM_ATTEMPT=60

roce_phase() { # server|client
  port=18600
  echo "$ROCE_TESTS" | while read -r tag kind cmd; do
    [ -n "$tag" ] || continue
    cmd=$(echo "$cmd" | sed "s/@DEV@/$DEV/g; s/@GIDX@/$GIDX/g")
    # Each test on its own port: a client retrying while the server of an
    # earlier test still waits must not reach that one. (udaddy has no
    # port option: its 7174 is rping's default, so rping gets another.)
    port=$((port + 1))
    case "$kind:$tag" in
      perftest:*) srv="$cmd $PT_COMMON -p $port"; cli="$cmd $PT_COMMON -p $port $PEER_IP" ;;
      *:rping|*:cm_early) srv="$cmd -p $port -s"; cli="$cmd -p $port -c -a $PEER_IP" ;;
      *:ucmatose*) srv="$cmd -p $port"; cli="$cmd -p $port -s $PEER_IP" ;;
      *:udaddy) srv="$cmd"; cli="$cmd -s $PEER_IP" ;;
      *) srv="$cmd -p $port"; cli="$cmd -p $port $PEER_IP" ;;
    esac
    [ "$1" = server ] && [ $tag = cm_early ] && sleep $CM_EARLY_DELAY
    [ "$1" = client ] && [ $tag = write_lat_cm ] && sleep $PT_CM_CLIENT_DELAY
    restart=""
    [ $tag = write_lat_cm ] && restart="-r $PT_CM_ATTEMPT"
    if [ "$1" = server ]; then run_cmd_server $restart $tag $srv; else run_cmd_client $restart $tag $cli; fi
  done
  # One RC QP looped back on our IPv4 GID, and ibv_query_qp's AV
  # (guest-driver/kernel/testing/verbs_smoke.c, built by the host).
  if [ "$1" = client ]; then
    if [ -x $S/verbs_smoke ]; then
      timeout 120 $S/verbs_smoke $DEV $GIDX av </dev/null >$R/verbs_smoke.out 2>&1
      echo $? >$R/verbs_smoke.rc
    else
      echo "no verbs_smoke in the share" >$R/verbs_smoke.out
    fi
    # Error flows, one line per case (verbs_errors.c): the host compares
    # them with Soft-RoCE's.
    # The same for the extended verbs librxe offers (verbs_ex.c) and for
    # memory windows (verbs_mw.c).
    for prog in verbs_errors verbs_ex verbs_mw; do
      if [ -x $S/$prog ]; then
        timeout 180 $S/$prog $DEV $GIDX </dev/null >$R/$prog.out 2>&1
        echo $? >$R/$prog.rc
      fi
    done
  fi
  # The host checks now that the device holds no AH of ours any more.
  touch $R/roce.done
}

# vrdma0 only (Soft-RoCE goes away with its netdev): the port follows the
# guest NIC. eth0 is unregistered (rmmod virtio_net: the driver must unbind
# it, or unregister_netdevice waits for its references forever) and comes
# back: the port must read DOWN without it, ACTIVE with it, get its IPv4 GID
# again, and carry traffic (ibv_rc_pingpong on this VM's own GID, loopback).
# Results: results/rebind.out, checked by the host.
roce_rebind() {
  [ "$RXE" = 1 ] && return 0
  {
    echo "before: $(port_state)"
    timeout 60 rmmod virtio_net; echo "rmmod virtio_net rc=$?"
    sleep 1
    echo "without eth0: $(port_state)"
    modprobe virtio_net
    ip link set eth0 up && ip addr add "$IP/24" dev eth0
    i=0
    while [ $i -lt 40 ] && [ "$(port_state)" != PORT_ACTIVE ]; do sleep 0.5; i=$((i + 1)); done
    echo "with eth0 again: $(port_state)"
    gid_setup
    echo "IPv4 GID index $GIDX: $(cat /sys/class/infiniband/$DEV/ports/1/gids/$GIDX)"
    ibv_rc_pingpong -d $DEV -g $GIDX -n 50 -p 18620 &
    sleep 2
    timeout 60 ibv_rc_pingpong -d $DEV -g $GIDX -n 50 -p 18620 127.0.0.1
    echo "loopback rc=$?"
    wait
  } </dev/null >$R/rebind.out 2>&1
}

port_state() {
  ibv_devinfo -d $DEV 2>/dev/null | awk '$1 == "state:" {print $2; exit}'
}

# vrdma0 only: rmmod virtio_rdma with the RoCE port bound and the kernel's
# objects on the device (the MAD layer's QP1, CQ and PD, its AHs), then
# insmod. The host reads the daemon's counts for this VM between the two
# (results/unloaded, then it creates results/host.checked): everything must
# be gone. Results: results/reload.out.
roce_reload() {
  [ "$RXE" = 1 ] && return 0
  {
    timeout 60 rmmod virtio_rdma; echo "rmmod virtio_rdma rc=$?"
    touch $R/unloaded
    i=0
    while [ $i -lt 120 ] && [ ! -e $R/host.checked ]; do sleep 0.5; i=$((i + 1)); done
    insmod $S/vrdma.ko; echo "insmod rc=$?"
    i=0
    while [ $i -lt 40 ]; do
      DEV=$(ls /sys/class/infiniband 2>/dev/null | head -1)
      [ -n "$DEV" ] && [ "$(port_state)" = PORT_ACTIVE ] && break
      sleep 0.5; i=$((i + 1))
    done
    echo "after reload: $DEV $(port_state)"
  } </dev/null >$R/reload.out 2>&1
  gid_setup
}
