#!/usr/bin/env bash
# Checks the rig itself: exit codes pass through, a hung guest gives the timeout code, several
# suites run in one boot (tools/rig/each.sh) as tools/test.sh runs them, two guests reach each
# other over the private link (TCP and RDMA), and a link-down request cuts it.
set -uo pipefail
RIG="$(cd "$(dirname "$0")" && pwd)/rig"
fails=0
check() { # name expected-code actual-code
  if [ "$2" = "$3" ]; then echo "rig selftest: $1 ... ok"; else echo "rig selftest: $1 ... FAILED (exit $3, expected $2)"; fails=$((fails + 1)); fi
}
"$RIG" run -- bash -c 'exit 3' >/dev/null 2>&1; check "guest exit code passes through" 3 $?
"$RIG" run --timeout 15 -- sleep 600 >/dev/null 2>&1; check "a hung guest exits with the timeout code" 97 $?
# Several suites in one boot (tools/rig/each.sh, as tools/test.sh runs the one-guest suites): a
# failed one fails the run but the next still runs, one past its limit is killed, and what one
# left behind (a file in /dev/shm and in hugetlbfs, a process started from the target folder)
# is gone before the next starts.
root=$(cd "$(dirname "$RIG")/../.." && pwd -P)
before=$fails
out=$(TICKBUS_EACH_TIMEOUT=5 "$RIG" run --hugepages 2 --timeout 120 -- "$(dirname "$RIG")/each.sh" \
  first bash -c "touch /dev/shm/left-behind /dev/hugepages/left-behind; (exec -a $root/target/each-selftest sleep 600 &)" ';;' \
  second bash -c 'exit 4' ';;' third bash -c 'sleep 60' ';;' \
  fourth bash -c "[ ! -e /dev/shm/left-behind ] && [ ! -e /dev/hugepages/left-behind ] && ! pgrep -f ^$root/target/each-selftest" 2>&1); rc=$?
check "suites in one boot: any failure fails the run" 1 $rc
summary=$(echo "$out" | sed -n '/== guest: each suite/,$p')
for want in "first .*exit   0" "second .*exit   4" "third .*exit 137" "fourth .*exit   0"; do
  echo "$summary" | grep -q "$want" && r=0 || r=1
  check "suites in one boot: ${want%% *} reported as expected" 0 $r
done
[ "$fails" = "$before" ] || echo "$out" | tail -30
# Two guests: TCP across the link, RDMA WRITE across it (rxe_eth), then a cut link stops TCP.
two_guests='
probe() { python3 - "$@" <<PY
import socket, sys
s = socket.socket(); s.settimeout(float(sys.argv[2]))
try:
    s.connect((sys.argv[1], 7777)); print("tcp ok")
except OSError as e:
    print("tcp failed:", e); sys.exit(1)
PY
}
if [ "$RIG_GUEST" = 1 ]; then
  python3 -c "import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"0.0.0.0\", 7777)); s.listen(8); import time; time.sleep(90)" &
  ib_write_lat -d rxe_eth -n 50 -F >/dev/null 2>&1
  sleep 15; exit 0
fi
sleep 5
probe "$RIG_PEER_ADDR" 10 || exit 11
ib_write_lat -d rxe_eth -n 50 -F "$RIG_PEER_ADDR" | grep -q "^ 2 " || exit 12
echo "RIG-REQUEST: link-down"
sleep 3
if probe "$RIG_PEER_ADDR" 3; then exit 13; fi
echo "link cut as requested"
'
out=$("$RIG" run --guests 2 --timeout 240 -- bash -c "$two_guests" 2>&1); rc=$?
check "two guests over the private link, then link-down cuts it" 0 $rc
[ $rc = 0 ] || echo "$out" | tail -20
exit $((fails > 0))
