# The tenant that vanishes: an ib_write_bw server that holds a PD, CQs, a QP
# and an MR while it waits for a client that never comes. The host SIGKILLs
# this VM's QEMU.
. /run/vrdma/lib.sh
touch $R/victim.started
timeout 900 ib_write_bw $PT_COMMON >$R/victim.out 2>&1
echo $? >$R/victim.rc
