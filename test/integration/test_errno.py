"""errno after every hooked call, success and failure, is what the real
function left: the program prints it after each call with a sentinel set
before, and its output is identical with and without the shim (exact and
sampled, and with libunwind walking every stack)."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
prog = os.path.join(B, 'test', 'prog_errno')
plain = subprocess.run([prog], capture_output=True, text=True)
mt.eq(plain.returncode, 0, 'runs without the shim')
mt.check('errno=12' in plain.stdout and 'errno=4242' in plain.stdout,
         'the program sees both ENOMEM and untouched errno')
for sample, unwind in (('0', 'cfi'), ('1K', 'cfi'), ('0', 'libunwind')):
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'),
               MEMTALLY_OUT=os.path.join(OUT, sample + unwind), MEMTALLY_SAMPLE=sample,
               MEMTALLY_UNWIND=unwind)
    sample = '%s unwind=%s' % (sample, unwind)
    shim = subprocess.run([prog], capture_output=True, text=True, env=env)
    mt.eq(shim.returncode, 0, 'sample=%s: exit code' % sample)
    a, b = plain.stdout.splitlines(), shim.stdout.splitlines()
    mt.eq(len(b), len(a), 'sample=%s: same number of lines' % sample)
    for x, y in zip(a, b):
        mt.eq(y, x, 'sample=%s: %s' % (sample, x.split(' errno')[0].strip()))
mt.done()
