#!/usr/bin/env bash
# reader.sh — analysis throughput: MB/s of snapshot JSONL read by
# `memtally ranks` (which reads every record and symbolizes nothing), on a
# synthesized snapshot-heavy file.  Prints one Markdown table row.
#   usage: reader.sh [stacks] [snapshots] [reps]
set -eu
cd "$(dirname "$0")/../.."
stacks=${1:-2000} snaps=${2:-300} reps=${3:-5}
f=$(mktemp --suffix=.jsonl)
trap 'rm -f "$f"' EXIT
/usr/bin/python3 test/bench/gen_jsonl.py "$f" "$stacks" "$snaps"
bytes=$(stat -c %s "$f")
cat "$f" >/dev/null   # page cache warm
times=()
for _ in $(seq "$reps"); do
	s=$(date +%s.%N); build/memtally ranks "$f" >/dev/null; e=$(date +%s.%N)
	times+=("$(echo "$e - $s" | bc -l)")
done
med=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
min=$(printf '%s\n' "${times[@]}" | sort -g | head -1)
max=$(printf '%s\n' "${times[@]}" | sort -g | tail -1)
printf '| reader (ranks: summaries of plain JSONL) | %d stacks x %d full snapshots | %.1f MB | %.3f s (%.3f-%.3f) | %.0f MB/s |\n' \
	"$stacks" "$snaps" "$(echo "$bytes/1000000" | bc -l)" "$med" "$min" "$max" \
	"$(echo "$bytes/1000000/$med" | bc -l)"
