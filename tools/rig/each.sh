#!/usr/bin/env bash
# Runs several test commands one after another in one guest (a boot under TCG takes 15-30 s, so
# one boot for a dozen suites saves minutes of CI). Runs inside the guest:
#   tools/rig/rig run [opts] -- tools/rig/each.sh NAME CMD [ARGS...] ';;' NAME CMD [ARGS...] ...
# Each command gets at most TICKBUS_EACH_TIMEOUT seconds (default 900). Between commands,
# anything a failed suite left running from the checkout's target folder is killed and the
# guest's rings (hugetlbfs, /dev/shm) are removed, so the next suite starts as in a fresh guest
# (/tmp is kept: the rig's run folder lives there). Every command runs, failed or not; each is
# named with its exit code and time as it ends and again in a summary; the exit code is 1 if
# any failed. Test binaries are expected under the checkout's target/ (the rig shares it).
set -uo pipefail
# The clean-up below wipes /dev/shm and kills processes: only ever inside the rig's guest (whose
# kernel command line names the rig's run folder), never on a host that has RIG_GUEST set.
if [ -z "${RIG_GUEST:-}" ] || ! grep -q 'rig\.run=' /proc/cmdline 2>/dev/null; then
  echo "each: runs only inside the rig's guest (tools/rig/rig run -- $0 ...)" >&2
  exit 98
fi
limit=${TICKBUS_EACH_TIMEOUT:-900}
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
# Every group is checked before any runs: a malformed list fails at once, not half-way.
groups=0 n=0
for a in "$@" ';;'; do
  if [ "$a" = ';;' ]; then
    [ "$n" -ge 2 ] || { echo "each: want NAME CMD [ARGS...] between ';;' (group $((groups + 1)) has $n words)" >&2; exit 98; }
    groups=$((groups + 1)) n=0
  else
    n=$((n + 1))
  fi
done
results=()
failed=0
run_one() { # name cmd args...
  local name=$1 t0=$SECONDS rc line
  shift
  echo "== guest: $name"
  timeout -s KILL "$limit" "$@"
  rc=$?
  [ "$rc" = 137 ] && echo "each: $name was killed (SIGKILL: its ${limit} s limit, or out of memory)"
  # Anchored: this script's own command line names the binaries too, but does not start with one.
  pkill -9 -f "^$ROOT/target/" 2>/dev/null
  # The guest's own hugetlbfs and /dev/shm (guest-local: nothing of the host's is there).
  find /dev/hugepages /dev/shm -mindepth 1 -delete 2>/dev/null
  line=$(printf '%-34s exit %3s  %4s s' "$name" "$rc" "$((SECONDS - t0))")
  echo "each: $line"
  results+=("$line")
  [ "$rc" = 0 ] || failed=$((failed + 1))
}
args=()
for a in "$@" ';;'; do
  if [ "$a" = ';;' ]; then
    run_one "${args[@]}"
    args=()
  else
    args+=("$a")
  fi
done
echo "== guest: each suite"
printf '  %s\n' "${results[@]}"
[ "$failed" = 0 ] || { echo "each: $failed of $groups suite(s) failed"; exit 1; }
