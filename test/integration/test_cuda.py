"""CUDA driver allocations through every route, on the fake driver
(test/fakecuda, linked -Bsymbolic): -lcuda (direct exports), dlopen+dlsym
(with "cuMemAllocAsync_ptsz"), cuGetProcAddress with the per-thread flag,
and cudart 13's sequence (dlsym cuGetProcAddress_v2, self-lookup at 12000,
lookups through the returned pointer).  Each route sees every allocation
with exact bytes at the right function, and the per-device live bytes equal
the fake driver's own accounting.  Switching off the route a program needs
(MEMTALLY_CUDA_ROUTES) makes it see nothing, so the tests cannot pass for
the wrong reason.  Also: VMM as expandable segments use it, 8 threads with
the per-thread flag, the OOM dump complete on disk before the error
returns, recovery after a retry, and dlsym(RTLD_NEXT) from another
preloaded library."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
FAKE = os.path.join(B, 'test', 'fakecuda')
MIB = 1 << 20

def run(name, route, work='mix', routes='all', extra=None):
    out = os.path.join(OUT, name)
    prog = os.path.join(B, 'test', 'cuda_direct' if route == 'direct' else 'cuda_prog')
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, LD_LIBRARY_PATH=FAKE,
               MEMTALLY_CUDA_ROUTES=routes, FAKE_CUDA_MEM=str(1 << 30))
    env.update(extra or {})
    r = subprocess.run([prog, route, work, out], env=env, capture_output=True, text=True,
                       timeout=120)
    mt.eq(r.returncode, 0, '%s: exit code %s' % (name, r.stderr[-200:]))
    return json.loads(r.stdout), mt.files(out)[0]

want = {('dev_alloc', 'cuda'): (6 * MIB, 6, 10), ('async_alloc', 'cuda'): (2 * MIB, 4, 5),
        ('pinned_alloc', 'cuda_host'): (3 * 65536, 3, 3),
        ('managed_alloc', 'cuda_managed'): (4 * MIB, 2, 2),
        ('pitch_alloc', 'cuda'): (102400, 1, 1), ('array_alloc', 'cuda'): (262144, 1, 2),
        ('dev1_alloc', 'cuda'): (3 * MIB, 3, 3)}
CUDA_KINDS = ['cuda', 'cuda_host', 'cuda_managed', 'cuda_vmm']
needs = {'direct': ['direct'], 'dlsym': ['dlsym'], 'gpa': ['dlsym', 'gpa'],
         'rt': ['dlsym', 'gpa', 'self']}
for route in ('direct', 'dlsym', 'gpa', 'rt'):
    fake, f = run(route, route)
    snap = f.final()
    agg = f.sites_by_function(snap, kinds=CUDA_KINDS)
    for (fn, kind), (live, count, allocs) in sorted(want.items()):
        s = agg.get((fn, kind), {})
        mt.eq((s.get('live_bytes'), s.get('live_count'), s.get('allocs')), (live, count, allocs),
              '%s: %s %s live bytes, count, allocs' % (route, fn, kind))
    devs = {d['device']: d for d in snap.get('devices', [])}
    mt.eq((devs.get(0, {}).get('live_bytes'), devs.get(1, {}).get('live_bytes')),
          (fake['used0'], fake['used1']), '%s: per-device live bytes equal the driver\'s own' % route)
    mt.check(devs.get(0, {}).get('driver_total_bytes') == 1 << 30,
             '%s: driver free/total in the snapshot' % route)
    for off in needs[route]:
        rest = ','.join(x for x in ('direct', 'dlsym', 'gpa', 'self') if x != off) or 'none'
        fake, f = run('%s-no-%s' % (route, off), route, routes=rest)
        seen = [c for c in f.final()['callsites'] if c['kind'] in CUDA_KINDS]
        mt.eq(len(seen), 0, '%s without the %s route: no allocation seen' % (route, off))
        mt.eq(fake['used0'], 12947456, '%s without the %s route: the program still works' % (route, off))
fake, f = run('rt-nodirect', 'rt', routes='dlsym,gpa,self')
agg = f.sites_by_function(f.final(), kinds=CUDA_KINDS)
mt.eq(agg.get(('dev_alloc', 'cuda'), {}).get('live_bytes'), 6 * MIB,
      'rt without the direct route: still every allocation (the routes, not the exports, caught them)')

# MEMTALLY_HOST=0: only the driver is tracked
fake, f = run('cuda-only', 'rt', extra={'MEMTALLY_HOST': '0'})
kinds = {c['kind'] for c in f.final()['callsites']}
mt.check(kinds and kinds <= set(CUDA_KINDS), 'HOST=0: only CUDA kinds recorded (%s)' % sorted(kinds))

# VMM: charged at cuMemCreate, released at cuMemRelease; mappings charge nothing
fake, f = run('vmm', 'rt', 'vmm')
snap = f.final()
s = f.sites_by_function(snap, kinds=CUDA_KINDS).get(('vmm_grow', 'cuda_vmm'), {})
mt.eq((s.get('live_bytes'), s.get('live_count'), s.get('allocs')), (4 * MIB, 2, 3),
      'vmm: vmm_grow live bytes, count, allocs (3 created, 1 released)')
mt.eq(snap['devices'][0]['live_bytes'], fake['used0'], 'vmm: device live bytes equal the driver\'s')

# Two GPUs: a call site's bytes at the peak are its device's peak, not the
# kind's (cuda_prog "gpus": device 1 peaks at 40 MiB with gpu_site holding
# 32 MiB there; the cuda kind peaks later, when gpu_site holds 0 on device 1)
if mt.case('gpus'):
    fake, f = run('gpus', 'rt', 'gpus')
    snap = f.final()
    ids = [i for i, pcs in f.stacks.items() if pcs]
    syms = dict(zip(ids, [fn for fn, _ in f.symbolize([f.stacks[i][0] for i in ids])]))
    seen = {}
    for c in snap['callsites']:
        fn = syms.get(c['stack'])
        if c['kind'] == 'cuda' and fn in ('gpu_site', 'gpu_other'):
            seen[(fn, f.stack_device.get(c['stack']))] = (c['at_peak_bytes'], c['live_bytes'])
    mt.eq(seen, {('gpu_site', 1): (32 * MIB, 0), ('gpu_site', 0): (64 * MIB, 64 * MIB),
                 ('gpu_other', 1): (8 * MIB, 8 * MIB)},
          'gpus: each device\'s call sites at that device\'s peak (at peak, live)')
    devs = {d['device']: d['peak_bytes'] for d in snap['devices']}
    mt.eq(devs, {0: 64 * MIB, 1: 40 * MIB}, 'gpus: each device\'s peak')
    MTC = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
    gdir = os.path.join(OUT, 'gpus')
    r = subprocess.run([MTC, 'report', '--json', gdir], capture_output=True, text=True)
    ap = json.loads(r.stdout)['processes'][0]['at_peak']
    mt.eq(ap.get('device_peak_bytes'), {'0': 64 * MIB, '1': 40 * MIB},
          'gpus: report --json names each GPU\'s peak')
    rows = {(c['function'], c.get('device')): c['at_peak_bytes'] for c in ap['callsites']
            if c['kind'] == 'cuda'}
    mt.eq(rows, {('gpu_site', 0): 64 * MIB, ('gpu_site', 1): 32 * MIB, ('gpu_other', 1): 8 * MIB},
          'gpus: report --json, each GPU\'s call sites at its peak')
    r = subprocess.run([MTC, 'report', gdir], capture_output=True, text=True)
    t = r.stdout
    mt.check("top call sites at GPU 1's peak (40.0 MiB" in t and
             t.index("GPU 1's peak") < t.index('32.0 MiB         0 B cuda      gpu_site'),
             'gpus: report prints GPU 1\'s table, gpu_site 32 MiB there, none now:\n' + t)
    r = subprocess.run([MTC, 'functions', '--json', '--device', '1', gdir],
                       capture_output=True, text=True)
    fns = {x['function']: (x['self_bytes'], x['inclusive_bytes'])
           for x in json.loads(r.stdout)['processes'][0]['functions']}
    mt.eq((fns.get('gpu_site'), fns.get('gpu_other'), fns.get('main')),
          ((32 * MIB, 32 * MIB), (8 * MIB, 8 * MIB), (0, 40 * MIB)),
          'gpus: functions --device 1, that GPU\'s call sites at its peak')
    r = subprocess.run([MTC, 'report', '--device', '16', gdir], capture_output=True, text=True)
    mt.check(r.returncode == 2 and 'from 0 to 15' in r.stderr, 'gpus: --device 16 is a usage error')

# 8 threads, async with the per-thread flag: the _ptsz functions are called
fake, f = run('mt', 'rt', 'mt')
s = f.sites_by_function(f.final(), kinds=CUDA_KINDS).get(('mt_worker', 'cuda'), {})
mt.eq((s.get('live_bytes'), s.get('allocs'), s.get('frees')), (8 * 4096, 16000, 15992),
      'mt: 8 x 2000 async allocations, one left per thread')
mt.eq(fake['ptsz_calls'], 8 * 3999, 'mt: every call reached the driver\'s _ptsz variant')

# OOM: the dump is on disk when the error reaches the program
fake, f = run('oom', 'rt', 'oom')
mt.eq((fake['error'], fake['dump_on_disk']), (2, 1),
      'oom: CUDA_ERROR_OUT_OF_MEMORY, and the dump was complete before it returned')
dump = [p for p in os.listdir(os.path.join(OUT, 'oom')) if '.oom1.' in p]
recs = [json.loads(l) for l in open(os.path.join(OUT, 'oom', dump[0]))]
oom = [x for x in recs if x['type'] == 'oom'][0]
mt.eq((oom['kind'], oom['api'], oom['requested_bytes'], oom['device'], oom['error']),
      ('cuda', 'cuMemAlloc_v2', 64 * MIB, 0, 'CUDA_ERROR_OUT_OF_MEMORY'), 'oom record')
mt.eq((oom['driver_free_bytes'], oom['driver_total_bytes']), (0, 1 << 30), 'oom: driver free/total')
segs = [x for x in recs if x['type'] == 'segment']
mt.eq(sum(x['size'] for x in segs if x['device'] == 0 and x['kind'] != 'cuda_host'),
      fake['used_at_oom'], 'oom: the dump\'s live device bytes equal the driver\'s accounting')
mt.check(all(x['kind'] in CUDA_KINDS for x in segs), 'oom: a CUDA dump lists device segments only')
trace = [x for x in recs if x['type'] == 'trace']
mt.check(trace[-1]['op'] == 'oom' and trace[-1]['size'] == 64 * MIB, 'oom: the trace ends with the failure')
dev = f.final()['devices'][0]
mt.eq((dev['ooms'], dev['recovered'], dev['oom_recovered']), (1, 1, True),
      'oom: a later success marks the dump recovered')
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
r = subprocess.run([MT, 'oom', '--json', os.path.join(OUT, 'oom')], capture_output=True, text=True)
mt.eq(r.returncode, 0, 'memtally oom: exit code')
d0 = json.loads(r.stdout)['dumps'][0]
mt.eq((d0['kind'], d0['live_bytes'], d0['callsites'][0]['function'], d0['callsites'][0]['live_bytes']),
      ('cuda', fake['used_at_oom'], 'big_block', fake['used_at_oom']),
      'memtally oom: big_block holds exactly what the driver counted')
mt.check(d0['events'][-1]['op'] == 'oom' and len(d0['segments']) == 10, 'memtally oom: segments and events')
r = subprocess.run([MT, 'report', '--json', os.path.join(OUT, 'oom', dump[0])], capture_output=True, text=True)
cs = json.loads(r.stdout)['processes'][0]['last']['callsites']
mt.eq(sum(c['live_bytes'] for c in cs if c['function'] == 'big_block' and c['kind'] == 'cuda'),
      fake['used_at_oom'], 'memtally report on the dump: big_block\'s exact device bytes')
r = subprocess.run([MT, 'oom', os.path.join(OUT, 'oom')], capture_output=True, text=True)
mt.check('cuMemAlloc_v2(64.0 MiB) failed with CUDA_ERROR_OUT_OF_MEMORY' in r.stdout and
         'big_block (cuda_prog.c:' in r.stdout, 'memtally oom: text names the call and the line')

# dlsym(RTLD_NEXT) from a library preloaded after the shim: test_dlsym.py

# torch on a dump with 250 k trace events: every free rescanned the events
# before it for its alloc, and every event the segments (quadratic: about
# 28 s for 150 k events here); now one sort (n log n).  The events are
# frees of blocks allocated before the window, which the pickle leaves out,
# so the output stays small and the time is the search alone: a watchdog
# far above the new cost (about 1 s, ASan build included), far below the
# old (minutes).
lines = open(os.path.join(OUT, 'oom', dump[0])).read().split('\n')
at = next(i for i, l in enumerate(lines) if l.startswith('{"type":"trace"'))
stack = json.loads(lines[at])['stack']
extra = ['{"type":"trace","op":"free","kind":"cuda","address":"0x%x","size":2097152,'
         '"stack":%d,"time_ms":%d}' % (0x200000000000 + i * 0x200000, stack, i // 100)
         for i in range(250000)]
big = os.path.join(OUT, 'big.oom1.jsonl')
with open(big, 'w') as fh:
    fh.write('\n'.join(lines[:at] + extra + lines[at:]))
try:
    r = subprocess.run([MT, 'torch', big, '-o', os.path.join(OUT, 'big.pickle')],
                       capture_output=True, text=True, timeout=30)
    mt.eq(r.returncode, 0, 'torch: 250 k trace events within 30 s')
except subprocess.TimeoutExpired:
    mt.check(False, 'torch: 250 k trace events within 30 s (timed out: quadratic?)')

# torch's pickle keeps a memo: 150 k trace events (75 k blocks allocated and
# freed inside the window, all by big_block's stack) write that stack's
# frame list once and each string once; without it each entry carried its
# own copy of the frames (379 MB for a real 150 k-event dump; 15 MB with)
pairs = []
for i in range(75000):
    a = '"address":"0x%x","size":1048576,"stack":%d,"time_ms":%d}' % (0x300000000000 + i * 0x100000, stack, i // 100)
    pairs += ['{"type":"trace","op":"alloc","kind":"cuda",' + a, '{"type":"trace","op":"free","kind":"cuda",' + a]
memo = os.path.join(OUT, 'memo.oom1.jsonl')
with open(memo, 'w') as fh:
    fh.write('\n'.join(lines[:at] + pairs + lines[at:]))
pk = os.path.join(OUT, 'memo.pickle')
r = subprocess.run([MT, 'torch', memo, '-o', pk], capture_output=True, text=True, timeout=120)
raw = open(pk, 'rb').read() if r.returncode == 0 else b''
chk = subprocess.run(['/usr/bin/python3', '-c', '''if 1:
    import pickle, sys
    d = pickle.load(open(sys.argv[1], "rb"))
    t = [e for e in d["device_traces"][0] if e.get("addr", 0) >= 0x300000000000]
    fr = [e["frames"] for e in t]
    print(len(t), all(f == fr[0] for f in fr), fr[0][0]["name"] if fr and fr[0] else None)''', pk],
                     capture_output=True, text=True)
mt.eq(chk.stdout.split(), ['375000', 'True', 'big_block'],
      'torch: the 150 k events read back, each with big_block\'s frames (%s)' % chk.stderr[-200:])
n = {w: raw.count(w.encode()) for w in ('big_block', 'cuda_prog.c', 'free_requested', 'time_us')}
mt.check(set(n.values()) == {1} and len(raw) < 100 * 375000,
         'torch: each string once (%s), %d bytes (< 100 an entry)' % (n, len(raw)))
mt.done()
