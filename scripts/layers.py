#!/usr/bin/env python3
"""layers.py BUILD_DIR [shim|analysis] — the layers, enforced from the objects.

Both programs are folders stacked in levels, lowest first.  A file may call
(from `nm`: an undefined symbol in A that B defines is a call from A to B):
  - any file of a lower level;
  - in its own folder, a file of an earlier step of that folder's list; the
    files of one step never call each other;
  - nothing in another folder of its own level (siblings: the shim's entry
    points and the command's views and exports never call each other), and
    nothing of a higher level.
A folder marked APART has every file in a step of its own kind: its files
never call each other at all.  Prints every call that runs sideways or up,
with the symbols, and exits 1 if there is any (2: objects missing).
Adding a source file: give it a step here, or this check fails."""
import glob, os, subprocess, sys

APART = 'apart'

# Each level: its folders; each folder: (name, steps) or (name, APART, files).
# A step is a file (its path under the folder, no .c) or a tuple of files.
SHIM = [
    # syscalls and atomics, the loader; checked writes to the shim's file;
    # formatting into fixed buffers, the CUDA driver's entry points and
    # their lookups, each thread's tables' memory, and the functions the
    # hooks forward to (real); the options
    [('platform', [('glue', 'dl'), 'fdio', ('buf', 'cudaroutes', 'tmem'), 'real', 'config'])],
    # the tables and the small shared states (state/sites.h has the table;
    # ptrmem is the pointer table's memory, under ptrtab)
    [('state', ['solo', 'ptrmem', 'phases', ('stacks', 'totals', 'ptrtab', 'events', 'trigger', 'marks',
                          'map64'),
                'sites', ('maptab', 'devices', 'asked')])],
    # the CFI reader and its table, the walkers, Python frames, charging
    [('capture', [('ehframe', 'cfitab'), 'cfi', ('unwind', 'pylines'), 'pyfind', 'python',
                  'pyrecords', 'charge'])],
    # the file, /proc and cgroup figures, the header and maps records and
    # the call sites' (neither calls the other), the process-wide figures,
    # the snapshot record, dumps,
    # the writer thread
    [('output', [('file', 'zout'), 'procstat', ('header', 'callsites', 'prom'), 'figures', 'snapshot', 'oom',
                 'writer'])],
    # the exported entry points: never call each other
    [('entry', APART, ['interpose', 'mappings', 'signals', 'api', 'cuda', 'exec', 'identity'])],
    # the lifecycle on top
    [('', ['life'])],
]

ANALYSIS = [
    [('base', ['mem', 'sb', ('text', 'files', 'keyix')])],
    [('model', ['model'])],
    # bytes and ids, the fields, the records, lines, a file and what damage
    # means for it, then the ways in: a directory, a growing file, `cat`
    [('read', ['json', ('idmap', 'source', 'symbolize', 'skip'), ('fields', 'torchsnap'), 'snaprec', 'records', 'lines',
               'load', ('files', 'follow', 'cat'), 'summary'])],
    # the answers the commands print (stats, the growth window, call sites,
    # growth and leaks, the moment a view reads), and the command context
    # every command receives: neither calls the other
    [('answer', [('stats', 'frames', 'torchfig', 'phase'), 'userline', 'sites', 'window', 'procs', ('growth', 'moment', 'ranks', 'join', 'kept')]),
     ('cmd', ['cmd'])],
    # the commands: views print, exports write files; a view never calls
    # another view or an export, nor an export a view
    [('views', APART, ['diff', 'functions', 'leaks', 'metrics', 'oom', 'ranks', 'report', 'top']),
     ('export', [('proto/profile.pb-c', 'html_page', 'pickle', 'html_join', 'html_timeline',
                  'html_tables'), 'flame',
                 ('torch', 'pprof', 'html', 'flame_cmd')])],
    # the runner: its directory lock and its end-of-run warnings, then the
    # command; the command line on top
    [('run', [('lock', 'warnings'), 'run'])],
    [('', ['main'])],
]

HALVES = {'shim': ('shim', SHIM), 'analysis': ('analysis', ANALYSIS)}


def places(levels):
    """file -> (level, folder, step): where each named file sits."""
    at = {}
    for lv, folders in enumerate(levels):
        for f in folders:
            name, steps = f[0], f[-1]
            for si, step in enumerate(steps):
                for base in (step if isinstance(step, tuple) else (step,)):
                    key = (name + '/' if name else '') + base
                    # an APART folder: every file a step of its own, and
                    # steps of one folder never call each other
                    at[key] = (lv, name, si, len(f) == 3)
    return at


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


def verdict(a, b):
    """None when a may call b, else 'up' or 'sideways'."""
    la, fa, sa, apart = a
    lb, fb, sb, _ = b
    if lb < la:
        return None
    if lb > la:
        return 'up'
    if fa != fb:
        return 'sideways'
    if apart or sb >= sa:
        return 'sideways' if apart or sb == sa else 'up'
    return None


def check(build, half):
    src_dir, levels = HALVES[half]
    root = os.path.join(build, src_dir)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', src_dir)
    # the objects of today's sources (a stale object of a moved file is not read)
    names = [os.path.relpath(c, here)[:-2]
             for c in sorted(glob.glob(os.path.join(here, '**', '*.c'), recursive=True))]
    missing = [n for n in names if not os.path.exists(os.path.join(root, n + '.o'))]
    if missing:
        print('layers: %s: no %s (make all first)' % (half, os.path.join(root, missing[0] + '.o')))
        return None
    at = places(levels)
    defs, undefs = {}, {}
    for n in names:
        defs[n], undefs[n] = symbols(os.path.join(root, n + '.o'))
    bad = 0
    for n in names:
        if n not in at:
            print('layers: %s/%s.c has no place in scripts/layers.py' % (src_dir, n))
            bad += 1
    owner = {s: n for n, d in defs.items() for s in d}
    edges = 0
    for a in names:
        calls = {}
        for s in undefs[a]:
            b = owner.get(s)
            if b and b != a:
                calls.setdefault(b, []).append(s)
        for b, syms in sorted(calls.items()):
            edges += 1
            how = verdict(at[a], at[b]) if a in at and b in at else None
            if how:
                bad += 1
                print('layers: %s: %s calls %s %s: %s' % (half, a, how, b, ', '.join(sorted(syms))))
    print('layers: %s: %d objects, %d calls between them, %d against the layers' %
          (half, len(names), edges, bad))
    return bad


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else 'build'
    halves = sys.argv[2:] or ['shim', 'analysis']
    if any(h not in HALVES for h in halves):
        print('usage: layers.py BUILD_DIR [shim|analysis]...')
        return 2
    results = [check(build, h) for h in halves]
    if any(r is None for r in results):
        return 2
    return 1 if any(results) else 0


if __name__ == '__main__':
    sys.exit(main())
