#!/usr/bin/env bash
# Adds to link/node-agent.order the functions a running node agent executes in its steady
# state, for the linker to place side by side (see build.rs, symbol_order).
#
#   scripts/symbol-order.sh <pid of a koord --role=koordlet> [seconds] [--fresh]
#
# Profile the koordlet as the footprint bench runs it (`cargo bench --bench
# koordlet_footprint` starts one; take its pid from `pgrep -f role=koordlet` two minutes
# in, after its first minute-long idle-code shed), built with the profile you ship
# (`cargo bench` builds it: fat LTO): symbol names carry hashes that differ between
# profiles. Two recordings, side by side:
#  - page faults (`-e page-faults -c 1`): the koordlet drops its code pages every minute,
#    so each function it runs again faults once a minute — this catches the rarely
#    running ones (the report, the GC round, the QoS rounds);
#  - CPU samples at 20 kHz: the hot ones, hottest first.
# Known functions keep their place; new ones are appended, so running it again on a
# binary linked with the list finds what the last list missed (a fault-around window
# hides the functions next to a faulting one). `--fresh` starts the list over.
# Needs perf (linux-perf) and the right to profile the process (root here).
set -euo pipefail
pid=${1:?usage: $0 <pid> [seconds] [--fresh]}
secs=${2:-150}
fresh=${3:-}
cd "$(dirname "$0")/.."
out=link/node-agent.order
exe=$(readlink "/proc/$pid/exe")
cpu=$(mktemp /tmp/koord-order-cpu.XXXXXX)
faults=$(mktemp /tmp/koord-order-faults.XXXXXX)
trap 'rm -f "$cpu" "$faults" "$out.new"' EXIT
perf record -q -e cpu-clock -F 20000 -p "$pid" -o "$cpu" -- sleep "$secs" &
perf record -q -e page-faults -c 1 -p "$pid" -o "$faults" -- sleep "$secs"
wait
# Symbols of samples whose instruction lies in koord's own binary, most samples first.
symbols() {
  perf script -i "$1" -F ip,sym,dso --no-demangle 2>/dev/null |
    awk -v exe="${exe##*/}" 'index($NF, exe) && $2 != "[unknown]" { print $2 }' |
    sort | uniq -c | sort -k1,1nr -k2 | awk '{ print $2 }'
}
{
  echo "# koord's node agent in its steady state: the functions the koordlet runs each minute."
  echo "# Written by scripts/symbol-order.sh (last run $(date -u +%Y-%m-%d)); lld reads '#' as a comment."
  if [ "$fresh" != "--fresh" ] && [ -f "$out" ]; then grep -v '^#' "$out"; fi
  symbols "$cpu"
  symbols "$faults"
} | awk '/^#/ || !seen[$0]++' > "$out.new"
mv "$out.new" "$out"
echo "$out: $(grep -vc '^#' "$out") functions"
