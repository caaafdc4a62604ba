"""PyTorch's caching allocator seen from memtally, on the double of torch's
CUDA memory API (py/double/torch: the structures of torch 2.0 and 2.1+) over
the fake driver: a trainer (py/torch_double_train.py) that never imports
memtally's analysis, under the shim with scripts/python on PYTHONPATH.

 - each step's caching-allocator figures reach the snapshots
   (devices[].torch) equal to torch's own counters at that step;
 - a failure the caching allocator recovers from (it frees its cache and
   retries), then the OOM it raises: three dumps, their outcomes
   recovered, failed_again and raised, and torch's snapshot written beside
   the raised one before OutOfMemoryError reached Python;
 - `memtally oom` joins the two: driver live = torch allocated + torch
   cached + outside torch, to the byte, driver live equal to the fake
   driver's own count; the NCCL-like library's buffers named NCCL, the
   ctypes workspace as other; every allocated block with its Python line;
 - the same with torch 2.0's form and with expandable segments (VMM: a
   retry that made handles but mapped none is no recovery);
 - PyTorch's memory fraction: a dump written at the observer (torch_limit);
 - backend:cudaMallocAsync: one warning, the driver's dumps only;
 - an unmodified trainer (no memtally code, steps from torch.optim) under
   `memtally run`: the start-up hook installs memtally_cuda, and the same
   figures, outcomes, pair and join follow;
 - `memtally torch` on the pair: PyTorch 1.13's own _memory_viz reads it,
   the driver's allocations outside torch are segments of their own and
   the segments add up to the driver's live bytes; html has the table."""
import glob, json, os, pickle, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20


def run(name, mode='oom', version='2.3.0', conf='', extra=None):
    out = os.path.join(OUT, name)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=out,
               LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'), FAKE_CUDA_MEM=str(1 << 30),
               PYTHONPATH=os.path.join(HERE, 'py', 'double') + ':' + os.path.join(ROOT, 'scripts', 'python'),
               TORCH_DOUBLE_VERSION=version, PYTORCH_CUDA_ALLOC_CONF=conf, MEMTALLY_COMPRESS='0')
    env.update(extra or {})
    r = subprocess.run(['/usr/bin/python3', os.path.join(HERE, 'py', 'torch_double_train.py'), mode],
                       env=env, capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, 0, '%s: the trainer exits 0 (%s)' % (name, r.stderr[-300:]))
    try:
        return json.loads(r.stdout), out, r.stderr
    except ValueError:
        return {}, out, r.stderr


