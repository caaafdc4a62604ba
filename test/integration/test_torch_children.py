"""The PyTorch hook beyond the first process (issue 32; test_torch_steps.py
has the trainer itself), under `memtally run`:
 - DataLoader workers started by spawn get the hook through PYTHONPATH;
 - torchrun, 2 ranks: each rank's file counts its 400 steps (MT_FULL=1; make
   test: test_answers_torch's ddp case checks it of the same job)."""
import os, re, subprocess, sys
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
    return [l.split()[2] for l in stdout.splitlines() if l.startswith('worker ')]


if mt.case('spawn'):
    r, d = under('spawn', [PY, script, '40', 'spawn'])
    mt.eq(r.returncode, 0, 'spawn: exit code (%s)' % r.stderr[-300:])
    mt.eq(workers(r.stdout), ['True', 'True'], 'DataLoader workers started by spawn have the hook')
    t, fs = trainer(d, [script, '40', 'spawn'])
    mt.eq(last_step(t), 40, 'the trainer counts its 40 steps')
    mt.check(len(fs) >= 3, 'the workers wrote files of their own (%d files)' % len(fs))

# make test: test_answers_torch's ddp case runs the same job (rank 1
# leaking) and checks each rank's last step mark
if mt.full() and mt.case('torchrun'):
    r, d = under('ddp', ['torchrun', '--nproc_per_node', '2', '--redirects', '1', '--tee', '1',
                         '--master_port', str(mt.free_port()), os.path.join(HERE, 'torch_ddp.py'), '-1'])
    mt.eq(r.returncode, 0, 'torchrun, 2 ranks: exit code (%s)' % r.stderr[-300:])
    ranks = {f.header['rank']: last_step(f) for f in mt.files(d) if f.header.get('rank') is not None}
    mt.eq(ranks, {0: 400, 1: 400}, 'each rank\'s file counts its 400 steps')

if mt.case('workerleak'):
    # issue 53: report's line for the DataLoader workers names their
    # growth (which grow, by how much, the line); without the leak it
    # names none
    src = os.path.join(HERE, 'py', 'torch_workerleak.py')
    line = [i + 1 for i, l in enumerate(open(src)) if l.rstrip().endswith('# LEAK')][0]
    for variant in ('leak', 'fixed'):
        d = os.path.join(OUT, 'workers_' + variant)
        r = subprocess.run([MT, 'run', '--out', d, '--interval', '0.25', '--', PY, src, variant],
                           env=env0, capture_output=True, text=True, timeout=280)
        mt.eq(r.returncode, 0, 'workerleak %s: exit code (%s)' % (variant, r.stderr[-300:]))
        rep = subprocess.run([MT, 'report', d], capture_output=True, text=True).stdout
        wl = [l for l in rep.splitlines() if 'DataLoader workers' in l]
        mt.check(len(wl) == 1, 'workerleak %s: one summary line for the workers (%s)' % (variant, wl))
        if variant == 'leak':
            mt.check(wl and re.search(r'; all 2 grow \(pids \d+, \d+\): [\d.]+ MiB(-[\d.]+ MiB)? over their '
                                      r'windows, at torch_workerleak\.py:%d ' % line, wl[0]),
                     'workerleak: the line names both workers, their growth and the line: %s' % wl)
        else:
            mt.check(wl and 'grow' not in wl[0], 'workerleak fixed: no growth named: %s' % wl)

mt.done()
