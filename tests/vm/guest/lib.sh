# Shared by the role scripts (sourced). Runs one perftest and records its
# output and exit code in the share: results/<tag>.out and <tag>.rc.
# stdbuf -oL: a perftest killed by its timeout still leaves what it printed.
S=/run/vrdma
R=$S/results
. $S/env
DEV=$(ls /sys/class/infiniband 2>/dev/null | head -1)
# GID index 0 is the first GID the operator gave this VM. Soft-RoCE lists
# link-local GIDs first: take its RoCE v2 GID of our IPv4 address.
GIDX=0
if [ "$RXE" = 1 ] && [ -n "$IP" ]; then
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo $IP | tr . ' '))
  for g in /sys/class/infiniband/$DEV/ports/1/gids/*; do
    n=${g##*/}
    [ "$(cat $g)" = "$want" ] &&
      [ "$(cat /sys/class/infiniband/$DEV/ports/1/gid_attrs/types/$n 2>/dev/null)" = "RoCE v2" ] &&
      GIDX=$n && break
  done
fi
PT_COMMON="-d $DEV -x $GIDX -F"

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
