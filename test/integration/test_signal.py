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
# A program that blocks the snapshot signal never takes it: said once at
# exit (issue 33, item 4); a program that does not block it: nothing said.
for block in (True, False):
    code = ('import signal, os\n' + ('signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n' if block else
            'signal.signal(signal.SIGUSR1, lambda *a: None)\n') + 'os.kill(os.getpid(), signal.SIGUSR1)\nprint("done")')
    r = subprocess.run(['/usr/bin/python3', '-c', code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=os.path.join(OUT, 'blocked')))
    said = 'was sent while the program blocked it' in r.stderr
    mt.check(r.returncode == 0 and r.stdout == 'done\n' and said == block,
             '%s: %s (%r)' % ('blocked' if block else 'not blocked', 'one warning' if block else 'no warning',
                              r.stderr[-200:]))
mt.done()
