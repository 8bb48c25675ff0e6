#!/usr/bin/env bash
# Writes link/node-agent.order: every function of koord's binary that a koordlet runs in
# its steady state, most called first, for the linker to place side by side (build.rs,
# symbol_order).
#
#   scripts/symbol-order.sh [seconds]      (default 360: a store GC round falls inside)
#
# It runs the footprint bench (100 pods, 1 s) with its koordlet under valgrind's callgrind,
# zeroes the counts after 90 s (start-up and the first lists are not steady state), dumps
# them `seconds` later and keeps the functions defined in target/release/koord. Callgrind
# sees every function that runs, however short: sampling (perf) misses the many small
# ones, and each one missed costs a 64 KiB fault-around window of RSS.
#
# Build first with the profile you ship (`cargo bench --bench koordlet_footprint
# --no-run`: fat LTO): symbol names carry hashes that differ between profiles and rustc
# versions. Needs valgrind; the koordlet runs ~50x slower under it, which is enough for
# its 1 s loops to run.
set -euo pipefail
secs=${1:-360}
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/target/release/koord
bench=$(ls -t target/release/deps/koordlet_footprint-* | grep -v '\.d$' | head -n1)
[ -x "$bin" ] && [ -x "$bench" ] || { echo "build first: cargo bench --bench koordlet_footprint --no-run" >&2; exit 1; }
work=$(mktemp -d /tmp/koord-order.XXXXXX)
# The bench runs in a session of its own, so stopping it stops the koordlet and the API
# server it started too.
trap '[ -n "${runner:-}" ] && kill -- -"$runner" 2>/dev/null; rm -rf "$work"' EXIT
cat > "$work/koord" <<EOF
#!/bin/sh
case "\$*" in *role=koordlet*) exec valgrind --tool=callgrind --demangle=no --dump-instr=no \\
  --callgrind-out-file="$work/cg.out" "$bin" "\$@" 2>"$work/valgrind.log";; esac
exec "$bin" "\$@"
EOF
chmod +x "$work/koord"
BENCH_KOORD_BIN="$work/koord" FOOTPRINT_SECONDS=$((secs + 150)) setsid "$bench" >"$work/bench.log" 2>&1 &
runner=$!
sleep 90
vg=$(pgrep -f "valgrind.*$work/cg.out" | head -n1)
callgrind_control -z "$vg" >/dev/null 2>&1
sleep "$secs"
callgrind_control -d "$vg" >/dev/null 2>&1
sleep 5
dump=$(ls "$work"/cg.out.* | head -n1)
nm --defined-only "$bin" | awk '$2 ~ /^[tT]$/ { print $3 }' | sort -u >"$work/defined"
# Callgrind names a function once as "(id) name" and then as "(id)"; a cost line after a
# "calls=" line is the call's inclusive cost, not the caller's own.
awk '
  function fname(s,  id) {
    if (match(s, /^\([0-9]+\)/)) {
      id = substr(s, 2, RLENGTH - 2)
      if (length(s) > RLENGTH) names[id] = substr(s, RLENGTH + 2)
      return names[id]
    }
    return s
  }
  /^fn=/ { cur = fname(substr($0, 4)); call = 0; next }
  /^cfn=/ { callee = fname(substr($0, 5)); next }
  /^calls=/ { split(substr($0, 7), a, " "); calls[callee] += a[1]; seen[callee] = 1; call = 1; next }
  /^[0-9+*-]/ { if (call) call = 0; else { cost[cur] += $2; seen[cur] = 1 } }
  END { for (f in seen) print calls[f] + 0, cost[f] + 0, f }
' "$dump" | sort -k1,1nr -k2,2nr -k3 | awk 'NR == FNR { ours[$1] = 1; next } ($3 in ours) { print $3 }' "$work/defined" - >"$work/order"
out=link/node-agent.order
{
  echo "# koord's node agent in its steady state: the functions a koordlet runs, most called first."
  echo "# Written by scripts/symbol-order.sh (callgrind, last run $(date -u +%Y-%m-%d)); lld reads '#' as a comment."
  cat "$work/order"
} >"$out"
echo "$out: $(grep -vc '^#' "$out") functions"
