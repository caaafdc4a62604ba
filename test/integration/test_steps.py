"""MEMTALLY_STEPS=N in the shim: a "step" mark (memtally_mark, from C here)
that reaches a multiple of N from below asks for a snapshot of reason
"step", written by the writer thread.  prog_steps waits for each one it
expects, so every snapshot's step is exact: 10, 20, 30, then after the
counter falls to 0 and rises to 3 (no multiple reached) a jump to 25 that
passes two multiples (one snapshot).  Another mark name ("epoch") asks for
nothing.  MEMTALLY_STEPS=0 asks for nothing; the default is 100."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
prog = os.path.join(B, 'test', 'prog_steps')


def run(name, args, steps):
    d = os.path.join(OUT, name)
    os.makedirs(d)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=d,
               MEMTALLY_COMPRESS='0', MEMTALLY_RISE='0')
    env.pop('MEMTALLY_STEPS', None)
    if steps is not None:
        env['MEMTALLY_STEPS'] = steps
    r = subprocess.run([prog] + args, env=env, capture_output=True, text=True, timeout=250)
    mt.eq(r.returncode, 0, '%s: exit code' % name)
    fs = mt.files(d)
    mt.eq(len(fs), 1, '%s: one file' % name)
    return [(s['reason'], s.get('marks', {}).get('step')) for s in fs[0].snapshots] if fs else []


if mt.case('every10'):
    got = run('every10', ['10', '30'], '10')
    mt.eq(got, [('step', 10), ('step', 20), ('step', 30), ('step', 25), ('exit', 25)],
          'MEMTALLY_STEPS=10: a snapshot at 10, 20, 30, none on the way back to 3, one at 25')
if mt.case('off'):
    got = run('off', ['0', '30'], '0')
    mt.eq(got, [('exit', 25)], 'MEMTALLY_STEPS=0: only the exit snapshot')
if mt.case('default'):
    got = run('default', ['100', '250'], None)
    mt.eq(got, [('step', 100), ('step', 200), ('exit', 25)], 'unset: every 100 steps')
mt.done()
