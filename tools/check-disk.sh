#!/usr/bin/env bash
# Fails early, with what to do, when the disk under target/ has less free space than a build needs
# (a clean `.ci/run` peaked at 6.7 GB of target/ on 2026-12-03; a run out of disk later fails deep
# inside the linker with a bus error). Usage: tools/check-disk.sh GB
set -euo pipefail
cd "$(dirname "$0")/.."
need=${1:?usage: tools/check-disk.sh GB}
mkdir -p target
free_kb=$(df -Pk target | awk 'NR == 2 { print $4 }')
free_gb=$((free_kb / 1024 / 1024))
echo "== disk: ${free_gb} GB free under target/ (this run needs about ${need} GB)"
if [ "$free_gb" -lt "$need" ]; then
  echo "check-disk: only ${free_gb} GB free under $(pwd)/target; the build needs about ${need} GB." >&2
  echo "check-disk: free space (\`cargo clean\`, or remove target/debug/incremental), or set" >&2
  echo "check-disk: CARGO_TARGET_DIR to a larger disk, then run this again." >&2
  exit 1
fi
