"""8 threads x 1 M mixed operations with a fork mid-run: no deadlock (the
runner's watchdog), exact totals between two requested snapshots equal what
the program computed itself, and the child writes its own file."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

want, parent, fs = mt.run_forking('prog_threads', '1000000')
s0, s1 = parent.by_label('start')['heap'], parent.by_label('end')['heap']
for k in ('allocs', 'alloc_bytes', 'frees', 'live_bytes', 'live_count'):
    mt.eq(s1[k] - s0[k], want[k], 'parent heap %s between start and end' % k)
# The call sites add up to the totals (each thread charges its own share of
# a site's figures, and frees blocks other threads allocated: the writer's
# sums must be exact), and no site's peak is below its live bytes.
for name, snap in (('start', parent.by_label('start')), ('end', parent.by_label('end')), ('exit', parent.final())):
    cs = [c for c in snap['callsites'] if c['kind'] == 'heap']
    for k in ('live_bytes', 'live_count', 'allocs', 'frees'):
        mt.eq(sum(c[k] for c in cs), snap['heap'][k], 'parent %s: heap call sites\' %s add up to the total' % (name, k))
    mt.eq([c['stack'] for c in cs if c['peak_bytes'] < c['live_bytes']], [],
          'parent %s: call sites whose peak is below their live bytes' % name)
child = fs.get(want['child'])
mt.check(child is not None, 'child %d wrote its own file' % want['child'])
if child:
    mt.eq(child.header['ppid'], parent.header['pid'], 'child header names its parent')
    snap = child.final()
    mt.eq(snap['reason'], 'exit', 'child wrote its exit snapshot')
    agg = child.sites_by_function(snap, kinds=['heap'])
    cw = agg.get(('child_work', 'heap'), {}).get('live_bytes')
    mt.eq(cw, 10000, 'child_work live bytes in the child')
    mt.check(snap['heap']['allocs'] < 100, 'child tables start fresh (allocs %d)' % snap['heap']['allocs'])
mt.done()
