"""SIGUSR1 sent 100 times to a process busy allocating: snapshots follow
(coalesced: at most one pending request is kept), nothing crashes, and the
program's own handler runs every time, whether installed with sigaction or
signal after start, or by a library before memtally started."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
first = os.path.join(B, 'test', 'lib_sigfirst.so')
cases = [('sigaction', SHIM), ('signal', SHIM), ('before', SHIM + ' ' + first),
         ('none', SHIM)]
for mode, preload in cases:
    out = os.path.join(OUT, mode)
    env = dict(os.environ, LD_PRELOAD=preload, MEMTALLY_OUT=out)
    r = subprocess.run([os.path.join(B, 'test', 'prog_signal'), mode], env=env,
                       capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, 0, mode + ': exit code')
    if mode != 'none':
        mt.eq(r.stdout, 'handled 100\n', mode + ': the program\'s handler ran 100 times')
    f = mt.files(out)[0]
    n = sum(1 for s in f.snapshots if s['reason'] == 'signal')
    mt.check(1 <= n <= 100, '%s: %d signal snapshots for 100 signals' % (mode, n))
    mt.eq(f.final()['reason'], 'exit', mode + ': exit snapshot written')
mt.done()
