"""The phases' cost (issue 56): `/usr/bin/python3 test/bench/phases.py`
after `make` (or `make bench` once run.sh calls it).

1. One phase (begin and end) through the C API, from Python's ctypes as
   the start-up hook calls it, beside a ctypes call of the same shape
   that does nothing (memtally_phase with an empty name, refused at once):
   the difference is the shim's work.  Then the hook's Python wrapper
   (_memtally/phases.py's _wrap around a function that returns) beside
   the bare function.  CPU time (user + sys) per call, best of 5.
2. A trainer's CPU time (test/integration/torch_rl.py: DataLoader,
   backward, optimizer, weight syncs, evaluation, checkpoints: every
   automatic phase) under `memtally run`, with the phases and with the
   hook's phase module replaced by one that installs nothing; user + sys
   of the whole run, median of 3.  Figures go to stdout as a Markdown
   table."""
import os, resource, subprocess, sys, tempfile
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = os.environ.get('MT_BUILD', os.path.join(ROOT, 'build'))
MT = os.path.join(B, 'memtally')
PY = '/usr/bin/python3'

MICRO = r'''
import ctypes, os, sys, time
N = 200000
lib = ctypes.CDLL(None)
ph = lib.memtally_phase
ph.argtypes = [ctypes.c_char_p, ctypes.c_int]
def cpu():
    t = os.times()
    return t.user + t.system
def best(fn):
    r = []
    for _ in range(5):
        t = cpu(); fn(); r.append(cpu() - t)
    return min(r) / N * 1e9
def real():
    for _ in range(N):
        ph(b'bench', 1); ph(b'bench', 0)
def empty():
    for _ in range(N):
        ph(b'', 1); ph(b'', 0)
sys.path.insert(0, sys.argv[1])
import importlib.util
spec = importlib.util.spec_from_file_location('_memtally.phases', os.path.join(sys.argv[1], '_memtally', 'phases.py'))
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
m._phase = ph
def f(): return 1
w = m._wrap(f, b'bench')
def wrapped():
    for _ in range(N):
        w()
def bare():
    for _ in range(N):
        f()
a, b, c, d = best(real), best(empty), best(wrapped), best(bare)
print('%.0f %.0f %.0f %.0f' % (a, b, c, d))
'''

OFF = r'''
import sys, types, runpy
stub = types.ModuleType('_memtally.phases')
stub.install = lambda torch, steps: False
sys.modules['_memtally.phases'] = stub
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
'''


def child_cpu(args, env):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(args, env=env, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit('failed: %s\n%s' % (args, p.stderr[-2000:]))
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    env = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_')}
    with tempfile.TemporaryDirectory() as d:
        micro = os.path.join(d, 'micro.py')
        open(micro, 'w').write(MICRO)
        off = os.path.join(d, 'off.py')
        open(off, 'w').write(OFF)
        out = subprocess.run([MT, 'run', '--out', os.path.join(d, 'm'), '--', PY, micro,
                              os.path.join(ROOT, 'scripts', 'python')],
                             env=env, capture_output=True, text=True, check=True).stdout.split()
        real, empty, wrapped, bare = map(float, out)
        rl = os.path.join(ROOT, 'test', 'integration', 'torch_rl.py')
        steps = os.environ.get('PHASES_STEPS', '150')
        on, offs = [], []
        for i in range(3):
            on.append(child_cpu([MT, 'run', '--out', os.path.join(d, 'on%d' % i), '--', PY, rl, steps], env))
            offs.append(child_cpu([MT, 'run', '--out', os.path.join(d, 'off%d' % i), '--', PY, off, rl, steps], env))
        on.sort(), offs.sort()
    print('| what | CPU |')
    print('|---|---|')
    print('| a phase (begin + end) through ctypes | %.0f ns |' % real)
    print('| the same two ctypes calls, refused at once | %.0f ns |' % empty)
    print('| the shim\'s own work a phase | %.0f ns |' % (real - empty))
    print('| a call through the hook\'s phase wrapper | %.0f ns (bare call %.0f ns) |' % (wrapped, bare))
    print('| torch_rl.py %s steps under memtally run, phases on | %.2f s |' % (steps, on[1]))
    print('| the same, the phase module installing nothing | %.2f s |' % offs[1])


if __name__ == '__main__':
    main()
