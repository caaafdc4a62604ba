#!/usr/bin/env bash
# The benchmark harness keeps working: `make bench`'s driver in its quick
# mode (tiny sizes, one round, no RESULTS.md written) runs every workload
# and configuration and prints its tables.  No timing is asserted.
set -eu
cd "$(dirname "$0")/../.."
out=$(BENCH_QUICK=1 /usr/bin/python3 test/bench/bench.py 2>&1) || { echo "$out" | tail -30; exit 1; }
echo "$out" | grep -q '^bench smoke: ok$'
for row in 'memtally exact' 'memtally sampled' 'heaptrack -r' 'jemalloc prof 19' 'gperftools heap'; do
	echo "$out" | grep -q "^| $row |" || { echo "missing row: $row"; exit 1; }
done
echo "$out" | grep -q '^| 20-27-frame stacks' || { echo "missing: the instruction table"; exit 1; }
echo "$out" | grep -E '^\| (memtally exact|heaptrack -r) \|' | head -4
# the .prom file's cost (issue 55): its tables, quick
p=$(BENCH_QUICK=1 /usr/bin/python3 test/bench/prom.py 2>&1) || { echo "$p" | tail -30; exit 1; }
echo "$p" | grep -qE '^\| 1000 \| [0-9.]+ ms \| [0-9]+ \|' || { echo "missing: the .prom write row"; echo "$p"; exit 1; }
echo "$p" | grep -q '^| --prometheus (5 s) |' || { echo "missing: the trainer rows"; exit 1; }
echo "bench smoke ok"
