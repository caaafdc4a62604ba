#!/usr/bin/env bash
# The benchmark harness keeps working: `make bench`'s driver in its quick
# mode (tiny sizes, one round, no RESULTS.md written) runs every workload
# and configuration and prints its tables, the peers' table (peers.py)
# included: each of its five workloads once under each tool, memray where
# make bench's venv has it.  No timing is asserted.
set -eu
cd "$(dirname "$0")/../.."
out=$(BENCH_QUICK=1 /usr/bin/python3 test/bench/bench.py 2>&1) || { echo "$out" | tail -30; exit 1; }
echo "$out" | grep -q '^bench smoke: ok$'
rest=$(echo "$out" | sed '/^<!-- peers.py -->$/,/^<!-- \/peers.py -->$/d')  # all but the peers' section
for row in 'memtally exact' 'memtally sampled' 'heaptrack -r' 'jemalloc prof 19' 'gperftools heap'; do
	echo "$rest" | grep -q "^| $row |" || { echo "missing row: $row"; exit 1; }
done
echo "$out" | grep -q '^| 20-27-frame stacks' || { echo "missing: the instruction table"; exit 1; }
# the peers' table (issue 52, peers.py): every tool a row, every workload a
# column and a table of its own; memray's rows carry figures where make
# bench's venv holds memray (this test installs nothing), "-" otherwise
peers=$(echo "$out" | sed -n '/^<!-- peers.py -->$/,/^<!-- \/peers.py -->$/p')
[ -n "$peers" ] || { echo "missing: the peers' section"; exit 1; }
echo "$peers" | grep -q '^| tool | import | trainer | conv | cc1 | malloc |$' || { echo "missing: the peers' columns"; exit 1; }
for row in 'memtally exact' 'memtally sampled' 'memray' 'memray --native' 'heaptrack -r' 'jemalloc prof'; do
	echo "$peers" | grep -q "^| $row | " || { echo "missing peers row: $row"; exit 1; }
done
for t in '`import torch`' 'small-step trainer' 'conv trainer' 'cc1 -O2 -g' 'malloc bench'; do
	echo "$peers" | grep -qF "### $t" || { echo "missing peers table: $t"; exit 1; }
done
# memtally's own rows ran every workload (a figure in each column)
echo "$peers" | grep -qE '^\| memtally exact( \| [0-9.]+x){5} \|$' || { echo "memtally exact lacks a figure"; echo "$peers"; exit 1; }
echo "$peers" | grep -qE '^\| memtally sampled( \| [0-9.]+x){5} \|$' || { echo "memtally sampled lacks a figure"; echo "$peers"; exit 1; }
venv=${MEMTALLY_BENCH_VENV:-$HOME/.cache/memtally/venv-bench}
if "$venv/bin/python3" -c 'import memray' 2>/dev/null; then
	echo "$peers" | grep -qE '^\| memray --native( \| [0-9.]+x){3} \| - \| - \|$' || { echo "memray --native lacks a figure"; echo "$peers"; exit 1; }
else
	echo "(memray not installed at $venv: its rows are '-'; make bench installs it)"
fi
echo "$peers" | grep -E '^\| (memtally exact|memray --native) \| ' | head -2
echo "$peers" | grep -E '^- .* runs failed' || true  # a tool that failed or hung, and why
echo "$out" | grep -E '^\| (memtally exact|heaptrack -r) \|' | head -4
# the .prom file's cost (issue 55): its tables, quick
p=$(BENCH_QUICK=1 /usr/bin/python3 test/bench/prom.py 2>&1) || { echo "$p" | tail -30; exit 1; }
echo "$p" | grep -qE '^\| 1000 \| [0-9.]+ ms \| [0-9]+ \|' || { echo "missing: the .prom write row"; echo "$p"; exit 1; }
echo "$p" | grep -q '^| --prometheus (5 s) |' || { echo "missing: the trainer rows"; exit 1; }
echo "bench smoke ok"
