# Shared by the role scripts (sourced). Runs one test and records its
# output and exit code in the share: results/<tag>.out and <tag>.rc.
# stdbuf -oL: a test killed by its timeout still leaves what it printed.
S=/run/vrdma
R=$S/results
. $S/env
DEV=$(ls /sys/class/infiniband 2>/dev/null | head -1)

# ROCE=1 when the port is RoCE (Ethernet link layer): Soft-RoCE, or vrdma0
# with VIRTIO_RDMA_F_ROCE, bound to eth0. The RDMA core then builds the GID
# table from eth0's addresses (link-local GIDs first) and RDMA CM works.
# GIDX: the RoCE v2 GID of our IPv4 address there, the index a user passes
# to ibv_*_pingpong -g. On an InfiniBand-layer vrdma0 (no RoCE) index 0 is
# the first GID the operator gave this VM, and perftest needs -x.
gid_setup() {
  ROCE=0
  [ "$(cat /sys/class/infiniband/$DEV/ports/1/link_layer 2>/dev/null)" = Ethernet ] && ROCE=1
  GIDX=0
  if [ "$ROCE" = 1 ] && [ -n "$IP" ]; then
    want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo $IP | tr . ' '))
    # The core adds an address's GIDs a moment after the address: wait.
    i=0
    while [ $i -lt 40 ]; do
      for g in /sys/class/infiniband/$DEV/ports/1/gids/*; do
        n=${g##*/}
        [ "$(cat $g)" = "$want" ] &&
          [ "$(cat /sys/class/infiniband/$DEV/ports/1/gid_attrs/types/$n 2>/dev/null)" = "RoCE v2" ] &&
          GIDX=$n && break 2
      done
      sleep 0.5; i=$((i + 1))
    done
  fi
  # On RoCE perftest picks the GID itself, as a user runs it (run-e2e.sh
  # asks for that with PT_GID=auto; run-verbs.sh's hosts, with several
  # addresses on rxe0, keep -x).
  if [ "$ROCE" = 1 ] && [ "${PT_GID:-}" = auto ]; then
    PT_COMMON="-d $DEV -F"
  else
    PT_COMMON="-d $DEV -x $GIDX -F"
  fi
}
gid_setup

run_server() { # tag cmd args...
  tag=$1; shift
  echo "$(date +%s) server $tag: $*"
  timeout "${PT_TIMEOUT:-180}" stdbuf -oL "$@" $PT_COMMON </dev/null >$R/$tag.out 2>&1
  echo $? >$R/$tag.rc
}

run_client() { # tag cmd args... (connects to PEER_IP, retrying until the server listens)
  tag=$1; shift
  touch $R/$tag.started
  i=0
  while :; do
    echo "$(date +%s) client $tag: $*"
    timeout "${PT_TIMEOUT:-180}" stdbuf -oL "$@" $PT_COMMON $PEER_IP </dev/null >$R/$tag.out 2>&1
    rc=$?
    # Only a refused TCP connection (server not up yet) is retried.
    if [ $rc -ne 0 ] && grep -q "Couldn't connect\|Unable to init the socket connection" $R/$tag.out &&
       ! grep -q "#bytes" $R/$tag.out && [ $i -lt 60 ]; then
      i=$((i + 1)); sleep 1; continue
    fi
    break
  done
  echo $rc >$R/$tag.rc
}

# The same for tools that take their whole command line (no PT_COMMON).
# -r <s>: perftest -R's restart (see run_cmd_client): each attempt ends
# after <s> seconds, and one that timed out before its result table
# ("#bytes") starts again, up to three attempts.
run_cmd_server() { # [-r <s>] tag cmd args...
  limit=${PT_TIMEOUT:-180} attempts=1
  [ "$1" = -r ] && { limit=$2 attempts=3; shift 2; }
  tag=$1; shift
  : >$R/$tag.out
  n=0
  while :; do
    n=$((n + 1))
    echo "$(date +%s) server $tag (attempt $n): $*" | tee -a $R/$tag.out
    timeout "$limit" stdbuf -oL "$@" </dev/null >>$R/$tag.out 2>&1
    rc=$?
    [ $rc -eq 124 ] && [ $n -lt $attempts ] && ! grep -q "#bytes" $R/$tag.out && continue
    break
  done
  echo $rc >$R/$tag.rc
}

# A client started before its server listens fails at once: TCP refused
# (perftest's and ibv_*_pingpong's exchange), an RDMA CM REJECT (nobody
# listens on the port yet), or, for udaddy's UD service, the SIDR REP that
# says so (RDMA_CM_EVENT_UNREACHABLE at once: seen when both guests started
# udaddy in the same second and the client's SIDR REQ came first). Such
# failures are retried until the server had time to get there (it may
# still be waiting out the timeout of an earlier test); any other failure
# is final, and so is a REJ of perftest -R's second connection ("Failed to
# connect RDMA CM events") unless -r is given: its server got past the
# first connection and waits for the second, so a new client would pair its
# first connection with that listener and both would hang. perftest 4.5
# makes that second connection right after the first, to a listener its
# server creates only then: a client that gets there first is REJected
# (invalid service ID), and Debian bookworm's perftest (4.5-0.17) crashes
# in its own retry (exit 139). Seen on Soft-RoCE between two TCG guests.
# With -r <s> (the server's run_cmd_server -r <s>), the client waits until
# its server's attempt has timed out and started again (its attempt began
# before this try connected, so it ends within <s> of this try's start),
# then tries again. Every attempt's output is kept in <tag>.out, the exit
# code is the last attempt's, the attempts are counted in <tag>.tries.
run_cmd_client() { # [-r <s>] tag cmd args...
  restart=""
  [ "$1" = -r ] && { restart=$2; shift 2; }
  tag=$1; shift
  touch $R/$tag.started
  : >$R/$tag.out
  first=$(date +%s)
  n=0 restarts=0
  while :; do
    n=$((n + 1))
    start=$(date +%s)
    echo "$start client $tag (try $n): $*" | tee -a $R/$tag.out
    timeout "${PT_TIMEOUT:-180}" stdbuf -oL "$@" </dev/null >$R/$tag.try 2>&1
    rc=$?
    cat $R/$tag.try >>$R/$tag.out
    now=$(date +%s)
    # Read by run-e2e.sh (cm_early: how long the first try took).
    echo "$now client $tag (try $n): rc $rc after $((now - start)) s" >>$R/$tag.out
    if [ -n "$restart" ] && [ $rc -ne 0 ] && [ $restarts -lt 2 ] &&
       grep -q "Failed to connect RDMA CM events" $R/$tag.try; then
      restarts=$((restarts + 1))
      wait_s=$((start + restart + 5 - now))
      echo "$now client $tag: second connection REJected, waiting ${wait_s} s for the server's next attempt" >>$R/$tag.out
      [ $wait_s -gt 0 ] && sleep $wait_s
      continue
    fi
    if [ $rc -ne 0 ] && [ $((now - start)) -lt 10 ] &&
       [ $((now - first)) -lt $((${PT_TIMEOUT:-180} + 30)) ] &&
       grep -q "Couldn't connect\|Unable to init the socket connection\|REJECTED\|RDMA_CM_EVENT_UNREACHABLE" $R/$tag.try &&
       ! grep -q "Failed to connect RDMA CM events" $R/$tag.try; then
      sleep 2; continue
    fi
    break
  done
  rm -f $R/$tag.try
  echo $n >$R/$tag.tries
  echo $rc >$R/$tag.rc
}
