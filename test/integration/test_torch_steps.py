"""Steps without code (issue 32): a PyTorch trainer that never imports
memtally (torch_steps.py), under `memtally run` with no options (Debian's
torch 1.13, CPU):
 - one optimizer, 800 steps, a 256 KiB tensor kept a step, DataLoader
   workers forked: the same losses and exit code as without memtally; the
   trainer's last "step" mark is 800, the steps it took; a snapshot of
   reason "step" at each 100 (MEMTALLY_STEPS' default); `memtally leaks`,
   no option given, judges growth on a window of steps that ends at step
   800 and gives the leak's line at 256 KiB per step; both workers
   have the hook; no "memtally:" warning;
 - two optimizers stepped each iteration, and an optimizer whose step calls
   its parent class's (both classes hooked): one mark per iteration;
 - a program that marks "step" itself wins (the hook stops), and
   memtally.on_step callbacks see every step; issue 35's memtally_cuda (a
   stand-in on PYTHONPATH) is installed with torch, its failing callback is
   reported once, and a memtally_cuda that fails to import is reported once
   while the program runs on;
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
    subprocess.run([PY, '-c', 'import torch'], check=True, capture_output=True)
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
    mt.eq(warnings(r.stderr), [], 'no memtally: warning (memtally_cuda absent: silent)')
    mt.eq(workers(r.stdout), ['True', 'True'], 'both forked DataLoader workers have the hook')
    t, fs = trainer(d, [script, '800', 'one'])
    mt.eq(last_step(t), 800, 'the trainer\'s last "step" mark: the 800 optimizer steps taken')
    steps = [s.get('marks', {}).get('step') for s in t.snapshots if s['reason'] == 'step'] if t else []
    mt.check(1 <= len(steps) <= 8 and all(s is not None and s >= 100 * (i + 1) for i, s in enumerate(steps)),
             'snapshots of reason "step", one at or after each 100 steps: %s' % steps)
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
        r, d = under(mode, [PY, script, '150', mode])
        t, _ = trainer(d, [script, '150', mode])
        mt.eq((r.returncode, last_step(t)), (0, 150), '%s: one mark per iteration: 150 after 150 (%s)'
              % ({'two': 'two optimizers (SGD, Adam)', 'nested': 'a step calling its parent class\'s step'}[mode],
                 r.stderr[-200:]))

if mt.case('user'):
    cuda = os.path.join(OUT, 'cuda')
    os.makedirs(cuda, exist_ok=True)
    with open(os.path.join(cuda, 'memtally_cuda.py'), 'w') as f:
        f.write('import atexit, sys, memtally\nseen = []\n'
                'def install(torch):\n'
                '    sys.stderr.write("stand-in installed with torch %s\\n" % torch.__version__)\n'
                '    memtally.on_step(seen.append)\n'
                '    memtally.on_step(lambda step: 1 / 0)\n'
                '    atexit.register(lambda: print("cuda saw %s" % seen))\n')
    # the stand-in goes before the hook's own folder, which holds the real
    # memtally_cuda (issue 35): memtally run leaves a PYTHONPATH that names
    # that folder as it is
    cuda_path = cuda + ':' + os.path.realpath(os.path.join(HERE, '..', '..', 'scripts', 'python'))
    r, d = under('user', [PY, os.path.join(HERE, 'torch_user_steps.py')], dict(env0, PYTHONPATH=cuda_path))
    out = r.stdout.splitlines()
    want = [1, 2, 3, 4, 104, 105, 106, 107, 108]
    mt.eq(r.returncode, 0, 'exit code (%s)' % r.stderr[-300:])
    mt.eq(out[:2], ['seen %s' % want, 'hook 4'], 'the hook marked steps 1-4, then the program\'s own marks '
          'won; on_step saw both')
    t, _ = trainer(d, [os.path.join(HERE, 'torch_user_steps.py')])
    mt.eq(last_step(t), 108, 'the file\'s last step: the program\'s')
    mt.check('stand-in installed with torch' in r.stderr, 'memtally_cuda.install(torch) ran')
    mt.eq(out[2:], ['cuda saw %s' % want], 'its on_step callback saw every step')
    w = warnings(r.stderr)
    mt.check(len(w) == 1 and 'ZeroDivisionError' in w[0], 'its failing callback: one warning (%s)' % w)
    with open(os.path.join(cuda, 'memtally_cuda.py'), 'w') as f:
        f.write('raise RuntimeError("broken stand-in")\n')
    r, d = under('user2', [PY, os.path.join(HERE, 'torch_user_steps.py')], dict(env0, PYTHONPATH=cuda_path))
    w = warnings(r.stderr)
    mt.check(r.returncode == 0 and r.stdout.startswith('seen %s' % want) and len(w) == 1 and 'broken stand-in' in w[0],
             'a memtally_cuda that fails to import: one warning, the program runs (%s)' % w)

if mt.case('off'):
    r, d = under('off', [PY, script, '30', 'one'], dict(env0, MEMTALLY_TORCH='0'))
    t, _ = trainer(d, [script, '30', 'one'])
    mt.eq((r.returncode, t is not None and 'marks' in t.final(), workers(r.stdout)), (0, False, ['False', 'False']),
          'MEMTALLY_TORCH=0: no marks, no hook in the workers')
mt.done()
