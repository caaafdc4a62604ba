"""Step snapshots in the shim: a "step" mark (memtally_mark, from C here).
MEMTALLY_STEPS=N: a mark that reaches a multiple of N from below gets a
snapshot of reason "step", written by the marking thread, of the state at
the mark: 10, 20, 30, then after the counter falls to 0 and rises to 3 (no
multiple reached) a jump to 25 that passes two multiples (one snapshot).
Another mark name ("epoch") asks for nothing.  Unset, the cadence
(MEMTALLY_CADENCE): each of the first 64 steps, then every 2nd for 64
snapshots, every 4th, ...; a million steps stay under 2,000 snapshots with
at least 24 in any run's last three quarters.  MEMTALLY_CADENCE=0 with
STEPS unset asks for nothing.  The time cadence: a program without steps
gets snapshots on time (reason "interval"), at least 24 in its last three
quarters, however long it runs."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
PROG = os.path.join(B, 'test', 'prog_steps')


def run(name, args, steps, cadence=None, prog=PROG):
    d = os.path.join(OUT, name)
    os.makedirs(d)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=d,
               MEMTALLY_COMPRESS='0', MEMTALLY_RISE='0')
    env.pop('MEMTALLY_STEPS', None)
    if steps is not None:
        env['MEMTALLY_STEPS'] = steps
    if cadence is not None:
        env['MEMTALLY_CADENCE'] = cadence
    r = subprocess.run([prog] + args, env=env, capture_output=True, text=True, timeout=250)
    mt.eq(r.returncode, 0, '%s: exit code' % name)
    fs = mt.files(d)
    mt.eq(len(fs), 1, '%s: one file' % name)
    if prog != PROG:
        return fs[0].snapshots if fs else []
    return [(s['reason'], s.get('marks', {}).get('step')) for s in fs[0].snapshots] if fs else []


if mt.case('every10'):
    got = run('every10', ['10', '30'], '10')
    mt.eq(got, [('step', 10), ('step', 20), ('step', 30), ('step', 25), ('exit', 25)],
          'MEMTALLY_STEPS=10: a snapshot at 10, 20, 30, none on the way back to 3, one at 25')
if mt.case('off'):
    got = run('off', ['0', '30'], '0', cadence='0')
    mt.eq(got, [('exit', 25)], 'MEMTALLY_STEPS=0, MEMTALLY_CADENCE=0: only the exit snapshot')
if mt.case('cadence'):
    got = [s for r, s in run('cadence', ['0', '300'], None) if r == 'step']
    want = list(range(1, 65)) + list(range(66, 193, 2)) + list(range(196, 301, 4))
    mt.eq(got, want, 'unset: the first 64 steps, then every 2nd for 64, then every 4th')
if mt.case('long'):
    # a million steps (marks only, no allocation between): the count stays
    # bounded and the last three quarters of any prefix are covered
    got = [s for r, s in run('long', ['0', '1000000'], None) if r == 'step']
    mt.check(len(got) <= 2000, 'a million steps: %d step snapshots (<= 2000)' % len(got))
    for n in (10, 40, 120, 1000, 77777, 1000000):
        # every step of a short run, else at least 24
        want = min(24, n - int(0.25 * n) + (0.25 * n == int(0.25 * n)))
        inside = [s for s in got if 0.25 * n <= s <= n]
        mt.check(len(inside) >= want, 'steps 1-%d: %d snapshots in the last three quarters '
                 '(>= %d)' % (n, len(inside), want))
if mt.case('time'):
    # no steps: a program that allocates for a second (prog_cadence)
    snaps = run('time', ['1000'], None, prog=os.path.join(B, 'test', 'prog_cadence'))
    end = snaps[-1]['elapsed_ms'] if snaps else 0
    ts = [s['elapsed_ms'] for s in snaps if s['reason'] == 'interval']
    late = [t for t in ts if t >= 0.25 * end]
    mt.check(24 <= len(late) and len(snaps) <= 2000, 'on time: %d interval snapshots, %d in the '
             'last three quarters of %d ms (>= 24)' % (len(ts), len(late), end))
mt.done()
