# Sourced by server.sh and client.sh after the perftests when the port is
# RoCE (lib.sh's ROCE=1: Soft-RoCE, or vrdma0 with VIRTIO_RDMA_F_ROCE): the
# tools a user runs on Soft-RoCE, unmodified and with no extra flags: RDMA CM
# (perftest -R, rping, ucmatose, udaddy: address and route resolution over
# eth0, CM MADs on QP1), UD with address handles (perftest -c UD,
# ibv_ud_pingpong) and ibv_*_pingpong on the IPv4 GID's index.
# vm-a (server) and vm-b (client) run the list in the same order; results
# land in results/<tag>.{out,rc}, the host checks them (run-e2e.sh).
# Tag, then "perftest" (lib.sh's PT_COMMON and, on the client, the peer are
# added) or "cmd" (the whole command; the roles add -s/-c and the peer).
# Every client retries "not listening yet" failures (lib.sh's
# run_cmd_client): it may start before its server listens.
# Verbs-only tools first, then the ones that need RDMA CM (the GSI QP).
ROCE_TESTS="
send_bw_ud    perftest ib_send_bw -c UD -n 1000
send_lat_ud   perftest ib_send_lat -c UD -n 200
rc_pingpong   cmd      ibv_rc_pingpong -d @DEV@ -g @GIDX@ -n 200
ud_pingpong   cmd      ibv_ud_pingpong -d @DEV@ -g @GIDX@ -n 200
write_lat_cm  perftest ib_write_lat -R -n 200
rping         cmd      rping -v -C 10
ucmatose      cmd      ucmatose
udaddy        cmd      udaddy
"

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
      *:rping) srv="$cmd -p $port -s"; cli="$cmd -p $port -c -a $PEER_IP" ;;
      *:ucmatose) srv="$cmd -p $port"; cli="$cmd -p $port -s $PEER_IP" ;;
      *:udaddy) srv="$cmd"; cli="$cmd -s $PEER_IP" ;;
      *) srv="$cmd -p $port"; cli="$cmd -p $port $PEER_IP" ;;
    esac
    if [ "$1" = server ]; then run_cmd_server $tag $srv; else run_cmd_client $tag $cli; fi
  done
}
