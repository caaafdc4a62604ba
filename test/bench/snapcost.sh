#!/usr/bin/env bash
# snapcost.sh — per-snapshot time against the number of call sites: for
# each N in SNAP_SITES (1000 10000 100000 200000), test/bench/snapcost.c
# makes N distinct stacks each holding a block, then SNAP_ROUNDS rounds
# (10) that each allocate and free at SNAP_TOUCH (100) of those sites and
# request a snapshot.  Prints a markdown table: the first snapshot (every
# site new) and the median of the rounds' (each after SNAP_TOUCH sites
# changed), from each record's shim.last_write_ns (the time the snapshot
# before it took to write, wall; MEMTALLY_CADENCE=0, plain JSONL), and the
# file's bytes per round snapshot, and the call sites a round's snapshot
# read (shim.sites_read: those in groups of 64 stack ids charged since the
# snapshot before).
#   bash test/bench/snapcost.sh        (needs build/libmemtally.so)
#   SNAP_SHIM=path SNAP_SITES="1000 200000" SNAP_ROUNDS=20 SNAP_TOUCH=1000
set -eu
cd "$(dirname "$0")/../.."
SHIM=${SNAP_SHIM:-$PWD/build/libmemtally.so}
SITES=${SNAP_SITES:-1000 10000 100000 200000}
ROUNDS=${SNAP_ROUNDS:-10}
TOUCH=${SNAP_TOUCH:-100}
[ -f "$SHIM" ] || { echo "snapcost.sh: $SHIM missing: make all first" >&2; exit 1; }
TMP=$(mktemp -d /tmp/mtsnap.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -g -o "$TMP/snapcost" test/bench/snapcost.c -ldl
echo "| call sites | first snapshot (ms) | a snapshot after $TOUCH sites changed (median of $ROUNDS, ms) | sites it read | bytes per such snapshot |"
echo "|---|---|---|---|---|"
for n in $SITES; do
	rm -rf "$TMP/out"
	env LD_PRELOAD="$SHIM" MEMTALLY_OUT="$TMP/out" MEMTALLY_CADENCE=0 MEMTALLY_COMPRESS=0 \
		"$TMP/snapcost" "$n" "$ROUNDS" "$TOUCH" >/dev/null
	/usr/bin/python3 - "$TMP/out" "$n" <<'PY'
import glob, json, statistics, sys
f = glob.glob(sys.argv[1] + '/*.jsonl')[0]
snaps = []
for line in open(f):
    r = json.loads(line)
    if r.get('type') == 'snapshot' and r.get('reason') == 'request':
        snaps.append((r['shim']['last_write_ns'], len(line), r['shim'].get('sites_read', -1)))
# snaps[k]'s last_write_ns is snaps[k-1]'s time: [1] is the first's, [2:] the rounds'
first = snaps[1][0] / 1e6
rounds = [t / 1e6 for t, _, _ in snaps[2:]]
size = statistics.median(b for _, b, _ in snaps[1:-1])
read = statistics.median(k for _, _, k in snaps[2:])
print('| %s | %.2f | %.2f | %d | %d |' % (sys.argv[2], first, statistics.median(rounds), read, size))
PY
done
