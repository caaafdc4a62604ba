"""Load (issue 9): 16 threads x 2 M mixed operations (malloc, calloc,
realloc, free), a fork every 100 k operations of the whole process (320
forks; each child allocates and leaves through _exit), SIGUSR1 to the
process every 10 ms with the program's own handler installed: no deadlock
(the runner's watchdog, and a 240 s timeout here), the program's own totals
between two requested snapshots equal the shim's exactly, every fork child
wrote a readable file, and the signal snapshots were coalesced.  Then
prog_forkgate: 300 forks (`make test`: 100) while new threads unwind (cold libunwind caches,
so dl_iterate_phdr and the loader's lock); a fork child stuck on that lock
(a CI run hung so, 1 child in ~2000 forks before the fork gate in
unwind.h) is killed after 10 s and counted: none may be."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=OUT)
r = subprocess.run([os.path.join(B, 'test', 'prog_stress'), '16', '2000000', str(100000 // 16)], env=env,
                   capture_output=True, text=True, timeout=240)
mt.eq(r.returncode, 0, 'exit code (no deadlock, no crash)')
want = json.loads(r.stdout)
mt.eq(want['forks'], 320, '320 forks')
fs = mt.files(OUT)
parent = [f for f in fs if f.header['ppid'] != 0 and any(s.get('label') == 'end' for s in f.snapshots)][0]
s0, s1 = parent.by_label('start')['heap'], parent.by_label('end')['heap']
for k in ('allocs', 'alloc_bytes', 'frees', 'live_bytes'):
    mt.eq(s1[k] - s0[k], want[k], 'heap %s between start and end' % k)
kids = [f for f in fs if f.header['ppid'] == parent.header['pid']]
mt.eq(len(kids), 320, 'one file per fork child')
mt.check(all(k.snapshots and k.final()['reason'] == 'exit' for k in kids), 'every child wrote its exit snapshot')
sig = sum(1 for s in parent.snapshots if s['reason'] == 'signal')
mt.check(sig >= 1, '%d signal snapshots (coalesced)' % sig)
d = os.path.join(OUT, 'forkgate')
nfork = 300 if mt.full() else 100  # (40 s of CPU for 300)
r = subprocess.run([os.path.join(B, 'test', 'prog_forkgate'), str(nfork)], capture_output=True, text=True, timeout=240,
                   env=dict(env, MEMTALLY_OUT=d))
mt.eq((r.returncode, r.stdout.strip()), (0, 'forks %d hung 0' % nfork), 'forkgate: no fork child hung on the loader lock')
mt.done()
