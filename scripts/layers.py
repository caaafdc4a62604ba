#!/usr/bin/env python3
"""layers.py BUILD_DIR — the shim's layers, enforced from the objects.

Each shim object (named by its path under shim/, e.g. platform/glue) may
call only objects of a lower layer (from `nm`: an undefined symbol in A that B defines is a call from A to B).  Two objects
of one layer never call each other; the entry points (hooks, signals, the
C API, CUDA wrappers) in particular never do.  Prints every call that runs
sideways or up, with the symbols, and exits 1 if there is any.
Adding a file to shim/: give it a layer here, or this check fails."""
import glob, os, subprocess, sys

LAYERS = [
    # platform: syscalls, atomics and locks, clocks, the loader, buffers
    # and formatting, the configuration
    ('platform', ['platform/glue', 'platform/dl']),
    ('platform-format', ['platform/buf']),
    ('platform-config', ['platform/config']),
    # state: the tables and the small shared states
    ('state-solo', ['state/solo']),
    ('state', ['state/stacks', 'state/totals', 'state/ptrtab', 'state/events', 'state/trigger',
               'state/marks', 'state/map64']),
    ('state-sites', ['state/sites']),
    ('state-derived', ['state/maptab', 'state/devices']),
    # capture: stack walkers, Python frames, then charging
    ('capture-cfi-parts', ['capture/ehframe', 'capture/cfitab']),
    ('capture-cfi', ['capture/cfi']),
    ('capture', ['capture/unwind', 'capture/pylines']),
    ('capture-pyfind', ['capture/pyfind']),
    ('capture-python', ['capture/python']),
    ('capture-pyrecords', ['capture/pyrecords']),
    ('capture-charge', ['capture/charge']),
    # readers and writers: the output file, /proc and cgroup figures,
    # snapshot records, dumps
    ('output-file', ['output/file', 'output/zout']),
    ('output-procstat', ['output/procstat']),
    ('output-records', ['output/snapshot']),
    ('output-dumps', ['output/oom']),
    # entry points: never call each other
    ('entry', ['entry/interpose', 'entry/signals', 'entry/api', 'entry/cuda']),
    # the lifecycle on top
    ('lifecycle', ['life']),
]

def symbols(obj):
    out = subprocess.run(['nm', obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'TDBRVWG':
            defined.add(f[2])
        elif len(f) == 2 and f[0] == 'U':
            undefined.add(f[1])
    return defined, undefined

def main():
    build = sys.argv[1] if len(sys.argv) > 1 else 'build'
    root = os.path.join(build, 'shim')
    # the objects of today's sources (a stale object of a moved file is not read)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'shim')
    objs = [os.path.join(root, os.path.relpath(c, src)[:-2] + '.o')
            for c in sorted(glob.glob(os.path.join(src, '**', '*.c'), recursive=True))]
    missing = [o for o in objs if not os.path.exists(o)]
    if missing:
        print('layers: no %s (make all first)' % missing[0])
        return 2
    rank = {n: i for i, (_, names) in enumerate(LAYERS) for n in names}
    layer_of = {n: LAYERS[i][0] for n, i in rank.items()}
    defs, undefs = {}, {}
    for o in objs:
        n = os.path.relpath(o, root)[:-2]
        defs[n], undefs[n] = symbols(o)
    bad = 0
    for n in defs:
        if n not in rank:
            print('layers: shim/%s.c has no layer in scripts/layers.py' % n)
            bad += 1
    owner = {s: n for n, d in defs.items() for s in d}
    edges = 0
    for a in sorted(defs):
        calls = {}
        for s in undefs[a]:
            b = owner.get(s)
            if b and b != a:
                calls.setdefault(b, []).append(s)
        for b, syms in sorted(calls.items()):
            edges += 1
            if a in rank and b in rank and rank[b] >= rank[a]:
                bad += 1
                how = 'sideways' if rank[b] == rank[a] else 'up'
                print('layers: %s (%s) calls %s %s (%s): %s' % (
                    a, layer_of[a], how, b, layer_of[b], ', '.join(sorted(syms))))
    print('layers: %d objects, %d calls between them, %d against the layers' %
          (len(defs), edges, bad))
    return 1 if bad else 0

if __name__ == '__main__':
    sys.exit(main())
