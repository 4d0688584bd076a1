#!/usr/bin/env bash
# Host set-up shared by the test suite and the latency lab: reserves 2 MiB hugepages and mounts
# hugetlbfs at /dev/hugepages. Idempotent. Needs root (it is root on the project's machines).
set -euo pipefail
want=${TICKBUS_HUGEPAGES:-256}
if [ "$(id -u)" != 0 ]; then
  echo "setup-host: not root: cannot reserve hugepages; tickbus will fall back to /dev/shm" >&2
  exit 0
fi
cur=$(cat /proc/sys/vm/nr_hugepages)
if [ "$cur" -lt "$want" ]; then
  echo "$want" > /proc/sys/vm/nr_hugepages
  echo "setup-host: reserved hugepages: $(cat /proc/sys/vm/nr_hugepages) x 2 MiB (wanted $want)"
fi
if ! grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
  mkdir -p /dev/hugepages
  mount -t hugetlbfs -o pagesize=2M none /dev/hugepages
  echo "setup-host: mounted hugetlbfs at /dev/hugepages"
fi
