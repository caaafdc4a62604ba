"""The Python start-up hook (scripts/python/sitecustomize.py, doc/python.md)
without torch: `memtally run` puts its directory first on PYTHONPATH
(keeping the user's entries, once), and then
 - a program that never imports torch runs as it did: the same output and
   exit code, the same modules loaded, and nothing in sys.meta_path but
   the hook's finder;
 - the sitecustomize the hook shadows runs, once: Debian's, or the user's
   from PYTHONPATH, whose exception site.py would print is printed the same
   way; the hook twice on the path, or sitecustomize reloaded, runs nothing
   twice;
 - python -I and -E ignore PYTHONPATH and -S skips site: no hook (Debian's
   sitecustomize, or none); -s changes nothing;
 - MEMTALLY_TORCH=0: `memtally run` leaves PYTHONPATH alone, and with the
   directory on PYTHONPATH by hand the hook only runs the shadowed one;
 - an installed tree (make install) finds its own copy;
 - torch >= 2.0's global optimizer step post-hook, on a double of torch's
   step machinery (py/torch2): one mark per step, per iteration with two
   optimizers, once for a step calling its parent class's;
 - the hook's own warnings (a torch without torch.optim) are the shim's
   (memtally_warn): a record in the file that `memtally run` prints once
   at the end, nothing on the program's stderr; under a bare LD_PRELOAD
   one line, none with MEMTALLY_QUIET=1."""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
HOOK = os.path.join(ROOT, 'scripts', 'python')
PY = '/usr/bin/python3'
env0 = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'MEMTALLY_TORCH')}

# What a process shows of the hook: its sitecustomize, whether memtally's
# finder is in sys.meta_path, its state, and the modules it has loaded.
PROBE = r'''
import json, sys
site = sys.modules.get('sitecustomize')
print(json.dumps({
    'site': getattr(site, '__file__', None),
    'finders': [type(f).__name__ for f in sys.meta_path if 'Memtally' in type(f).__name__],
    'state': getattr(site, '_memtally_state', None),
    'modules': sorted(sys.modules),
    'path': sys.path[1:4],
}))
'''


runs = [0]


def run(args, env=None, under=True, out=None):
    """args, under `memtally run` into a new directory (or out)."""
    e = dict(env0 if env is None else env)
    runs[0] += 1
    d = os.path.join(OUT, out or 'run%d' % runs[0])
    cmd = ([MT, 'run', '--out', d, '--'] if under else []) + args
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=120)


def probe(flags=(), env=None, under=True):
    r = run([PY] + list(flags) + ['-c', PROBE], env, under)
    try:
        return json.loads(r.stdout.splitlines()[-1])
    except (ValueError, IndexError):
        print(r.stdout, r.stderr)
        return {}


def run_lines(stderr):
    """stderr without the lines `memtally run` ends with (its files, the
    warnings in them)."""
    return [l for l in stderr.splitlines()
            if not l.startswith('memtally: ') or ('new file' not in l and 'warning from' not in l)]


if mt.case('plain'):
    prog = ('import sys, json\nprint("out", sum(range(10)))\nsys.stderr.write("err\\n")\n'
            'print(json.dumps(sorted(sys.modules)))\nsys.exit(3)\n')
    a = run([PY, '-c', prog], under=False)
    b = run([PY, '-c', prog])
    mt.eq((b.returncode, b.stdout.splitlines()[0], run_lines(b.stderr)),
          (a.returncode, a.stdout.splitlines()[0], run_lines(a.stderr)),
          'python -c without torch: the same exit code (3), output and errors')
    ma, mb = set(json.loads(a.stdout.splitlines()[1])), set(json.loads(b.stdout.splitlines()[1]))
    mt.eq(sorted(mb ^ ma), [], 'the same modules loaded (the hook imports nothing)')
    p = probe()
    mt.eq(p.get('site'), os.path.join(HOOK, 'sitecustomize.py'), 'the hook is the sitecustomize')
    mt.eq(p.get('finders'), ['_MemtallyTorchFinder'], 'one finder waits for torch')
    mt.eq((p.get('state') or {}).get('chained'), '/usr/lib/python3.11/sitecustomize.py',
          "Debian's sitecustomize, which it shadows, ran")
    mt.check(not [m for m in p.get('modules', []) if 'memtally' in m],
             'none of the hook\'s modules is loaded before torch (%s)' % [m for m in p.get('modules', []) if 'memtally' in m])
    mt.eq(p.get('path', [None])[0], HOOK, 'its directory is first on sys.path after the script\'s')

