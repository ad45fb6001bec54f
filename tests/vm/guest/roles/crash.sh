# Sourced by server.sh and client.sh after the perftests: the host SIGKILLs
# the daemon while crash_bw runs. Each guest shows that its contexts got
# IBV_EVENT_DEVICE_FATAL (ibv_asyncwatch, from ibverbs-utils), that the
# driver brought the device back once the host had restarted the daemon and
# QEMU had reconnected (no reboot), and runs a fresh perftest on it.
# Results: asyncwatch.out, fatal.seen (when the event came, epoch seconds),
# revived (the new device's ibv_devinfo), crash_bw.*, after_restart_bw.*.
# crash_bw itself may exit 0 with zero iterations: librxe polls a CQ the
# device no longer fills until -D ends; only "it ended" is checked.
crash_phase() { # server|client
  # stdbuf: the event must reach the share while the perftest still runs.
  stdbuf -oL ibv_asyncwatch -d $DEV </dev/null 2>&1 | while read -r line; do
    echo "$line" >>$R/asyncwatch.out
    case "$line" in
      *IBV_EVENT_DEVICE_FATAL*) [ -e $R/fatal.seen ] || date +%s >$R/fatal.seen ;;
    esac
  done &
  if [ "$1" = server ]; then
    run_server crash_bw ib_write_bw -D 10
  else
    run_client crash_bw ib_write_bw -D 10
  fi
  i=0
  while [ $i -lt 120 ] && [ ! -e $R/fatal.seen ]; do
    sleep 0.5; i=$((i + 1))
  done
  # The host restarts the daemon only after both guests saw the event; the
  # driver polls for the backend and registers a new ib_device.
  i=0
  while [ $i -lt 240 ]; do
    DEV=$(ls /sys/class/infiniband 2>/dev/null | head -1)
    if [ -n "$DEV" ] && ibv_devinfo -d $DEV 2>/dev/null | grep -q PORT_ACTIVE; then
      ibv_devinfo -d $DEV >$R/revived 2>&1
      break
    fi
    sleep 0.5; i=$((i + 1))
  done
  [ -s $R/revived ] || { echo "device not back"; return 1; }
  gid_setup # the new device: its link layer and GIDs again
  if [ "$1" = server ]; then
    run_server after_restart_bw ib_write_bw -n 1000
  else
    run_client after_restart_bw ib_write_bw -n 1000
  fi
}
