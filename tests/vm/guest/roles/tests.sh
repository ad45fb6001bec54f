# The perftest list shared by the server and client roles: tag and arguments.
# Bandwidth tests use fewer iterations than perftest's 5000: TCG is slow.
# ib_write_bw comes first and runs for a fixed 10 s (-D): the host SIGKILLs
# the third VM while it runs.
TESTS="
write_bw      ib_write_bw -D 10
write_lat     ib_write_lat -n 500
send_bw       ib_send_bw -n 1000
send_lat      ib_send_lat -n 500
read_bw       ib_read_bw -n 1000
read_lat      ib_read_lat -n 500
write_bw_q4   ib_write_bw -q 4 -n 1000
"
