"""MEMTALLY_SAMPLE=64K estimates a 100 MiB leak of 1 KiB blocks within 5%
while keeping far fewer records than allocations.  Seeds are fixed so the
test is repeatable; the estimator's own spread here is about 2.5% (one
sigma: ~1600 samples), so each of the five seeds must land within 5%."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
truth = 100 << 20
# the same program in exact mode: its call counts are what sampling counts
# too (every call is counted, sampled or not, most on the hooks' fast path)
out = os.path.join(OUT, 'exact')
r = subprocess.run([os.path.join(B, 'test', 'prog_leak')], capture_output=True, text=True,
                   env=dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=out))
mt.eq(r.returncode, 0, 'exact: exit code')
exact = mt.files(out)[0].final()['heap']
for seed in (1, 2, 3, 4, 5):
    out = os.path.join(OUT, 'seed%d' % seed)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'),
               MEMTALLY_OUT=out, MEMTALLY_SAMPLE='64K', MEMTALLY_SEED=str(seed))
    r = subprocess.run([os.path.join(B, 'test', 'prog_leak')], env=env,
                       capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'seed %d: exit code' % seed)
    f = mt.files(out)[0]
    snap = f.final()
    agg = f.sites_by_function(snap, kinds=['heap'])
    est = agg.get(('leak_blocks', 'heap'), {}).get('live_bytes', 0)
    err = abs(est - truth) / truth
    mt.check(err <= 0.05, 'seed %d: leak_blocks estimated %d bytes, %.2f%% off (<= 5%%)'
             % (seed, est, 100 * err))
    churn = agg.get(('churn', 'heap'), {}).get('live_bytes', 0)
    mt.eq(churn, 0, 'seed %d: churn has nothing live' % seed)
    entries = snap['shim']['live_entries']
    mt.check(entries < 102400 // 20,
             'seed %d: %d live records for 102400 live blocks' % (seed, entries))
    mt.check(snap['heap']['allocs'] >= 102400 + 200000, 'seed %d: exact allocation count %d'
             % (seed, snap['heap']['allocs']))
    mt.eq([snap['heap'][k] for k in ('allocs', 'alloc_bytes', 'frees')],
          [exact[k] for k in ('allocs', 'alloc_bytes', 'frees')],
          'seed %d: allocations, their bytes and frees counted as in exact mode' % seed)
mt.done()
