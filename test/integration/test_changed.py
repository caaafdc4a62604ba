"""Snapshots that read only what changed (issue 52): each snapshot after a
file's first reads the call sites in groups of 64 stack ids that a charge
marked since the last one (and, once a peak moved, the groups whose rows
give at-peak bytes other than live bytes), not every site.  A charge the
writer missed would leave that site's row stale in every later snapshot.

prog_changed: 4 threads (2 in make test) charge 4096 call sites at random,
freeing each other's blocks, while a fifth thread requests snapshots back
to back; then "end" after the join.  For every variant:
 - the snapshots in the run were many (the race was exercised);
 - each site's row in "end", replayed from the deltas, equals the figures
   the program kept itself (live bytes and count, allocations, frees),
   and no site the program never charged has a row;
 - the heap's call sites add up to the heap's totals at "end";
 - what a snapshot reads follows what changed: "again", right after
   "end" with nothing charged, reads no site and lists none."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
PROG = os.path.join(B, 'test', 'prog_changed')
LEVELS = 12


def site_of(names):
    """The site number prog_changed's recursion encodes: the function at
    level l + 1 is b when bit l is set."""
    chain = [n for n in reversed(names) if n in ('a', 'b')]  # outermost first
    if len(chain) != LEVELS + 1 or chain[0] != 'a':
        return None
    return sum(1 << l for l in range(LEVELS) if chain[l + 1] == 'b')


VARIANTS = [('threads2', 2, 400000, {}), ('threads4', 4, 300000, {}),
            ('every', 2, 200000, {'MEMTALLY_EVERY': '5000'})]
if mt.full():
    VARIANTS += [('threads4-long', 4, 400000, {}), ('threads8', 8, 300000, {})]


def variant(name, nt, nops, extra):
    run = os.path.join(OUT, name)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=run,
               MEMTALLY_COMPRESS='0', **extra)
    r = subprocess.run([PROG, str(nt), str(nops)], env=env, capture_output=True, text=True, timeout=300)
    mt.eq(r.returncode, 0, '%s: prog_changed ran (stderr %r)' % (name, r.stderr[-300:]))
    if r.returncode:
        return
    want = json.loads(r.stdout)
    mt.check(want['snapshots'] >= 20, '%s: snapshots written while the threads ran: %d (want >= 20)'
             % (name, want['snapshots']))
    f = mt.files(run)[0]
    end = f.by_label('end')
    got, stray = {}, []
    pcs = sorted({pc for c in end['callsites'] for pc in f.stacks.get(c['stack'], [])})
    name_of = {pc: fn for pc, (fn, _) in zip(pcs, f.symbolize(pcs))}  # (one addr2line a module)
    for c in end['callsites']:
        if c['kind'] != 'heap':
            continue
        site = site_of([name_of[pc] for pc in f.stacks.get(c['stack'], [])])
        if site is None:
            continue
        row = [c['live_bytes'], c['live_count'], c['allocs'], c['frees']]
        if str(site) in want['sites']:
            got[str(site)] = row
        else:
            stray.append((site, row))
    bad = [(s, got.get(s), w) for s, w in want['sites'].items() if got.get(s) != w]
    mt.eq(bad[:5], [], '%s: every site\'s row at "end" (deltas replayed) equals the program\'s own '
          'figures (%d sites; %d differ; shown: site, row, program)' % (name, len(want['sites']), len(bad)))
    mt.eq(stray, [], '%s: rows for sites the program never charged' % name)
    heap = [c for c in end['callsites'] if c['kind'] == 'heap']
    for k in ('live_bytes', 'live_count', 'allocs', 'frees'):
        mt.eq(sum(c[k] for c in heap), end['heap'][k], '%s: heap call sites\' %s add up to the total at "end"'
              % (name, k))
    # what a snapshot reads follows what changed: "again", right after
    # "end" with nothing charged, reads no site (the threads touch every
    # group between two snapshots in the run: what those cost against the
    # sites there are is test/bench/snapcost.sh's)
    again = [r for r in map(json.loads, mt.lines(f.path)) if r.get('label') == 'again']  # as written
    mt.eq([(r['callsites_mode'], r['shim']['sites_read'], len(r['callsites'])) for r in again], [('delta', 0, 0)],
          '%s: "again" (nothing charged since "end"): mode, sites read, rows as written' % name)


for v in VARIANTS:
    if mt.case(v[0]):
        variant(*v)
mt.done()
