"""Known allocations give exactly their bytes and counts in the exit
snapshot, charged to the right functions (symbolized here with addr2line);
what was freed shows zero live.  With each walker: the shim's CFI walker
(the default), libunwind and frame pointers, and at MEMTALLY_DEPTH=1 (the
hook's return address alone, through the one-frame stack cache); the CFI
walker's stacks are libunwind's, frame for frame (as module + offset), and
the one-frame stacks are their innermost frames.  Sampling with a mean
gap of 1 byte samples every allocation (through the hooks' sampling path)
and must give exact mode's stacks and figures, at depth 32 and at 1."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
prog = os.path.join(B, 'test', 'prog_known')
def shapes(f):
    """{(stack as module+offset frames, kind): (allocs, bytes, live bytes)}"""
    out = {}
    for c in f.final()['callsites']:
        frames = []
        for pc in f.stacks.get(c['stack'], []):
            m = f.module(pc)
            frames.append('%s+%x' % (os.path.basename(m['path']), pc - int(m['base'], 16)) if m else '?')
        out[(tuple(frames), c['kind'])] = (c['allocs'], c['alloc_bytes'], c['live_bytes'])
    return out

seen = {}
for unwind in ('cfi', 'libunwind', 'fp', 'depth1', 'sampled', 'sampled1'):
    out = os.path.join(OUT, unwind)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'),
               MEMTALLY_OUT=out, MEMTALLY_UNWIND='cfi' if unwind in ('depth1', 'sampled', 'sampled1') else unwind)
    if unwind in ('depth1', 'sampled1'):
        env['MEMTALLY_DEPTH'] = '1'
    if unwind in ('sampled', 'sampled1'):
        env['MEMTALLY_SAMPLE'] = '1'
    r = subprocess.run([prog], env=env, capture_output=True, text=True)
    mt.eq(r.returncode, 0, unwind + ': exit code')
    mt.eq(r.stdout, 'done 1043\n', unwind + ': output')
    fs = mt.files(out)
    mt.eq(len(fs), 1, unwind + ': one file')
    f = fs[0]
    snap = f.final()
    mt.eq(snap['reason'], 'exit', unwind + ': last snapshot is the exit one')
    agg = f.sites_by_function(snap)
    def site(fn, kind):
        return agg.get((fn, kind), {'live_bytes': None, 'live_count': None, 'allocs': None})
    want = [
        ('alloc_pages', 'heap', 1000 * 4096, 1000, 1000),
        ('map_one', 'mmap', 300 << 20, 300, 300),
        ('map_and_unmap', 'mmap', 0, 0, 50),
        ('map_trim', 'mmap', 8192, 1, 1),
        ('map_grow', 'mmap', 12288, 1, 2),
        ('realloc_chain', 'heap', 10 * 8192, 10, 100),
        ('aligned', 'heap', 10 * 1000 + 777 + 512, 12, 12),
        ('zeroes', 'heap', 20 * 63, 20, 20),
        ('churn', 'heap', 0, 0, 500),
        ('array_grow', 'heap', 50 * 24, 1, 2),
    ]
    for fn, kind, live, count, allocs in want:
        s = site(fn, kind)
        mt.eq((s['live_bytes'], s['live_count'], s['allocs']), (live, count, allocs),
              '%s: %s %s live bytes, live count, allocs' % (unwind, fn, kind))
    mt.check(snap['shim']['dropped_stacks'] == 0 and snap['shim']['dropped_live'] == 0,
             unwind + ': nothing dropped')
    seen[unwind] = shapes(f)
    if unwind == 'cfi':
        # walked by the CFI walker itself: libunwind gets only what it
        # cannot read, here the loader's entry (_dl_start_user, no unwind
        # information) under the constructors it runs at start
        fb = snap['shim'].get('unwind_fallbacks')
        mt.check(fb is not None and fb <= 2, 'cfi: %r of 2000 captures handed to libunwind' % fb)
cfi, lu, d1 = seen['cfi'], seen['libunwind'], seen['depth1']
mt.eq(seen['sampled'], cfi, 'sampled: every allocation sampled, the same stacks and figures as exact mode')
mt.eq(seen['sampled1'], d1, 'sampled1: the same at MEMTALLY_DEPTH=1 (the frame is the program\'s, not the hook\'s)')
mt.check(all(len(k[0]) == 1 for k in d1), 'depth1: every stack is one frame')
inner = {}
for (frames, kind), (a, b, l) in cfi.items():
    if frames:
        x = inner.setdefault((frames[:1], kind), [0, 0, 0])
        x[0] += a; x[1] += b; x[2] += l
mt.eq({k: tuple(v) for k, v in inner.items()}, d1,
      'depth1: each one-frame site sums the full stacks with that innermost frame')
mt.check(len(cfi) > 10 and cfi == lu,
         'cfi: the same %d stacks as libunwind, frame for frame (%d only cfi, %d only libunwind)'
         % (len(lu), len(set(cfi) - set(lu)), len(set(lu) - set(cfi))))
mt.done()
