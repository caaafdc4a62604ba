"""README top to bottom: every `build/memtally` command in its code blocks
runs as written (with the user's program replaced by the demo's, and
README's own directory names kept), in order, and prints what the README
says it does.  A command the walk does not know fails the test, so a new
recipe comes with its check here; the next change that breaks a recipe
fails `make test`.

The programs: `python train.py` is scripts/demo_train.py (a leak at line
13, a 64 MiB spike at steps 10-15); `torchrun ... train.py` is the 2-rank
gloo job test/integration/torch_ddp.py with rank 1 leaking; the CUDA OOM
recipe's dump comes from the fake driver (test/fakecuda), as in `make
demo`, since this machine has no GPU.  `make demo` and `make test` are not
run here (this is part of the second)."""
import glob, json, os, re, shlex, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PY = '/usr/bin/python3'
env = dict(os.environ, PATH=os.path.join(OUT, 'bin') + ':' + os.environ['PATH'])
env.pop('MEMTALLY_OUT', None)
os.makedirs(os.path.join(OUT, 'bin'))
os.symlink(os.path.join(ROOT, 'build'), os.path.join(OUT, 'build'))  # commands start build/...
# `python` is Debian's
os.symlink(PY, os.path.join(OUT, 'bin', 'python'))
shutil.copy(os.path.join(ROOT, 'scripts', 'demo_train.py'), os.path.join(OUT, 'train.py'))


def readme_commands():
    """(line number, command) of each build/memtally line in README's code
    blocks, comments cut."""
    cmds, inside = [], False
    for n, line in enumerate(open(os.path.join(ROOT, 'README.md')), 1):
        if line.startswith('```'):
            inside = not inside
            continue
        if inside and line.startswith('build/memtally'):
            cmd = re.sub(r'\s+#.*$', '', line.rstrip('\n'))
            cmds.append((n, cmd))
    return cmds


def sh(cmd, **kw):
    return subprocess.run(['bash', '-c', cmd], cwd=OUT, env=env, capture_output=True, text=True,
                          timeout=kw.pop('timeout', 120), **kw)


# The train.py of the torchrun recipes: a directory of its own, so the
# host-leak recipe's train.py stays the demo's
ddp_dir = os.path.join(OUT, 'ddpjob')
os.makedirs(ddp_dir)
with open(os.path.join(ddp_dir, 'train.py'), 'w') as f:
    # test_torch's torch_ddp.py: rank 1 keeps each loss with its graph (400
    # steps: 4 step snapshots at the default MEMTALLY_STEPS)
    f.write(open(os.path.join(ROOT, 'test', 'integration', 'torch_ddp.py')).read()
             .replace("int(sys.argv[1]) if len(sys.argv) > 1 else -1", '1'))


def before(cmd):
    """What the walk prepares for a command (a program README assumes)."""
    if cmd.startswith('build/memtally diff before after'):
        for d, n in (('before', 100), ('after', 200)):
            sh('build/memtally run --out %s -- build/demo_trainer %d' % (d, n))
    if 'torch oom/' in cmd or cmd.startswith('build/memtally oom oom'):
        if not glob.glob(os.path.join(OUT, 'oom', '*.oom*.jsonl')):
            r = subprocess.run([os.path.join(B, 'memtally'), 'run', '--append', '--out', os.path.join(OUT, 'oom'),
                                '--', os.path.join(B, 'test', 'cuda_prog'), 'rt', 'oom', os.path.join(OUT, 'oom')],
                               env=dict(env, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'),
                                        FAKE_CUDA_MEM='1073741824'), capture_output=True, text=True, timeout=60)
            mt.check(glob.glob(os.path.join(OUT, 'oom', '*.oom*.jsonl')), 'the fake driver\'s OOM dump for the '
                     'CUDA OOM recipe: %r' % r.stderr[-200:])


