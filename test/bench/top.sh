#!/usr/bin/env bash
# top.sh — `memtally top` on 8 ranks' files of SIZE MB each (default 500):
# the first frame (every file read whole), then a refresh with nothing
# new (what each refresh costs once caught up: the frame's queries), and
# the command's peak RSS.  Prints one Markdown table row.
#   usage: top.sh [size_mb]
set -eu
cd "$(dirname "$0")/../.."
mb=${1:-500}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# 2000 call sites, full snapshots: ~0.3 MB a snapshot
snaps=$((mb * 1000 / 300))
/usr/bin/python3 test/bench/gen_jsonl.py "$d/memtally.bench.r0.p100.jsonl" 2000 "$snaps"
for r in 1 2 3 4 5 6 7; do
	cp "$d/memtally.bench.r0.p100.jsonl" "$d/memtally.bench.r$r.p$((100 + r)).jsonl"
done
bytes=$(cat "$d"/*.jsonl | wc -c)
cat "$d"/*.jsonl >/dev/null # page cache warm
out=$( { /usr/bin/time -f 'rss_kb=%M wall=%e' env MEMTALLY_TOP_BENCH=1 build/memtally top --once "$d" >/dev/null; } 2>&1)
wall=$(echo "$out" | sed -n 's/.*wall=\([0-9.]*\).*/\1/p')
rss=$(echo "$out" | sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p')
ref=$(echo "$out" | sed -n 's/.*nothing new: \([0-9.]*\) ms.*/\1/p')
printf '| top | 8 files x %.0f MB (%d snapshots of 2000 call sites each) | first frame %.1f s | refresh %s ms | peak RSS %.0f MiB |\n' \
	"$(echo "$bytes/8000000" | bc -l)" "$snaps" "$wall" "$ref" "$(echo "$rss/1024" | bc -l)"