def records(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def outcomes(out):
    got = {}
    for p in sorted(glob.glob(os.path.join(out, '*.oom*.jsonl'))):
        if p.endswith('.torch.jsonl'):
            continue
        oc = [r for r in records(p) if r['type'] == 'outcome']
        got[os.path.basename(p).split('.')[-2]] = oc[-1] if oc else None
    return got


def joined(name, out, res, want_expandable=False):
    r = subprocess.run([MT, 'oom', '--json', '--top', '1000', out], capture_output=True, text=True)
    mt.eq(r.returncode, 0, '%s: memtally oom exit code (%s)' % (name, r.stderr[-300:]))
    dumps = json.loads(r.stdout)['dumps'] if r.returncode == 0 else []
    paired = [d for d in dumps if d.get('torch')]
    mt.eq(len(paired), 1, '%s: one dump has PyTorch\'s snapshot beside it' % name)
    if not paired:
        return None
    d, t = paired[0], paired[0]['torch']
    mt.eq(d['outcome']['outcome'] if d['outcome'] else None, 'raised', '%s: the paired dump is the raised one' % name)
    live = t['driver_live_bytes']
    mt.check(t['reconciles'] and t['torch_allocated_bytes'] + t['torch_cached_bytes'] + t['outside_bytes'] == live,
             '%s: torch allocated %d + cached %d + outside %d = driver live %d, to the byte'
             % (name, t['torch_allocated_bytes'], t['torch_cached_bytes'], t['outside_bytes'], live))
    # with expandable segments the retry's failed growth holds handles at the
    # failure (made, not yet mapped: torch releases them before it raises)
    mt.eq(live - t['unmapped_bytes'], res['oom']['driver_used'],
          '%s: driver live less the failed growth\'s unmapped handles (%d) = the fake driver\'s own '
          'count when the error reached Python' % (name, t['unmapped_bytes']))
    mt.check((t['unmapped_bytes'] > 0) == want_expandable,
             '%s: unmapped handles at the failure only with expandable segments (%d)' % (name, t['unmapped_bytes']))
    mt.eq((t['torch_allocated_bytes'], t['torch_reserved_bytes']),
          (res['end']['allocated_bytes'], res['end']['reserved_bytes']),
          '%s: torch\'s allocated and reserved = its counters after the raise' % name)
    outside = sorted((o['owner'], o['size'], o['function']) for o in t['outside'] if o['owner'] != 'unmapped VMM handles')
    mt.eq(outside, [('NCCL', 24 * MIB, 'nccl_init'), ('other', 6 * MIB, 'workspace')],
          '%s: outside torch: the NCCL-like library\'s buffers and the ctypes workspace, named' % name)
    blocks = [b for s in t['segments'] for b in s['blocks'] if b['state'] == 'allocated']
    mt.check(blocks and all(b['line'].startswith('torch_double_train.py:') for b in blocks),
             '%s: each of %d allocated blocks has its Python line outside torch (%s)'
             % (name, len(blocks), sorted({b['line'] for b in blocks})[:4]))
    mt.eq(sum(b['size'] for b in blocks), t['torch_allocated_bytes'], '%s: the blocks add up' % name)
    weights = [b for b in blocks if 'make_weights' in b['line'] or ':48 ' in b['line']]
    exp = [s for s in t['segments'] if s['expandable']]
    if want_expandable:
        mt.check(exp and all(s['expandable'] for s in t['segments']) and max(len(s['driver']) for s in exp) > 1
                 and all(x['mapped'] for s in exp for x in s['driver']),
                 '%s: expandable segments, each backed by several driver mappings (%s)'
                 % (name, [len(s['driver']) for s in exp]))
    else:
        mt.check(not exp and all(len(s['driver']) == 1 and s['driver'][0]['size'] == s['size'] for s in t['segments']),
                 '%s: each torch segment is one driver allocation of its size' % name)
    return d


# --- 2.1+ form: figures, recovery and the OOM, the join ---
res, out, err = run('v23')
if res:
    snaps = {}
    f = mt.files(out)[0]
    for s in f.snapshots:
        if s.get('label', '').startswith('step '):
            snaps[int(s['label'].split()[1])] = s['devices'][0].get('torch')
    mt.eq(res['cuda_after_install'], False, 'v23: install() leaves CUDA uninitialised (history waits for torch)')
    got = [snaps.get(i + 1) for i in range(len(res['steps']))]
    want = [dict(w, step=i + 1) for i, w in enumerate(res['steps'])]
    mt.eq(got, want, 'v23: each step\'s devices[0].torch = torch\'s own counters at that step')
    # report, leaks and ranks tell tensors from cache and fragmentation
    first, last = want[0], want[-1]
    views = {}
    for cmd in ('report', 'leaks', 'ranks'):
        r = subprocess.run([MT, cmd, '--json', out], capture_output=True, text=True)
        d = json.loads(r.stdout) if r.returncode == 0 else {}
        p = (d.get('processes') or d.get('ranks') or [{}])[0]
        views[cmd] = p.get('torch')
    tf = views['report'][0] if views['report'] else {}
    mt.eq((tf.get('first', {}).get('allocated_bytes'), tf.get('last', {}).get('allocated_bytes'),
           tf.get('last', {}).get('reserved_bytes'), tf.get('last', {}).get('inactive_split_bytes')),
          (first['allocated_bytes'], last['allocated_bytes'], last['reserved_bytes'], last['inactive_split_bytes']),
          'report: torch\'s figures from the first step to the last')
    mt.check(views['leaks'] and views['ranks'] and views['leaks'][0]['last'] == views['ranks'][0]['last']
             and views['leaks'][0]['first']['step'] > 1,
             'leaks and ranks: the figures over the growth window (steps %s-%s)'
             % tuple(views['leaks'][0][k]['step'] for k in ('first', 'last')) if views['leaks'] else 'leaks: torch figures')
    r = subprocess.run([MT, 'report', out], capture_output=True, text=True)
    mt.check('PyTorch caching allocator, cuda:0 steps 1-6: tensors' in r.stdout, 'report: the line in words')
    oc = outcomes(out)
    mt.eq([(k, v['outcome'] if v else None) for k, v in sorted(oc.items())],
          [('oom1', 'recovered'), ('oom2', 'failed_again'), ('oom3', 'raised')],
          'v23: a recovery, then the retry that failed and the OOM torch raised')
    mt.check(oc['oom1']['frees'] >= 20 and oc['oom1']['freed_bytes'] >= 200 * MIB,
             'v23: the recovery came after the cache was released (%d frees, %d bytes)'
             % (oc['oom1']['frees'], oc['oom1']['freed_bytes']))
    mt.eq(res['oom']['pair_at_raise'], [oc['oom3']['torch_snapshot']],
          'v23: torch\'s snapshot beside the raised dump before OutOfMemoryError reached Python')
    mt.eq((oc['oom3']['by'], oc['oom3']['torch_size'], oc['oom3']['torch_limit_bytes']), ('torch', 2000 * MIB, 1 << 30),
          'v23: the observer\'s arguments (size, the device\'s total)')
    dev = f.final()['devices'][0]
    mt.eq((dev['ooms'], dev['recovered'], dev['raised'], dev['oom_recovered']), (3, 1, 1, False),
          'v23: the device counts 3 failures, 1 recovery, 1 raised; the last not recovered')
    joined('v23', out, res)
    r = subprocess.run([MT, 'oom', out], capture_output=True, text=True)
    for want in ('outcome: recovered', 'outcome: failed again', 'outcome: raised', '(reconciles to the byte)',
                 'NCCL', 'torch_double_train.py:'):
        mt.check(want in r.stdout, 'v23: memtally oom says %r' % want)

    # --- memtally torch: the whole device for PyTorch's viewers ---
    dump3 = [p for p in glob.glob(os.path.join(out, '*.oom3.jsonl'))][0]
    jr = json.loads(subprocess.run([MT, 'oom', '--json', '--top', '1000', dump3], capture_output=True,
                                   text=True).stdout)['dumps'][0]['torch']
    for fmt in ('2', '1.13'):
        pk = os.path.join(OUT, 'joined-%s.pickle' % fmt)
        r = subprocess.run([MT, 'torch', '--format', fmt, dump3, '-o', pk], capture_output=True, text=True)
        mt.eq(r.returncode, 0, 'torch --format %s: exit code (%s)' % (fmt, r.stderr[-200:]))
        chk = subprocess.run(['/usr/bin/python3', '-c', '''if 1:
            import json, pickle, sys
            from torch.cuda import _memory_viz as viz
            d = pickle.load(open(sys.argv[1], 'rb'))
            segs = d['segments'] if isinstance(d, dict) else d
            st = viz.stats(segs)
            lines = viz.segments(segs, format_flamegraph=lambda x: x).splitlines()
            outside = sorted(s['blocks'][0]['frames'][0]['name'] for s in segs
                             if s['blocks'] and s['blocks'][0]['frames'] and s['blocks'][0]['frames'][0]['filename'] == 'memtally')
            acts = sorted({e['action'] for t in d.get('device_traces', []) for e in t}) if isinstance(d, dict) else []
            print(json.dumps([len(segs), st['total_size'].value, sum(int(l.rsplit(' ', 1)[1]) for l in lines),
                              outside, acts]))''', pk], capture_output=True, text=True)
        try:
            n, total, folded, outside, acts = json.loads(chk.stdout)
        except ValueError:
            n = total = folded = outside = acts = None
            print('    ' + chk.stderr[-400:])
        mt.eq((n, total, folded), (len(jr['segments']) + 2, jr['driver_live_bytes'], jr['driver_live_bytes']),
              'torch --format %s: PyTorch 1.13\'s _memory_viz reads it: torch\'s segments and 2 outside, '
              'adding up to the driver\'s live bytes (stats and segments)' % fmt)
        mt.eq(outside, ['[outside PyTorch: NCCL]', '[outside PyTorch: other]'],
              'torch --format %s: the driver\'s allocations outside torch, named' % fmt)
        if fmt == '2':
            mt.check(acts and 'oom' in acts and 'alloc' in acts and 'segment_alloc' in acts,
                     'torch: torch\'s own device trace (%s)' % acts)
    # each block's history (1.13's _memory_viz reads a block's frames from
    # it): torch's active blocks one entry with the block's address, size
    # and the frames of the stack torch's snapshot gives it, inactive ones
    # none; a block outside torch the frames of its segment (owner first)
    tr = records(dump3[:-6] + '.torch.jsonl')
    tfr = {r['id']: {'filename': r['file'], 'line': r['line'], 'name': r['name']} for r in tr if r['type'] == 'tframe'}
    tst = {r['id']: [tfr[i] for i in r['frames']] for r in tr if r['type'] == 'tstack'}
    want = {int(r['address'], 16): [{'addr': int(r['address'], 16), 'real_size': r['size'],
                                     'frames': tst.get(r['stack'], [])}]
            for r in tr if r['type'] == 'tblock' and r['state'] != 'inactive'}
    for fmt in ('2', '1.13'):
        d = pickle.load(open(os.path.join(OUT, 'joined-%s.pickle' % fmt), 'rb'))
        got, outside = {}, []
        for s in (d['segments'] if isinstance(d, dict) else d):
            for b in s['blocks']:
                if s['frames'] and s['frames'][0]['filename'] == 'memtally':
                    outside.append(b.get('history') == [{'addr': b['address'], 'real_size': b['size'],
                                                         'frames': s['frames']}] and len(s['frames']) > 1)
                elif 'history' in b:
                    got[b['address']] = b['history']
        mt.check(want and got == want and all(any(f['filename'].endswith('torch_double_train.py') for f in h[0]['frames'])
                                              for h in got.values()),
                 'torch --format %s: %d of torch\'s blocks with history, each its address, size and frames '
                 'as torch\'s snapshot has them (%d expected)' % (fmt, len(got), len(want)))
        mt.check(len(outside) == 2 and all(outside),
                 'torch --format %s: the blocks outside torch: history with the segment\'s frames (%s)' % (fmt, outside))
    page = os.path.join(OUT, 'v23.html')
    r = subprocess.run([MT, 'html', out, '-o', page], capture_output=True, text=True)
    text = open(page).read() if r.returncode == 0 else ''
    mt.check('reconciles to the byte' in text and '<td>NCCL</td>' in text and 'torch_double_train.py:' in text,
             'html: the joined table')

    # a bad snapshot beside the dump: refused with its file and line
    bad = os.path.join(OUT, 'bad')
    os.makedirs(bad, exist_ok=True)
    import shutil
    shutil.copy(dump3, bad)
    tl = open(dump3[:-6] + '.torch.jsonl').read().split('\n')
    k = next(i for i, l in enumerate(tl) if '"type":"tblock"' in l)
    import re
    tl[k] = re.sub(r'"size":\d+', '"size":99999999999', tl[k], count=1)
    with open(os.path.join(bad, os.path.basename(dump3)[:-6] + '.torch.jsonl'), 'w') as fh:
        fh.write('\n'.join(tl))
    r = subprocess.run([MT, 'oom', bad], capture_output=True, text=True)
    mt.check(r.returncode == 1 and ('.torch.jsonl:%d: tblock' % (k + 1)) in r.stderr,
             'a block outside its segment: exit 1 naming the file and line (%s)' % r.stderr.strip()[-160:])

# --- an unmodified trainer under `memtally run`: the start-up hook installs
# memtally_cuda when torch is imported, its steps are the optimizer's ---
out = os.path.join(OUT, 'unmodified')
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'), FAKE_CUDA_MEM=str(1 << 30),
           PYTHONPATH=os.path.join(HERE, 'py', 'double'), TRAINER_UNMODIFIED='1', MEMTALLY_COMPRESS='0')