def rewrite(cmd):
    """The command as run here: README's, with what needs a GPU or names a
    file by pattern made concrete."""
    if 'torchrun' in cmd:
        if '--nproc_per_node 8' in cmd:
            return None  # the CUDA OOM recipe's job needs 8 GPUs: its dump is the fake driver's
        return cmd.replace(' train.py', ' ddpjob/train.py')
    if 'oom/memtally.*.r5.*.oom1.jsonl' in cmd:
        dump = sorted(glob.glob(os.path.join(OUT, 'oom', '*.oom1.jsonl')))
        return cmd.replace('oom/memtally.*.r5.*.oom1.jsonl', dump[0] if dump else 'MISSING')
    if 'FILE.jsonl.zst@' in cmd:
        f = [p for p in mt.jsonl(os.path.join(OUT, 'run')) if '.oom' not in p][0]
        seqs = [json.loads(l)['seq'] for l in subprocess.run([os.path.join(B, 'memtally'), 'cat', f],
                capture_output=True, text=True).stdout.splitlines() if l.startswith('{"type":"snapshot"')]
        m = re.search(r'FILE\.jsonl\.zst@(\d+)', cmd)
        n = m.group(1) if m and int(m.group(1)) in seqs else str(seqs[len(seqs) // 2])
        return re.sub(r'run/FILE\.jsonl\.zst@\d+', f + '@' + n, cmd).replace('run/FILE.jsonl.zst', f)
    return cmd


# What each command must print (stdout + stderr), by its first words
EXPECT = [
    ('build/memtally run --out run -- python train.py', lambda r: 'new file' in r),
    ('build/memtally run -- python train.py', lambda r: 'memtally-out' in r),
    ('build/memtally report memtally-out', lambda r: 'at the peak' in r and 'train.py' in r),
    ('build/memtally leaks memtally-out', lambda r: 'train.py:13' in r),
    ('build/memtally leaks run', lambda r: re.search(r'^\s+1 .*train\.py:13', r, re.M)),
    ('build/memtally report --stacks run', lambda r: 'at the peak' in r and 'train.py' in r),
    ('build/memtally html run -o run.html', lambda r: os.path.getsize(os.path.join(OUT, 'run.html')) > 10000),
    ('build/memtally run --out oom', lambda r: True),
    ('build/memtally oom oom', lambda r: 'out of memory' in r.lower() or 'oom' in r.lower()),
    ('build/memtally torch', lambda r: os.path.getsize(os.path.join(OUT, 'rank5.pickle')) > 0),
    ('build/memtally run --out ddp -- torchrun', lambda r: 'ddp done' in r and '3 new files' in r),
    ('build/memtally ranks ddp', lambda r: re.search(r'r1 .*outlier', r)),
    ('build/memtally diff before after', lambda r: re.search(r'^\s+\S+ \S+\s+\S+ \S+\s+\S+ \S+\s+- heap\s+keep_loss_history', r, re.M)),
    ('build/memtally diff run/', lambda r: '== A:' in r and 'B:' in r),
    ('build/memtally flame run -o live.svg', lambda r: open(os.path.join(OUT, 'live.svg')).read().startswith('<?xml')),
    ('build/memtally pprof run -o heap.pb.gz', lambda r: 'train.py' in r or 'bytearray' in r or 'flat' in r),
    ('build/memtally cat run | jq', lambda r: re.match(r'\d+\n', r)),
]

seen = set()
for n, cmd in readme_commands():
    before(cmd)
    run = rewrite(cmd)
    want = [e for e in EXPECT if cmd.startswith(e[0])]
    if run is None:
        print('  --   README:%d %s (needs GPUs; its output is checked on the fake driver\'s dump)' % (n, cmd))
        continue
    if not want:
        mt.check(False, 'README:%d %r: the walk knows this command (add its check to EXPECT)' % (n, cmd))
        continue
    r = sh(run, timeout=240)
    text = r.stdout + r.stderr
    ok = r.returncode == 0
    try:
        ok = ok and bool(want[0][1](text))
    except (OSError, ValueError) as e:
        ok = False
        text += repr(e)
    seen.add(want[0][0])
    mt.check(ok, 'README:%d %s: exit %d, prints what README says%s'
             % (n, cmd, r.returncode, '' if ok else ': ' + text[-600:]))
# top on the torchrun job opens on the busiest rank, not the launcher
if os.path.isdir(os.path.join(OUT, 'ddp')):
    r = sh('build/memtally top --once ddp')
    sel = [l for l in r.stdout.splitlines() if l.startswith('> ')]
    mt.check(len(sel) == 1 and ' r1 ' in sel[0], 'top --once ddp opens on rank 1 (the busiest): %r' % sel)
mt.check(len(seen) >= 12, 'the walk ran README\'s recipes (%d commands)' % len(seen))
mt.done()
