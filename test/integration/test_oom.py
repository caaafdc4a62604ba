"""Host OOM: a program capped with RLIMIT_AS allocates until malloc fails.
The dump exists before malloc returns NULL (the program checks), names
the call sites holding memory with exact bytes, lists every live block as a
segment and recent large events as trace lines, and the program's own NULL
check runs afterwards with errno ENOMEM.  Dumps are capped by
MEMTALLY_OOM_DUMPS."""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=OUT)
r = subprocess.run([os.path.join(B, 'test', 'prog_oom'), '400', OUT], env=env,
                   capture_output=True, text=True, timeout=120)
mt.eq(r.returncode, 0, 'exit code')
res = json.loads(r.stdout)
mt.eq(res['errno'], 12, 'the program sees ENOMEM')
mt.eq(res['dump_before_return'], 1, 'the dump was on disk before malloc returned NULL')
dumps = sorted(glob.glob(os.path.join(OUT, '*.oom*.jsonl')))
mt.eq(len(dumps), 1, 'one dump')
d = mt.File(dumps[0])
recs = [json.loads(l) for l in open(dumps[0])]
oom = [x for x in recs if x['type'] == 'oom'][0]
mt.eq((oom['kind'], oom['api'], oom['requested_bytes'], oom['error']),
      ('host', 'malloc', 1 << 20, 'ENOMEM'), 'oom record: kind, api, requested bytes, error')
segs = [x for x in recs if x['type'] == 'segment']
snap = d.final()
mt.eq(snap['reason'], 'oom', 'the dump ends with a complete snapshot')
agg = d.sites_by_function(snap, kinds=['heap'])
mt.eq(agg.get(('hold_block', 'heap'), {}).get('live_bytes'), res['blocks'] << 20,
      'hold_block holds exactly %d MiB' % res['blocks'])
mt.eq(agg.get(('small_blocks', 'heap'), {}).get('live_bytes'), 10000 * 1000,
      'small_blocks holds exactly 10000 x 1000 B')
stacks_hold = {c['stack'] for c in snap['callsites']
               if d.sites_by_function({'callsites': [c]}).get(('hold_block', 'heap'))}
seg_hold = sum(s['size'] for s in segs if s['stack'] in stacks_hold)
mt.eq(seg_hold, res['blocks'] << 20, 'segments of hold_block add up to the same bytes')
mt.eq(sum(1 for s in segs if s['size'] == 1000), 10000, '10000 segments of 1000 B')
traces = [x for x in recs if x['type'] == 'trace']
mt.check(traces and traces[-1]['op'] == 'oom' and traces[-1]['size'] == 1 << 20,
         'the trace ends with the failed request')
mt.check(sum(1 for t in traces if t['op'] == 'alloc' and t['size'] == 1 << 20) >= min(res['blocks'], 100),
         'the trace holds the large allocations before it')
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
r = subprocess.run([MT, 'oom', '--json', OUT], capture_output=True, text=True)
d0 = json.loads(r.stdout)['dumps'][0]
by = {c['function']: c['live_bytes'] for c in d0['callsites']}
mt.eq((d0['kind'], by.get('hold_block'), by.get('small_blocks')),
      ('host', res['blocks'] << 20, 10000 * 1000), 'memtally oom: call sites with exact bytes')
r = subprocess.run([MT, 'oom', os.path.join(OUT, 'nothing-here')], capture_output=True, text=True)
mt.eq(r.returncode, 1, 'memtally oom on a missing path exits 1')
main = mt.files(OUT)[0]
mt.eq(main.final()['reason'], 'exit', 'the main file still gets its exit snapshot')
mt.eq(main.final()['shim']['oom_dumps'], 1, 'the main file counts the dump')

# sampling: the 1 MiB blocks are below MEMTALLY_EXACT_ABOVE and the gap
# (1 GiB on average) passes most of them, so the failing call is one the
# hooks' fast path counted before the real malloc failed: it is dumped all
# the same, and not counted (the exact run above counts the same calls:
# every block it got, small_blocks' and the C library's)
outs = os.path.join(OUT, 'sampled')
envs = dict(env, MEMTALLY_OUT=outs, MEMTALLY_SAMPLE='1G', MEMTALLY_EXACT_ABOVE='2M', MEMTALLY_SEED='1')
r = subprocess.run([os.path.join(B, 'test', 'prog_oom'), '400', outs], env=envs,
                   capture_output=True, text=True, timeout=120)
mt.eq(r.returncode, 0, 'sampled: exit code')
ress = json.loads(r.stdout)
mt.eq((ress['errno'], ress['dump_before_return']), (12, 1), 'sampled: ENOMEM, the dump on disk before the NULL')
recs = [json.loads(l) for l in open(glob.glob(os.path.join(outs, '*.oom*.jsonl'))[0])]
oom = [x for x in recs if x['type'] == 'oom'][0]
mt.eq((oom['api'], oom['requested_bytes']), ('malloc', 1 << 20), 'sampled: the failed request')
heap_s = mt.files(outs)[0].final()['heap']
heap_e = main.final()['heap']
mt.eq(heap_s['allocs'] - ress['blocks'], heap_e['allocs'] - res['blocks'],
      'sampled: the same calls counted, the failed one not (%d blocks, %d exact)'
      % (ress['blocks'], res['blocks']))

# the cap: MEMTALLY_OOM_DUMPS=2 with a program that fails 5 times
out2 = os.path.join(OUT, 'cap')
env2 = dict(env, MEMTALLY_OUT=out2, MEMTALLY_OOM_DUMPS='2')
code = ('import ctypes\nlibc = ctypes.CDLL(None)\nlibc.malloc.argtypes = [ctypes.c_size_t]\n'
        'libc.malloc.restype = ctypes.c_void_p\n'
        'for i in range(5): assert libc.malloc(1 << 62) is None\nprint("ok")')
r = subprocess.run(['/usr/bin/python3', '-c', code], env=env2, capture_output=True, text=True)
mt.eq((r.returncode, r.stdout), (0, 'ok\n'), 'five failures: the program runs on')
mt.eq(len(glob.glob(os.path.join(out2, '*.oom*.jsonl'))), 2, 'MEMTALLY_OOM_DUMPS=2 caps the dumps')

# MEMTALLY_OOM_RENDER: a dump queued while the writer renders an earlier one
# is rendered too (the queue was reset after a pass and lost it)
out3 = os.path.join(OUT, 'render')
os.makedirs(out3, exist_ok=True)
env3 = dict(env, MEMTALLY_OUT=out3, MEMTALLY_OOM_RENDER='1')
for attempt in range(5):  # until the second OOM lands during the first's rendering
    shutil.rmtree(out3, ignore_errors=True)
    os.makedirs(out3)
    r = subprocess.run([os.path.join(B, 'test', 'prog_render'), out3], env=env3, capture_output=True,
                       text=True, timeout=120)
    res3 = json.loads(r.stdout)
    if res3['second_during_render']:
        break
mt.check(r.returncode == 0 and res3['first_failed'] and res3['second_during_render'],
         'render: the second OOM came while the first was being rendered %r (attempt %d)' % (res3, attempt + 1))
for n in (1, 2):
    got = sorted(os.path.splitext(p)[1] for p in glob.glob(os.path.join(out3, '*.oom%d.*' % n)))
    mt.eq(got, ['.html', '.jsonl', '.svg'], 'render: dump %d, its page and its flame graph' % n)
mt.done()