if mt.case('flags'):
    for flags, want in ((['-I'], '/usr/lib/python3.11/sitecustomize.py'),
                        (['-E'], '/usr/lib/python3.11/sitecustomize.py'), (['-S'], None)):
        p = probe(flags)
        mt.eq((p.get('site'), p.get('finders'), p.get('state')), (want, [], None),
              'python %s: no hook (%s)' % (' '.join(flags), 'site skipped' if want is None
                                           else 'PYTHONPATH ignored; Debian\'s sitecustomize runs'))
    p = probe(['-s'])
    mt.eq(p.get('finders'), ['_MemtallyTorchFinder'], 'python -s: the hook runs')

user = os.path.join(OUT, 'user')
os.makedirs(user, exist_ok=True)
with open(os.path.join(user, 'sitecustomize.py'), 'w') as f:
    f.write('import os, sys\nsys.stderr.write("user sitecustomize ran\\n")\n'
            'fails = os.environ.get("USER_SITE_FAILS")\n'
            'if fails == "zero":\n    1 / 0\n'
            'if fails == "missing":\n    import no_such_module_here\n'
            'if fails == "self":\n    raise ImportError("as if absent", name="sitecustomize")\n')

if mt.case('user'):
    env = dict(env0, PYTHONPATH=user)
    r = run([PY, '-c', PROBE], env)
    p = json.loads(r.stdout)
    mt.eq(r.stderr.count('user sitecustomize ran'), 1, 'the user\'s sitecustomize on PYTHONPATH ran, once')
    mt.eq((p['state'] or {}).get('chained'), os.path.join(user, 'sitecustomize.py'), 'chained: the user\'s')
    mt.eq(p['path'][:2], [HOOK, user], 'PYTHONPATH: the hook first, the user\'s entries kept')
    mt.eq(p['finders'], ['_MemtallyTorchFinder'], 'and the hook is in place')
    for fails in ('zero', 'missing', 'self'):
        env['USER_SITE_FAILS'] = fails
        a = run([PY, '-c', 'print("main ran")'], env, under=False)
        b = run([PY, '-c', 'print("main ran")'], env)
        mt.eq((b.returncode, b.stdout, run_lines(b.stderr)), (a.returncode, a.stdout, run_lines(a.stderr)),
              'a failing user sitecustomize (%s): reported as site.py reports it (%r), the program runs'
              % (fails, run_lines(a.stderr)[-1:]))
    del env['USER_SITE_FAILS']
    # twice: the hook's directory twice, and a copy of it further on
    copy = os.path.join(OUT, 'copy')
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(HOOK, copy, ignore=shutil.ignore_patterns('__pycache__'))
    env = dict(env0, PYTHONPATH=':'.join([HOOK, copy, HOOK, user]))
    r = run([PY, '-c', PROBE + 'import importlib, sitecustomize; importlib.reload(sitecustomize)\n'
             'print(sum("Memtally" in type(f).__name__ for f in sys.meta_path))'], env)
    lines = r.stdout.splitlines()
    mt.eq((r.stderr.count('user sitecustomize ran'), json.loads(lines[0])['finders'], lines[-1]),
          (1, ['_MemtallyTorchFinder'], '1'),
          'the hook twice on the path, a copy, and a reload: the user\'s ran once, one finder')

if mt.case('off'):
    p = probe(env=dict(env0, MEMTALLY_TORCH='0'))
    mt.eq((p.get('site'), p.get('finders')), ('/usr/lib/python3.11/sitecustomize.py', []),
          'MEMTALLY_TORCH=0: memtally run leaves PYTHONPATH alone')
    p = probe(env=dict(env0, MEMTALLY_TORCH='off', PYTHONPATH=HOOK + ':' + user), under=False)
    mt.eq((p.get('finders'), (p.get('state') or {}).get('chained'), (p.get('state') or {}).get('enabled')),
          ([], os.path.join(user, 'sitecustomize.py'), False),
          'MEMTALLY_TORCH=off, the hook on PYTHONPATH by hand: only the user\'s sitecustomize runs')
    p = probe(env=dict(env0, PYTHONPATH=HOOK), under=False)
    mt.eq(p.get('finders'), ['_MemtallyTorchFinder'], 'PYTHONPATH by hand (bare LD_PRELOAD users): on')

