"""The Python helper (scripts/python/memtally.py): marks and snapshots land
in the file when the shim is loaded, and every call is a silent no-op
returning False when it is not."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts', 'python')
script = '''
import sys; sys.path.insert(0, %r)
import memtally
keep = []
for step in range(1, 31):
    memtally.mark("step", step)
    keep.append(bytearray(100000))
    if step %% 10 == 0:
        r = memtally.snapshot("at %%d" %% step)
print(memtally.active(), r)
''' % HERE
r = subprocess.run(['/usr/bin/python3', '-c', script], capture_output=True, text=True)
mt.eq((r.returncode, r.stdout, r.stderr), (0, 'False False\n', ''), 'without the shim: silent no-ops')
env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=OUT)
r = subprocess.run(['/usr/bin/python3', '-c', script], capture_output=True, text=True, env=env)
mt.eq((r.returncode, r.stdout), (0, 'True True\n'), 'with the shim: active, snapshots written')
f = mt.files(OUT)[0]
labels = [(s.get('label'), s.get('marks', {}).get('step')) for s in f.snapshots if s['reason'] == 'request']
mt.eq(labels, [('at 10', 10), ('at 20', 20), ('at 30', 30)], 'snapshots carry their label and the step mark')
mt.done()
