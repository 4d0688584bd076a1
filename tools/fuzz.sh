#!/usr/bin/env bash
# Runs every codecs fuzz target (codecs/fuzz, cargo fuzz on the nightly toolchain) for a bounded
# time, default 20 s each, starting from seed corpora of generated ITCH files and captures.
# A finding fails the script and leaves the input in codecs/fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: cargo fuzz needs a nightly toolchain and none is installed (rustup toolchain list)" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo build -q --release -p tickbus-apps
seeds=target/fuzz-seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{itch,pcap}
target/release/tickbus itch generate --seed 3 --stocks 4 --messages 300 --itch "$seeds/itch/day.itch" --pcap "$seeds/pcap/day.pcap" >/dev/null
head -c 4096 ../shared/data/itch/ex20101224.TEST_ITCH_50 > "$seeds/itch/third-party-head.itch" 2>/dev/null || true
cd codecs/fuzz
for t in itch_file:itch book:itch pcap_capture:pcap moldudp64:pcap; do
  target=${t%%:*} seed=${t##*:}
  mkdir -p "corpus/$target"
  echo "fuzz: $target for ${secs}s"
  log=../../target/fuzz-$target.log
  if ! cargo +nightly fuzz run -O "$target" "corpus/$target" "../../$seeds/$seed" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $target found a failure (input saved in codecs/fuzz/artifacts/$target)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
done
echo "fuzz: no findings"
