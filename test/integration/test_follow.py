"""Following children: a Python program using multiprocessing (fork; the
children leave through os._exit) and subprocess (exec) yields one file per
process with MEMTALLY_FOLLOW=1 -- each fork child naming its parent and
starting from empty tables -- and only the parent's with MEMTALLY_FOLLOW=0
(forked children write nothing; exec'd ones run without the shim)."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
script = r'''
import multiprocessing as mp, subprocess, sys, os
def work(n):
    keep = [bytearray(100000) for _ in range(n)]
    return len(keep)
if __name__ == '__main__':
    ctx = mp.get_context('fork')
    ps = [ctx.Process(target=work, args=(50,)) for _ in range(2)]
    for p in ps: p.start()
    for p in ps: p.join()
    r = subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get("LD_PRELOAD", "").count("libmemtally"))'],
                       capture_output=True, text=True)
    print(r.stdout.strip(), [p.exitcode for p in ps], os.getpid())
'''
for follow, want in (('1', 4), ('0', 1)):
    out = os.path.join(OUT, 'follow' + follow)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=out,
               MEMTALLY_FOLLOW=follow)
    r = subprocess.run(['/usr/bin/python3', '-c', script], env=env, capture_output=True,
                       text=True, timeout=120)
    mt.eq(r.returncode, 0, 'FOLLOW=%s: exit code (%s)' % (follow, r.stderr[-200:]))
    inherit, codes, pid = r.stdout.split(' ', 1)[0], r.stdout.split('[')[1].split(']')[0], \
        int(r.stdout.split()[-1])
    mt.eq(codes, '0, 0', 'FOLLOW=%s: workers exit 0' % follow)
    mt.eq(inherit, '1' if follow == '1' else '0',
          'FOLLOW=%s: the exec\'d child %s the shim in LD_PRELOAD' % (follow, 'has' if follow == '1' else 'lacks'))
    fs = mt.files(out)
    mt.eq(len(fs), want, 'FOLLOW=%s: %d files' % (follow, want))
    if follow == '1':
        kids = [f for f in fs if f.header['ppid'] == pid]
        forked = [f for f in kids if f.header['argv'] == fs[0].header['argv'] and f.header['pid'] != pid]
        mt.eq(len(kids), 3, 'three children name the parent (2 forks, 1 exec)')
        mt.eq(len(forked), 2, 'two fork children')
        for f in forked:
            snap = f.final()
            mt.eq(snap['reason'], 'exit', 'fork child %d wrote its exit snapshot through os._exit'
                  % f.header['pid'])
            mt.check(snap['heap']['allocs'] < 10000 and snap['heap']['alloc_bytes'] >= 50 * 100000,
                     'fork child tables start empty and see its own allocations (%d allocs, %d bytes)'
                     % (snap['heap']['allocs'], snap['heap']['alloc_bytes']))
mt.done()
