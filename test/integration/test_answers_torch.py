"""One answer in every view, on PyTorch (test_answers has the C program and
the checks): programs with known truths, run under
`memtally run` with no options, and every view asked with no options.

  torch:  train_truths.py: PyTorch on CPU with a DataLoader (2 workers);
          leak A keeps every loss's graph (line FORWARD's activations, and
          the batches the graph holds), leak B keeps every batch (line
          CACHE, 64 KiB a step), a 32 MiB spike at line SPIKE at step 30;
          its steps are marked by memtally's start-up hook, no code.
  ddp:    torch_ddp.py under torchrun, 2 ranks, rank 1 leaking.

Checks: report's rows at the growth window's end and leaks' first rows name
both leak lines;
report names the spike with its size and step (exact: 32 MiB with 4
threads); top, functions, diff, flame and pprof agree with report at the
peak; ranks flags the leaking rank."""
import json, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))


from views import sh, line_of, main_proc, check_views


# ---- PyTorch on CPU, a DataLoader with 2 workers, unmodified ----
if mt.case('torch'):
    d = os.path.join(OUT, 'torch')
    src = os.path.join(HERE, 'train_truths.py')
    r = sh(MT, 'run', '--out', d, '--', '/usr/bin/python3', src, timeout=600)
    mt.eq(r.returncode, 0, 'torch: exit code (%s)' % r.stderr[-300:])
    mt.check('600 steps done' in r.stdout, 'torch: the trainer ran its 600 steps')
    procs = json.loads(sh(MT, 'report', '--json', d).stdout)['processes']
    mt.eq(len(procs), 3, 'torch: the trainer and its 2 DataLoader workers wrote files')
    lk = json.loads(sh(MT, 'leaks', '--json', d).stdout)['processes']
    t = max(lk, key=lambda p: p['snapshots_used'])
    mt.check(t['step_mark'] == 'step' and t['window']['by_step'],
             'torch leaks: the window is counted in the optimizer steps the hook marked: %s' % t['window'])
    check_views('torch', d, src, 'train_truths.py:%d' % line_of(src, '# FORWARD'),
                'train_truths.py:%d' % line_of(src, '# CACHE'),
                'train_truths.py:%d ' % line_of(src, '# SPIKE'), 32 << 20, 30)

# ---- 2 ranks under torchrun, rank 1 leaking, no options anywhere ----
if mt.case('ddp'):
    d = os.path.join(OUT, 'ddp')
    # Debian's torchrun 1.13 under Python 3.11 needs --redirects 1 --tee 1
    # (its own argument handling fails before starting workers otherwise)
    r = sh(MT, 'run', '--out', d, '--', 'torchrun', '--nproc_per_node', '2', '--redirects', '1', '--tee', '1',
           '--master_port', str(mt.free_port()), os.path.join(HERE, 'torch_ddp.py'), '1', timeout=600)
    mt.eq(r.returncode, 0, 'ddp: exit code (%s)' % r.stderr[-300:])
    mt.check(re.search(r'memtally: 3 new files in \S+; see: memtally report', r.stderr) is not None,
             'ddp: one line says where the files are and what shows them')
    names = sorted(os.path.basename(p).split('.')[2] for p in mt.jsonl(d))
    mt.eq([n for n in names if n.startswith('r')], ['r0', 'r1'], 'ddp: each rank\'s file is named by its rank')
    # the start-up hook in each rank (torchrun's children): 400 steps marked
    marks = {f.header['rank']: f.final().get('marks', {}).get('step') for f in mt.files(d)
             if f.header.get('rank') is not None and f.snapshots}
    mt.eq(marks, {0: 400, 1: 400}, 'ddp: each rank\'s file counts its 400 steps (the hook in torchrun\'s ranks)')
    rj = json.loads(sh(MT, 'ranks', '--json', d).stdout)
    mt.eq(rj['outliers'], [1], 'ddp ranks: the leaking rank 1, and only it, with no options')
    steps = {k['rank']: (k['window_steps'], k['window_steps_to']) for k in rj['ranks']}
    mt.check(len(set(steps.values())) == 1 and None not in steps[0],
             'ddp ranks: both ranks measured on the same steps: %s' % steps)
    r = sh(MT, 'ranks', d)
    mt.check(re.search(r'r1 .*<< outlier: growth', r.stdout) is not None, 'ddp ranks text: rank 1 marked: %r' % r.stdout[-400:])

# ---- the fragmentation verdict, over 5 identical runs (issue 53) ----
CONV = '''import torch
import torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3),
                      nn.Flatten(), nn.Linear(8 * 12 * 12, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
kept = []
for i in range(80):
    x, y = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    kept.append(out.detach()[:4].clone())  # LEAK
    kept.append(torch.randn(8192))
'''
if mt.case('frag'):
    path = os.path.join(OUT, 'conv.py')
    with open(path, 'w') as f:
        f.write(CONV)
    got = []
    runs = 5 if mt.full() else 2  # make check: 5
    for i in range(runs):
        d = os.path.join(OUT, 'conv%d' % i)
        r = sh(MT, 'run', '--out', d, '--', '/usr/bin/python3', path, timeout=300)
        mt.eq(r.returncode, 0, 'frag run %d: exit code (%s)' % (i, r.stderr[-300:]))
        p = json.loads(sh(MT, 'leaks', '--json', d).stdout)['processes'][0]
        t = sh(MT, 'leaks', d).stdout
        note = 'fragmentation)' in t
        mt.check(p.get('fragmentation') is note, 'frag run %d: the note is printed iff the verdict is '
                 'true (%s, %s)' % (i, p.get('fragmentation'), note))
        a, h = p.get('allocator_bytes_per_hour'), p.get('heap_bytes_per_hour')
        got.append((p.get('fragmentation'), a and h and round(a / h, 2)))
    mt.check(len(set(v for v, _ in got)) == 1 and got[0][0] is not None,
             'frag: %d identical runs give the same verdict (verdict, footprint/heap growth): %s'
             % (runs, got))

mt.done()
