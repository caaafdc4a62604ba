"""Steps without code (issue 32): a PyTorch trainer that never imports
memtally (torch_steps.py), under `memtally run` with no options (Debian's
torch 1.13, CPU):
 - one optimizer, 800 steps, a 256 KiB tensor kept a step, DataLoader
   workers forked: the same losses and exit code as without memtally; the
   trainer's last "step" mark is 800, the steps it took; snapshots of
   reason "step" on the cadence (MEMTALLY_CADENCE), at the mark; `memtally leaks`,
   no option given, judges growth on a window of steps that ends at step
   800 and gives the leak's line at 256 KiB per step; both workers
   have the hook; no "memtally:" warning;
 - two optimizers stepped each iteration, and an optimizer whose step calls
   its parent class's (both classes hooked): one mark per iteration;
 - a program that marks "step" itself wins (the hook stops), and
   memtally.on_step callbacks see every step, a failing one reported once;
   modules named memtally_cuda and memtally_torch on PYTHONPATH are the
   program's, never run by the hook;
 - issue 45: a memtally.py (a command line requiring --logfile), a
   memtally_cuda.py raising SystemExit(6) beside a torch script: the same
   exit status and output as without memtally, steps marked;
 - issue 51: a SIGALRM handler's exception and a SIGTERM handler's
   sys.exit(3) landing in the hook's code (a step's snapshot and search)
   reach the program as without memtally (same exit status and output);
 - MEMTALLY_TORCH=0: no marks, no hook in the workers.
test_torch_children.py has the hook in spawned workers and torchrun ranks."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(HERE, 'torch_steps.py')
PY = '/usr/bin/python3'
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'PYTHONPATH'}
try:
    subprocess.run([PY, '-c', mt.FIND_TORCH], check=True, capture_output=True)
except subprocess.CalledProcessError:
    print('  FAIL python3-torch is not installed (scripts/setup-deps.sh installs it)')
    sys.exit(1)


def under(name, args, env=None):
    d = os.path.join(OUT, name)
    r = subprocess.run([MT, 'run', '--out', d, '--'] + args,
                       env=env or env0, capture_output=True, text=True, timeout=280)
    return r, d


def trainer(d, argv_tail):
    """The file of the process whose argv ends so and whose parent wrote no file."""
    fs = mt.files(d)
    pids = {f.header['pid'] for f in fs}
    t = [f for f in fs if f.header['argv'][-len(argv_tail):] == argv_tail and f.header['ppid'] not in pids]
    return t[0] if t else None, fs


def last_step(f):
    return f.final().get('marks', {}).get('step') if f and f.snapshots else None


def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith('memtally:') and 'new file' not in l]


def workers(stdout):
    return re.findall(r'worker \d+ (\w+)', stdout)


if mt.case('one'):
    plain = subprocess.run([PY, script, '800', 'one'], env=env0, capture_output=True, text=True, timeout=280)
    r, d = under('one', [PY, script, '800', 'one'])
    mt.eq(r.returncode, plain.returncode, 'exit code as without memtally (%s)' % r.stderr[-300:])
    losses = [l for l in r.stdout.splitlines() if l.startswith('steps ')]
    mt.eq(losses, [l for l in plain.stdout.splitlines() if l.startswith('steps ')],
          'the same steps and loss, to the last digit')
    mt.eq(warnings(r.stderr), [], 'no memtally: warning')
    mt.eq(workers(r.stdout), ['True', 'True'], 'both forked DataLoader workers have the hook')
    t, fs = trainer(d, [script, '800', 'one'])
    mt.eq(last_step(t), 800, 'the trainer\'s last "step" mark: the 800 optimizer steps taken')
    steps = [s.get('marks', {}).get('step') for s in t.snapshots if s['reason'] == 'step'] if t else []
    # the cadence (MEMTALLY_CADENCE): each of the first 64 steps, then every
    # 2nd for 64, every 4th for 64, ... (800 steps: 64 + 64 + 64 + 38)
    want = list(range(1, 65)) + list(range(66, 193, 2)) + list(range(196, 449, 4)) + list(range(456, 801, 8))
    mt.check(steps == want, 'snapshots of reason "step" on the cadence, at the mark (%d of them: %s ... %s)'
             % (len(steps), steps[:3], steps[-3:]))
    r2 = subprocess.run([MT, 'leaks', '--json', t.path], capture_output=True, text=True)
    p = json.loads(r2.stdout)['processes'][0] if r2.returncode == 0 else {}
    w = p.get('window') or {}
    mt.eq((p.get('step_mark'), w.get('by_step'), w.get('to_step')), ('step', True, 800),
          'leaks speaks in steps: its growth window is in steps and ends at step 800')
    top = (p.get('suspects') or [{}])[0]
    leak_line = [i + 1 for i, l in enumerate(open(script)) if 'kept.append(torch.ones' in l][0]
    where = [(os.path.basename(f.get('file') or ''), f.get('line')) for f in top.get('frames', []) if f.get('python')]
    mt.check(('torch_steps.py', leak_line) in where, 'the top suspect is the leak\'s line, torch_steps.py:%d (%s)'
             % (leak_line, top.get('where')))
    per = top.get('bytes_per_step') or 0
    mt.check(abs(per - 262144) <= 0.1 * 262144, 'growth per step %.0f bytes, the 256 KiB kept a step' % per)

if mt.case('two'):
    for mode in ('two', 'nested'):
        r, d = under(mode, [PY, script, '60', mode])
        t, _ = trainer(d, [script, '60', mode])
        mt.eq((r.returncode, last_step(t)), (0, 60), '%s: one mark per iteration: 60 after 60 (%s)'
              % ({'two': 'two optimizers (SGD, Adam)', 'nested': 'a step calling its parent class\'s step'}[mode],
                 r.stderr[-200:]))

if mt.case('user'):
    # modules of the hook's old names on PYTHONPATH (as if installed in
    # site-packages): the program's imports find them, the hook never
    # runs them
    cuda = os.path.join(OUT, 'cuda')
    os.makedirs(cuda, exist_ok=True)
    for name, code in (('memtally_cuda', 6), ('memtally_torch', 7)):
        with open(os.path.join(cuda, name + '.py'), 'w') as f:
            f.write('import sys\nWHO = "mine"\nif "torch" not in sys.modules:\n    raise SystemExit(%d)\n' % code)
    r, d = under('user', [PY, os.path.join(HERE, 'torch_user_steps.py')], dict(env0, PYTHONPATH=cuda))
    out = r.stdout.splitlines()
    want = [1, 2, 3, 4, 104, 105, 106, 107, 108]
    mt.eq(r.returncode, 0, 'exit code (%s)' % r.stderr[-300:])
    mt.eq(out[:2], ['seen %s' % want, 'hook 4'], 'the hook marked steps 1-4, then the program\'s own marks '
          'won; on_step saw both')
    mt.eq(out[2:], ['memtally_cuda mine', 'memtally_torch mine'],
          'the program\'s memtally_cuda and memtally_torch are its own, not the hook\'s')
    t, _ = trainer(d, [os.path.join(HERE, 'torch_user_steps.py')])
    mt.eq(last_step(t), 108, 'the file\'s last step: the program\'s')
    w = warnings(r.stderr)
    mt.check(len(w) == 1 and 'ZeroDivisionError' in w[0], 'its failing callback: one warning (%s)' % w)

if mt.case('shadow'):
    # issue 45: a memtally.py with a command line requiring --logfile and a
    # memtally_cuda.py raising SystemExit(6) beside a torch script (and a
    # memtally_torch.py raising SystemExit(7)): with and without memtally
    # run, the same exit status and output; the hook still marks the steps
    # (`make test`: the three together; MT_FULL=1 each alone too)
    sets = (('memtally.py',), ('memtally_cuda.py',)) if mt.full() else ()
    for files in sets + (('memtally.py', 'memtally_cuda.py', 'memtally_torch.py'),):
        app = os.path.join(OUT, 'app-' + '-'.join(f[:-3] for f in files))
        os.makedirs(app, exist_ok=True)
        src = {'memtally.py': 'import argparse\np = argparse.ArgumentParser()\n'
                              'p.add_argument("--logfile", required=True)\np.parse_args()\n',
               'memtally_cuda.py': 'raise SystemExit(6)\n', 'memtally_torch.py': 'raise SystemExit(7)\n'}
        for f in files:
            with open(os.path.join(app, f), 'w') as fh:
                fh.write(src[f])
        train = os.path.join(app, 'train.py')
        with open(train, 'w') as fh:
            fh.write('import sys, torch\nm = torch.nn.Linear(4, 2)\n'
                     'opt = torch.optim.SGD(m.parameters(), lr=0.1)\nfor i in range(5):\n'
                     '    opt.zero_grad(); m(torch.randn(2, 4)).sum().backward(); opt.step()\n'
                     'print("trained", sys.argv[1:])\nsys.stderr.write("err line\\n")\n')
        for argv in ([], ['--logfile', 'x']):
            plain = subprocess.run([PY, train] + argv, env=env0, capture_output=True, text=True, cwd=app, timeout=280)
            r, d = under('shadow-%s-%d' % (os.path.basename(app), len(argv)), [PY, train] + argv)
            mt.eq((r.returncode, r.stdout, warnings(r.stderr), [l for l in r.stderr.splitlines() if 'memtally' not in l]),
                  (plain.returncode, plain.stdout, [], [l for l in plain.stderr.splitlines() if 'memtally' not in l]),
                  '%s beside train.py %s: as without memtally (exit %d)' % (' and '.join(files), argv, plain.returncode))
            t, _ = trainer(d, [train] + argv)
            mt.eq(last_step(t), 5, '%s beside it %s: the hook still marks the 5 steps' % (' and '.join(files), argv))

# issue 51, 3: a signal handler's exception that lands while the hook's
# code runs (the step 2's snapshot and "why is it still alive" search,
# made long by the program's 400,000 lists) propagates unchanged: a
# SIGALRM deadline reaches the program's except, a SIGTERM handler's
# sys.exit(3) ends the program with 3; as without memtally
SIGNALS = r'''
import os, signal, sys, threading, time, torch
torch.manual_seed(0)
torch.set_num_threads(1)
mode = sys.argv[1]
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [[i] for i in range(400000)]


class Deadline(Exception):
    pass


def on_alarm(signum, frame):
    raise Deadline()


def on_term(signum, frame):
    sys.exit(3)


signal.signal(signal.SIGALRM, on_alarm)
signal.signal(signal.SIGTERM, on_term)
for i in range(4):
    print('step', i + 1, flush=True)
    if i == 1:  # 0.2 s into the second step
        if mode == 'term':
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        else:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
        t = time.monotonic()
        while i == 1 and time.monotonic() - t < 3:
            pass
        if i == 1:
            print('missed', flush=True)
    except Deadline:
        print('deadline', flush=True)
print('done', len(data))
'''

if mt.case('signals'):
    path = os.path.join(OUT, 'signals.py')
    with open(path, 'w') as f:
        f.write(SIGNALS)
    for mode in ('alarm', 'term'):
        plain = subprocess.run([PY, path, mode], env=env0, capture_output=True, text=True, timeout=280)
        r, d = under('signals-' + mode, [PY, path, mode])
        want = 'deadline' if mode == 'alarm' else 'exit 3'
        mt.check(('deadline' in plain.stdout.split() if mode == 'alarm' else plain.returncode == 3),
                 '%s: without memtally, %s (%d: %s)' % (mode, want, plain.returncode, plain.stdout.split()))
        mt.eq((r.returncode, r.stdout, warnings(r.stderr)), (plain.returncode, plain.stdout, []),
              '%s: the same exit status and output as without memtally, no warning' % mode)

if mt.case('off'):
    r, d = under('off', [PY, script, '30', 'one'], dict(env0, MEMTALLY_TORCH='0'))
    t, _ = trainer(d, [script, '30', 'one'])
    mt.eq((r.returncode, t is not None and 'marks' in t.final(), workers(r.stdout)), (0, False, ['False', 'False']),
          'MEMTALLY_TORCH=0: no marks, no hook in the workers')
mt.done()