r = subprocess.run([MT, 'run', '--out', out, '--', '/usr/bin/python3', os.path.join(HERE, 'py', 'torch_double_train.py'),
                    'oom'], env=env, capture_output=True, text=True, timeout=120)
mt.eq(r.returncode, 0, 'unmodified: memtally run exit code (%s)' % r.stderr[-300:])
try:
    res = json.loads(r.stdout)
except ValueError:
    res = {}
if res:
    fin = mt.files(out)[0].final()
    mt.eq((fin.get('marks', {}).get('step'), fin['devices'][0].get('torch')),
          (6, dict(res['steps'][-1], step=6)),
          'unmodified: 6 optimizer steps marked, the last step\'s figures in the exit snapshot')
    oc = outcomes(out)
    mt.eq((sorted((k, v['outcome'] if v else None) for k, v in oc.items()), res['oom']['pair_at_raise']),
          ([('oom1', 'recovered'), ('oom2', 'failed_again'), ('oom3', 'raised')], [oc['oom3']['torch_snapshot']]),
          'unmodified: the outcomes, and the pair on disk before the raise, with no memtally code in the trainer')
    joined('unmodified', out, res)

# --- torch 2.0's form: blocks without addresses, frames in history ---
res, out, err = run('v20', version='2.0.1')
if res:
    mt.eq([(k, v['outcome'] if v else None) for k, v in sorted(outcomes(out).items())],
          [('oom1', 'recovered'), ('oom2', 'failed_again'), ('oom3', 'raised')], 'v20: outcomes')
    joined('v20', out, res)

