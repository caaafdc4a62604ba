#!/usr/bin/env bash
# ranks.sh — `memtally ranks DIR` over many rank files of a real job: a
# 2-rank gloo DDP trainer (ddp_train.py, Debian's torch) run under
# `memtally run -- torchrun` for STEPS steps with a snapshot every step,
# its rank 0 file copied N-1 times and its leaking rank 1 file once
# (gen_ranks.py: each copy's header rewritten), for each N given.  Prints
# one Markdown table row per N: wall time, user+sys CPU time and max RSS
# (/usr/bin/time -v), and whether the leaking rank was named.
#   usage: ranks.sh STEPS N...      (files go under $RANKS_TMP or /tmp)
set -eu
cd "$(dirname "$0")/../.."
steps=$1
shift
tmp=$(mktemp -d "${RANKS_TMP:-/tmp}/mtranks.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
build/memtally run --out "$tmp/job" --set STEPS=1 -- torchrun --nproc_per_node 2 --redirects 1 \
	--tee 1 test/bench/ddp_train.py "$steps" >"$tmp/job.log" 2>&1
one=$(ls "$tmp"/job/*.r0.*.zst)
zmb=$(stat -c %s "$one")
jmb=$(zstd -qdc "$one" | wc -c)
nsnap=$(build/memtally ranks --json "$tmp/job" | /usr/bin/python3 -c \
	'import json,sys; print(json.load(sys.stdin)["ranks"][0]["snapshots"])')
for n in "$@"; do
	need=$((zmb * n / 1000000 + 500))
	free=$(df -Pm "$tmp" | awk 'NR==2 {print $4}')
	if [ "$free" -lt "$need" ]; then
		printf '| ranks | %d files | skipped: %d MB free, %d MB needed | | | |\n' "$n" "$free" "$need"
		continue
	fi
	d=$tmp/r$n
	/usr/bin/python3 test/bench/gen_ranks.py "$tmp/job" "$d" "$n" >/dev/null
	cat "$d"/* >/dev/null # in the page cache, as files just written are
	/usr/bin/time -v build/memtally ranks "$d" >"$tmp/out" 2>"$tmp/time"
	wall=$(awk -F': ' '/Elapsed/ {print $2}' "$tmp/time")
	usr=$(awk -F': ' '/User time/ {print $2}' "$tmp/time")
	sys=$(awk -F': ' '/System time/ {print $2}' "$tmp/time")
	rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$tmp/time")
	named=$(grep -c " r$((n / 3)) .*outlier: growth" "$tmp/out" || true)
	others=$(grep -c '<< outlier' "$tmp/out" || true)
	printf '| ranks | %d files of %d snapshots (%.1f GB zstd, %.1f GB JSONL) | %s | %.2f s | %.0f MB | %s |\n' \
		"$n" "$nsnap" "$(echo "$zmb * $n / 10^9" | bc -l)" "$(echo "$jmb * $n / 10^9" | bc -l)" \
		"$wall" "$(echo "$usr + $sys" | bc -l)" "$(echo "$rss / 1024" | bc -l)" \
		"$([ "$named" = 1 ] && [ "$others" = 1 ] && echo "r$((n / 3)), alone" || echo "WRONG ($others)")"
	rm -rf "$d"
done
