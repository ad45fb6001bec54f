# tests/vm/run-libvirt.sh's guests: two ib_write_bw -D runs between vm-a
# (server, SIDE=server) and vm-b (client); the host changes vm-b's QoS with
# virsh metadata between them and writes results/../go2 when it is in force.
# Then each guest waits for the ACPI power button (virsh shutdown) unless
# the host destroys it first.
. /run/vrdma/lib.sh
if [ "$SIDE" = server ]; then
  run_server bw1 ib_write_bw -D "$BW_SECONDS"
  run_server bw2 ib_write_bw -D "$BW_SECONDS"
else
  run_client bw1 ib_write_bw -D "$BW_SECONDS"
  i=0
  while [ ! -e $S/go2 ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
  run_client bw2 ib_write_bw -D "$BW_SECONDS"
fi
touch $R/waiting-for-power-button
# The power button is an input device (ACPI button driver); one event from
# it is enough.
modprobe -a button evdev 2>/dev/null
ev=""
for d in /sys/class/input/input*; do
  [ "$(cat $d/name 2>/dev/null)" = "Power Button" ] && ev=$(ls -d $d/event* 2>/dev/null | head -1)
done
if [ -n "$ev" ] && [ -c /dev/input/${ev##*/} ]; then
  dd if=/dev/input/${ev##*/} of=/dev/null bs=24 count=1 2>/dev/null
  echo "power button ($ev)" >$R/power-button.seen
else
  echo "no power button input device (ev=$ev)" >$R/power-button.missing
  sleep 600
fi
