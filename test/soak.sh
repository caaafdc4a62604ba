#!/usr/bin/env bash
# soak.sh — `make soak`: 100 M operations (16 threads x 6.25 M, mixed
# malloc/calloc/realloc/free, SIGUSR1 every 10 ms, interval snapshots) under
# the shim; prints the shim's own memory at the start, the middle and the
# end of the run (it must stay bounded: the live set does not grow).
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
LD_PRELOAD=$PWD/build/libmemtally.so MEMTALLY_OUT=$out MEMTALLY_INTERVAL=2 \
	build/test/prog_stress 16 6250000 0 >"$out/result.json"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, subprocess, sys
d = sys.argv[1]
res = json.load(open(os.path.join(d, 'result.json')))
f = [p for p in glob.glob(os.path.join(d, 'memtally.*.jsonl*'))][0]
lines = subprocess.run(['build/memtally', 'cat', f], capture_output=True, text=True, check=True).stdout.splitlines()
mem = [(r['elapsed_ms'], r['shim']['memory_bytes'], r['shim']['live_entries']) for r in map(json.loads, lines)
       if r.get('type') == 'snapshot']
ops = 16 * 6250000
print('operations: %d (%d allocations)' % (ops, res['allocs']))
for i in (0, len(mem) // 2, len(mem) - 1):
    t, m, live = mem[i]
    print('at %6.1f s: shim memory %6.1f MiB, %d live tracked blocks' % (t / 1000, m / 2**20, live))
grow = mem[-1][1] - mem[0][1]
print('shim memory growth over the run: %.1f MiB' % (grow / 2**20))
sys.exit(0 if grow < 16 << 20 else 1)
PY
