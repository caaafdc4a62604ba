"""8 threads x 1 M mixed operations with a fork mid-run: no deadlock (the
runner's watchdog), exact totals between two requested snapshots equal what
the program computed itself, and the child writes its own file.

The heap's peak when threads record (prog_peaksplit: N threads each hold
8 MB / N of 1000-byte blocks at once, then free them), against the same
work on the main thread alone, whose peak is exact: each thread keeps its
change of the heap's live bytes to itself while within 64 KiB
(totals.h MT_HEAP_SLACK), so
 - live bytes in every snapshot are exact (equal the single thread's, less
   the threads' own few hundred bytes);
 - a snapshot taken at the peak makes the peak exact;
 - without one, the peak is within threads x 64 KiB of the exact one;
 - what threads that ended held back counts in a peak made after the
   next snapshot (the writer folds it: the shim is told of no thread's
   end)."""
import os, subprocess, sys
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

SLACK = 64 << 10
PS = os.path.join(os.environ['MT_BUILD'], 'test', 'prog_peaksplit')


def peaksplit(tag, *args):
    run = os.path.join(os.environ['MT_OUT'], 'peaksplit-' + tag)
    env = dict(os.environ, LD_PRELOAD=os.path.join(os.environ['MT_BUILD'], 'libmemtally.so'),
               MEMTALLY_OUT=run)
    r = subprocess.run([PS] + [str(a) for a in args], env=env, capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, 0, 'prog_peaksplit %s ran (%r)' % (tag, r.stderr[-200:]))
    f = mt.files(run)[0]
    return {s.get('label'): s.get('heap', {}) for s in f.snapshots if s.get('label')}, f.final()['heap']


solo, solo_end = peaksplit('solo', 0, 8000, 1000)
exact = solo['held']['live_bytes']
mt.eq(solo_end['peak_bytes'], exact, 'one thread: the heap\'s peak is the live bytes with every block held')
for nt in ((4,) if not mt.full() else (2, 4, 8)):
    snaps, end = peaksplit('%d' % nt, nt, 8000 // nt, 1000)
    held = snaps['held']['live_bytes']
    mt.check(0 <= held - exact <= 512 * nt, '%d threads: live bytes held %d, one thread %d (threads\' own '
             'allocations aside: at most 512 bytes each)' % (nt, held, exact))
    mt.eq(end['peak_bytes'], held, '%d threads, a snapshot while every block is held: the peak' % nt)
    snaps, end = peaksplit('%d-quiet' % nt, nt, 8000 // nt, 1000, 'quiet')
    mt.check(abs(end['peak_bytes'] - exact) < nt * SLACK,
             '%d threads, no snapshot at the peak: peak %d within %d x 64 KiB of the exact %d (off by %d)'
             % (nt, end['peak_bytes'], nt, exact, end['peak_bytes'] - exact))
# threads that end holding back what they kept (each under 64 KiB): the
# writer folds it into the shared figure at the next snapshot, so a peak
# made after it (1 MiB on the main thread) counts it, exactly
snaps, end = peaksplit('ended', 8, 60, 1000, 'ended')
held = snaps['ended']['live_bytes']
mt.eq(end['peak_bytes'], held + (1 << 20), '8 threads that ended keeping 60 KB each, then 1 MiB: the peak is '
      'what they keep plus 1 MiB')
mt.done()
