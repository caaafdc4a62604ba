#!/usr/bin/env bash
# html.sh — `memtally html` beside `memtally leaks` on the same files: the
# page is meant to cost at most 3x the answer (issue 53).  Records a
# 300-step PyTorch trainer (test/bench/torch_train.py, Debian's torch)
# and a 2-rank gloo DDP job (test/bench/ddp_train.py under torchrun, 300
# steps) under `memtally run`, unless directories are given; then, for
# each, the user+sys CPU seconds of `leaks` and of `html` (CPU time: wall
# time on a shared machine says little), best of 3.  Prints one Markdown
# table row a directory.
#   usage: html.sh [DIR...]
set -eu
cd "$(dirname "$0")/../.."
MT=${MT_MEMTALLY:-build/memtally}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
	"$MT" run --out "$tmp/trainer" -- /usr/bin/python3 test/bench/torch_train.py 300 >/dev/null 2>&1
	dirs+=("$tmp/trainer")
	if command -v torchrun >/dev/null; then
		"$MT" run --out "$tmp/ddp" -- torchrun --nproc_per_node 2 --redirects 1 --tee 1 \
			--master_port $((20000 + RANDOM % 20000)) test/bench/ddp_train.py 300 \
			>"$tmp/ddp.log" 2>&1 && dirs+=("$tmp/ddp")
	fi
fi
cpu() { # best user+sys seconds of 3 runs of "$@"
	local best=
	for _ in 1 2 3; do
		local t
		/usr/bin/time -o "$tmp/time" -f '%U %S' "$@" >/dev/null 2>&1
		t=$(tail -1 "$tmp/time" | awk '{printf "%.2f", $1 + $2}')
		if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN{exit !(a < b)}'; then best=$t; fi
	done
	echo "$best"
}
for d in "${dirs[@]}"; do
	files=$(ls "$d" | grep -c '\.jsonl' || true)
	mb=$(du -sm "$d" | cut -f1)
	l=$(cpu "$MT" leaks "$d")
	h=$(cpu "$MT" html -o "$tmp/page.html" "$d")
	printf '| html vs leaks | %s (%s files, %s MB) | leaks %s s | html %s s | %.1fx |\n' \
		"$(basename "$d")" "$files" "$mb" "$l" "$h" "$(awk -v a="$h" -v b="$l" 'BEGIN{print (b > 0 ? a / b : 0)}')"
done