# --- expandable segments: cuMemCreate + cuMemMap under torch's segments ---
# a growth makes every page's handle before mapping any: the retry's
# handles made before its failure are no recovery
res, out, err = run('expandable', conf='expandable_segments:True')
if res:
    mt.eq([(k, v['outcome'] if v else None) for k, v in sorted(outcomes(out).items())],
          [('oom1', 'failed_again'), ('oom2', 'raised')],
          'expandable: the first attempt failed again in its retry (handles made, none mapped), then raised')
    joined('expandable', out, res, want_expandable=True)

# --- PyTorch's own limit: no driver failure, a dump at the observer ---
res, out, err = run('fraction', mode='fraction')
if res:
    oc = outcomes(out)
    dumps = [p for p in glob.glob(os.path.join(out, '*.oom*.jsonl')) if not p.endswith('.torch.jsonl')]
    oom = [r for r in records(dumps[0]) if r['type'] == 'oom'][0] if dumps else {}
    mt.eq((len(dumps), oom.get('api'), oom.get('error'), oc.get('oom1', {}) and oc['oom1']['outcome']),
          (1, 'torch', 'torch_limit', 'raised'), 'fraction: one dump, written at the observer, raised')
    mt.eq(res['oom']['pair_at_raise'], [oc['oom1']['torch_snapshot']] if oc.get('oom1') else None,
          'fraction: torch\'s snapshot beside it before the raise')

