"""MEMTALLY_EVERY=N means every N (issue 33, item 8): a program that
allocates as fast as it can gets one snapshot per N tracked allocations,
each of the state at that allocation: the k-th "every" snapshot's totals
count exactly k*N allocations (one thread).  Before, the hook only woke
the writer, and snapshots asked while it wrote were merged: 80 k
allocations with EVERY=2000 gave 1 snapshot instead of 40.  The cost per
snapshot (the allocating thread writes it) is printed, not asserted."""
import os, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
PROG = os.path.join(B, 'test', 'prog_fast')
KINDS = ('heap', 'mmap', 'mmap_file', 'cuda', 'cuda_host', 'cuda_managed', 'cuda_vmm')


def run(name, n, every):
    out = os.path.join(OUT, name)
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, MEMTALLY_COMPRESS='0')
    if every:
        env['MEMTALLY_EVERY'] = str(every)
    t0 = time.perf_counter()
    r = subprocess.run([PROG, str(n)], env=env, capture_output=True, text=True, timeout=280)
    return r, mt.files(out), time.perf_counter() - t0


def allocs(snap):
    return sum(snap[k]['allocs'] for k in KINDS if k in snap)


for n, every in ((80000, 2000), (800000, 2000), (100000, 1)):
    if every == 1:
        n = 3000  # a snapshot for each allocation
    r, fs, secs = run('n%d_e%d' % (n, every), n, every)
    f = fs[0] if len(fs) == 1 else None
    snaps = [s for s in f.snapshots if s['reason'] == 'every'] if f else []
    total = allocs(f.final()) if f else 0
    mt.check(r.returncode == 0 and f and len(snaps) == total // every,
             '%d allocations, EVERY=%d: %d "every" snapshots for %d tracked allocations (want %d)' %
             (n, every, len(snaps), total, total // every))
    exact = [allocs(s) for s in snaps] == [every * (k + 1) for k in range(len(snaps))]
    mt.check(exact, 'EVERY=%d: the k-th snapshot holds exactly k*%d allocations' % (every, every))
    mt.check(f and f.final()['shim'].get('coalesced', 0) == 0, 'EVERY=%d: nothing coalesced' % every)
    if n == 800000:
        _, _, base = run('n%d_none' % n, n, 0)
        print('  cost: %.1f us a snapshot (%.3f s with %d snapshots, %.3f s without)' %
              ((secs - base) / max(len(snaps), 1) * 1e6, secs, len(snaps), base))
mt.done()
