#!/usr/bin/env bash
# Runs every fuzz target for a bounded time, default 20 s each (cargo fuzz on the nightly
# toolchain): the codecs' parsers of exchange data (codecs/fuzz) and the bus's parsers of bytes a
# peer or another process controls (bus/fuzz: control-channel lines, ring memory, ud-mcast
# frames, journal records, whole journal folders damaged, MoldUDP64 into the feed's arbitration, channel URIs, raw frames off AF_XDP, a venue's whole book over TCP). Seed corpora: generated ITCH files and captures, and bus/fuzz/seeds.
# A finding fails the script and leaves the input in <crate>/fuzz/artifacts/<target>/.
set -euo pipefail
# Resolved before the cd below: a relative path names a file from where the script was run.
seed_bin=${TICKBUS_FUZZ_SEED_BIN:+$(realpath -m -- "$TICKBUS_FUZZ_SEED_BIN")}
cd "$(dirname "$0")/.."
secs=${1:-20}
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: cargo fuzz needs a nightly toolchain and none is installed (rustup toolchain list)" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# The seed day's generator: TICKBUS_FUZZ_SEED_BIN if set (tools/test.sh passes the debug build
# it has; its own name, so a TICKBUS_BIN left in a shell for the Python tests is not taken), else
# a release build of the apps.
bin=$seed_bin
if [ -n "$bin" ] && { [ ! -f "$bin" ] || [ ! -x "$bin" ]; }; then
  echo "fuzz: TICKBUS_FUZZ_SEED_BIN=$bin is not an executable (a tickbus binary, to generate the seed day)" >&2
  exit 1
fi
if [ -z "$bin" ]; then
  cargo build -q --release -p tickbus-apps
  bin=$PWD/target/release/tickbus
fi
seeds=$PWD/target/fuzz-seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{itch,pcap}
"$bin" itch generate --seed 3 --stocks 4 --messages 300 --itch "$seeds/itch/day.itch" --pcap "$seeds/pcap/day.pcap" >/dev/null
head -c 4096 ../shared/data/itch/ex20101224.TEST_ITCH_50 > "$seeds/itch/third-party-head.itch" 2>/dev/null || true
for s in bus/fuzz/seeds/*; do cp -r "$s" "$seeds/"; done
fuzz_build=$PWD/target/fuzz
# crate:target:seed-folder. Both fuzz crates build into one target folder: they share libFuzzer
# and most dependencies, built once (each crate's own folder built them twice).
for t in codecs:itch_file:itch codecs:book:itch codecs:pcap_capture:pcap codecs:moldudp64:pcap \
  bus:control_lines:control_lines bus:ring_memory:ring_memory bus:mcast_frames:mcast_frames \
  bus:journal_records:journal_records bus:journal_folder:journal_folder bus:feed_arbiter:feed_arbiter \
  bus:feed_forgery:feed_forgery bus:channel_uri:channel_uri bus:xdp_frames:xdp_frames bus:glimpse:glimpse; do
  IFS=: read -r crate target seed <<<"$t"
  mkdir -p "$crate/fuzz/corpus/$target"
  echo "fuzz: $crate/$target for ${secs}s"
  log=$PWD/target/fuzz-$target.log
  if ! (cd "$crate/fuzz" && cargo +nightly fuzz run -O --target-dir "$fuzz_build" "$target" "corpus/$target" "$seeds/$seed" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1); then
    tail -40 "$log" >&2
    echo "fuzz: $target found a failure (input saved in $crate/fuzz/artifacts/$target)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
done
echo "fuzz: no findings"