# --- cudaMallocAsync: no history, no observer: said once, driver view kept ---
res, out, err = run('async', conf='backend:cudaMallocAsync')
if res:
    # said as the shim says its warnings (memtally_warn): one stderr line
    # under a bare LD_PRELOAD, one warning record in the process's file
    mt.eq(err.count('PYTORCH_CUDA_ALLOC_CONF backend:cudaMallocAsync'), 1,
          'async: one warning on stderr (%s)' % err.strip()[-200:])
    said = [r for p in glob.glob(os.path.join(out, '*.jsonl')) if '.oom' not in p
            for r in records(p) if r.get('type') == 'warning' and 'cudaMallocAsync' in r.get('message', '')]
    mt.eq(len(said), 1, 'async: one warning record in the file')
    mt.check(not glob.glob(os.path.join(out, '*.torch.jsonl')) and glob.glob(os.path.join(out, '*.oom1.jsonl')),
             'async: the driver\'s dumps, no torch snapshot')
# --- Debian's real torch 1.13 (CPU): installed, silent, CUDA never touched ---
r = subprocess.run(['/usr/bin/python3', '-c', '''if 1:
    import torch
    from _memtally import cuda as memtally_cuda
    ok = memtally_cuda.install(torch) and memtally_cuda.install(torch)
    for s in range(3):
        memtally_cuda.on_step(s)
    print(ok, torch.cuda.is_initialized(), torch.__version__)'''],
                   env=dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'),
                            MEMTALLY_OUT=os.path.join(OUT, 't113'),
                            PYTHONPATH=os.path.join(ROOT, 'scripts', 'python')),
                   capture_output=True, text=True, timeout=120)
mt.check(r.returncode == 0 and r.stdout.split()[:2] == ['True', 'False'] and 'memtally:' not in r.stderr,
         'torch %s: install twice, three steps: no warning, CUDA not initialised (%s %s)'
         % (r.stdout.split()[-1:] , r.stdout.strip(), r.stderr.strip()[-200:]))
mt.done()
