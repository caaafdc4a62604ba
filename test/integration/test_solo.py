"""Solo mode (shim/state/solo.h): one thread records with plain updates and no shard
locks until another thread records.  prog_solo's main thread churns at one
call site while it starts 40 threads that churn at the same site, so solo
mode ends while the main thread is inside its hooks: the site's figures and
the heap totals must still be exact (a plain update racing another
thread's would lose counts; an unlocked table change would lose or corrupt
entries), `shim.solo` must say 1 before the first thread and 0 after, and
a fork child records alone again (solo 1, its own figures exact)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

want, parent, fs = mt.run_forking('prog_solo', '100000')
alone, end = parent.by_label('alone'), parent.by_label('end')
mt.eq(alone['shim'].get('solo'), 1, 'solo before any other thread recorded')
mt.eq(end['shim'].get('solo'), 0, 'not solo after the workers recorded')
site = parent.sites_by_function(end, kinds=['heap']).get(('shared_site', 'heap'), {})
mt.eq(site.get('allocs'), want['allocs'], 'shared_site allocations (all threads)')
mt.eq(site.get('alloc_bytes'), want['alloc_bytes'], 'shared_site bytes allocated')
mt.eq(site.get('live_bytes'), 0, 'shared_site live bytes after everything was freed')
# the heap totals, every site's figures and the pointer table are kept
# apart: a lost update in any one of them shows as a difference (libc's own
# blocks, thread and stdio buffers, are live in all three)
heap = parent.sites_by_function(end, kinds=['heap'])
mt.eq(sum(a['live_bytes'] for a in heap.values()), end['heap']['live_bytes'],
      'heap live bytes: the sites sum to the total')
mt.eq(sum(a['live_count'] for a in heap.values()), end['heap']['live_count'],
      'heap live count: the sites sum to the total')
mt.eq(end['shim']['live_entries'], end['heap']['live_count'],
      'pointer table entries equal the live count')
mt.eq(end['heap']['allocs'] - alone['heap']['allocs'] >= want['allocs'], True,
      'heap allocations between the snapshots include all of shared_site\'s')
child = fs.get(want['child'])
mt.check(child is not None, 'child %d wrote its own file' % want['child'])
if child:
    snap = child.by_label('child')
    mt.eq(snap['shim'].get('solo'), 1, 'the fork child records alone again')
    aw = child.sites_by_function(snap, kinds=['heap']).get(('alone_site', 'heap'), {})
    mt.eq(aw.get('live_bytes'), 10000, "the child's 10 blocks at alone_site")
    mt.eq(snap['shim']['live_entries'], snap['heap']['live_count'],
          "the child's pointer table entries equal its live count")
mt.done()