if mt.case('nested'):
    env = dict(env0, PYTHONPATH=user)
    r = run([MT, 'run', '--out', os.path.join(OUT, 'inner'), '--', PY, '-c',
             'import os; print(os.environ["PYTHONPATH"])'], env)
    mt.eq(r.stdout.strip(), HOOK + ':' + user, 'memtally run inside memtally run: the hook once on PYTHONPATH')

if mt.case('torch2'):
    # torch >= 2.0's global step post-hook, on a double of its optimizer
    # step machinery (py/torch2/torch/optim/optimizer.py)
    prog = r'''
import json, sys, torch
from torch.optim import SGD
class Outer(SGD):
    def step(self, closure=None):
        return super().step(closure)
mode = sys.argv[1]
a, b = SGD([1]), SGD([2])
if mode == 'one':
    for i in range(6): a.step()
elif mode == 'two':
    for i in range(5): a.step(); b.step()
elif mode == 'nested':
    o = Outer([3])
    for i in range(4): o.step()
print(json.dumps(sys.modules['_memtally.steps'].state()))
'''
    env = dict(env0, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'py', 'torch2'))
    for mode, want in (('one', 6), ('two', 5), ('nested', 4)):
        d = 'torch2-' + mode
        r = run([PY, '-c', prog, mode], env, out=d)
        st = json.loads(r.stdout) if r.returncode == 0 else {}
        fs = mt.files(os.path.join(OUT, d))
        marks = fs[0].final().get('marks', {}) if fs else {}
        mt.eq((st.get('method'), st.get('steps'), marks.get('step')), ('post-hook', want, want),
              'torch 2 (a double): the global post-hook, %s: %d marks (%s)' % (mode, want, r.stderr[-200:]))

def old_pythons():
    """Python 2.7 and 3.6-3.9 interpreters on this machine (PATH, pyenv)."""
    found = {}
    for v in ('2.7', '3.6', '3.7', '3.8', '3.9'):
        cands = [shutil.which('python' + v)]
        root = os.path.expanduser('~/.pyenv/versions')
        if os.path.isdir(root):
            cands += [os.path.join(root, d, 'bin', 'python' + v) for d in sorted(os.listdir(root))
                      if d.startswith(v + '.')]
        for c in cands:
            if c and os.access(c, os.X_OK) and not c.startswith('/root/.pyenv/shims'):
                found[v] = c
                break
    return found


if mt.case('warn'):
    broken = os.path.join(OUT, 'broken')
    os.makedirs(os.path.join(broken, 'torch'), exist_ok=True)
    with open(os.path.join(broken, 'torch', '__init__.py'), 'w') as f:
        f.write('__version__ = "0.bad"\n')  # no torch.optim: the hook cannot hook steps
    prog = 'import sys, torch\nprint("ok")\nsys.stderr.write("err\\n")\n'
    env = dict(env0, PYTHONPATH=broken)
    a = run([PY, '-c', prog], env, under=False)
    b = run([PY, '-c', prog], env, out='warn')
    want = 'cannot hook optimizer steps in torch 0.bad'
    mt.eq((b.returncode, b.stdout, run_lines(b.stderr)), (a.returncode, a.stdout, run_lines(a.stderr)),
          'a hook warning: the program\'s output and stderr as without memtally (%r)' % b.stderr[-300:])
    mt.check(('memtally: warning from 1 process: ' + want) in b.stderr,
             'memtally run prints it at the end (%r)' % b.stderr[-300:])
    fs = mt.files(os.path.join(OUT, 'warn'))
    mt.check(len(fs) == 1 and [w for w in fs[0].warnings if w.startswith(want)],
             'and it is in the file, a warning record (%s)' % (fs[0].warnings if fs else None))
    shim = os.path.join(B, 'libmemtally.so')
    for quiet, lines in (('0', 1), ('1', 0)):
        e = dict(env, PYTHONPATH=HOOK + ':' + broken, LD_PRELOAD=shim, MEMTALLY_QUIET=quiet,
                 MEMTALLY_OUT=os.path.join(OUT, 'warn-bare' + quiet))
        r = subprocess.run([PY, '-c', prog], env=e, capture_output=True, text=True, timeout=60)
        ours = [l for l in r.stderr.splitlines() if l.startswith('memtally')]
        mt.check(r.returncode == 0 and r.stdout == 'ok\n' and len(ours) == lines and
                 (not lines or ours[0].startswith('memtally: warning: ' + want)),
                 'bare LD_PRELOAD, MEMTALLY_QUIET=%s: %d line of ours on stderr (%r)' % (quiet, lines, ours))

if mt.case('old'):
    # Python 2 and 3.0-3.9 are left alone: the shadowed sitecustomize runs
    # (the user's here), and nothing else: no finder, nothing imported, no
    # line on stderr, the same output and exit code as without memtally.
    olds = old_pythons()
    if not olds:
        print('  note: no Python 2.7 or 3.6-3.9 here: only the parse check')
    for v, py in sorted(olds.items()):
        prog = 'print 1' if v == '2.7' else 'print(1)'
        for env in (env0, dict(env0, PYTHONPATH=user)):
            a = run([py, '-c', prog], env, under=False)
            b = run([py, '-c', prog], env)
            mt.eq((b.returncode, b.stdout, run_lines(b.stderr)), (a.returncode, a.stdout, run_lines(a.stderr)),
                  'Python %s -c %r%s: as without memtally (%r)'
                  % (v, prog, ' with a user sitecustomize' if env is not env0 else '', b.stderr[-300:]))
            mt.check('memtally: warning from 1 process: Python %s: Python frames are read from 3.10 to 3.13 only'
                     % v in b.stderr, 'Python %s: the shim\'s note is in memtally run\'s summary' % v)
        r = run([py, '-c', PROBE])
        try:
            p = json.loads(r.stdout.splitlines()[-1])
        except (ValueError, IndexError):
            p = {}
        mt.eq((p.get('site'), p.get('finders'), [m for m in p.get('modules', ['?']) if 'memtally' in m]),
              (os.path.join(HOOK, 'sitecustomize.py'), [], []),
              'Python %s: the hook ran and put no finder, loaded no module (%s)' % (v, r.stderr[-200:]))
    # and a Python 3 program starting a Python 2 child
    if '2.7' in olds:
        prog = ('import subprocess, sys\nr = subprocess.run([%r, "-c", "print 1"])\n'
                'sys.exit(r.returncode + 10)\n' % olds['2.7'])
        a = run([PY, '-c', prog], under=False)
        b = run([PY, '-c', prog])
        mt.eq((b.returncode, b.stdout, run_lines(b.stderr)), (a.returncode, a.stdout, run_lines(a.stderr)),
              'Python 2.7 as the child of a Python 3 program: as without memtally (%r)' % b.stderr[-300:])
    # the file itself parses under Python 2 (a Python 2 start-up imports it)
    if '2.7' in olds:
        r = subprocess.run([olds['2.7'], '-c', 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")',
                            os.path.join(HOOK, 'sitecustomize.py')], capture_output=True, text=True)
        mt.eq((r.returncode, r.stderr), (0, ''), 'sitecustomize.py parses under Python 2')

if mt.case('installed'):
    prefix = os.path.join(OUT, 'prefix')
    r = subprocess.run(['make', '-s', '-C', ROOT, 'install', 'PREFIX=' + prefix], capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'make install (%s)' % r.stderr[-200:])
    inst = os.path.join(prefix, 'share', 'memtally', 'python')
    for sub in ('', '_memtally'):
        mt.eq(sorted(f for f in os.listdir(os.path.join(inst, sub)) if f.endswith('.py')),
              sorted(f for f in os.listdir(os.path.join(HOOK, sub)) if f.endswith('.py')),
              'the Python files are installed (%s)' % (sub or 'the hook and memtally.py'))
    r = subprocess.run([os.path.join(prefix, 'bin', 'memtally'), 'run', '--out', os.path.join(OUT, 'inst'),
                        '--', PY, '-c', PROBE], env=env0, capture_output=True, text=True)
    p = json.loads(r.stdout)
    mt.eq((p['site'], p['finders']), (os.path.join(inst, 'sitecustomize.py'), ['_MemtallyTorchFinder']),
          'the installed memtally run finds the installed hook')
mt.done()
