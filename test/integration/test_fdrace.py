"""Never a byte in a file that is not ours (issue 51): a program that
closes descriptors and takes their numbers for its own file while the
shim writes snapshots gets nothing of the shim's in its file.

With a soft RLIMIT_NOFILE above 4096 the shim's file sits at 900, inside
the program's range.  prog_fdrace closes 896-1199 over and over and dup2s
its own file onto each (the shim's number among them, wherever the shim
opened its file again), while one thread allocates (MEMTALLY_EVERY's
snapshots, written by it), another sends the snapshot signal, and the
writer thread writes interval snapshots; then it reads its own files
back.  For each way of writing (compressed or plain; every N allocations,
on time, on the signal), and with the limit both above 4096 (the file in
the program's range: the shim's writes are made from a child holding its
own copy of the descriptor table, platform/fdio.h) and at 1024 (the file
above the program's range): the program's files hold its own lines alone,
its output equals the bare run's, the shim's file reads whole, and every
snapshot that could not be written is counted in the next one.  On the
code before the fix, 1 to 4 of its 4 files held zstd frames."""
import os, resource, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
PROG = os.path.join(B, 'test', 'prog_fdrace')
ROUNDS = os.environ.get('MT_FDRACE_ROUNDS', '150')
n = [0]


def run(shim, nofile, env):
    n[0] += 1
    d = os.path.join(OUT, 'r%d' % n[0])
    os.makedirs(os.path.join(d, 'o'))
    e = dict(os.environ, MEMTALLY_QUIET='1', **env)
    e.pop('LD_PRELOAD', None)
    if shim:
        e.update(LD_PRELOAD=SHIM, MEMTALLY_OUT=os.path.join(d, 'o'))

    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, max(nofile, 8192)))
    r = subprocess.run([PROG, d, ROUNDS], env=e, capture_output=True, text=True, preexec_fn=pre,
                       timeout=240)
    return r, os.path.join(d, 'o')


bare, _ = run(False, 8192, {})
mt.eq((bare.returncode, bare.stdout), (0, 'foreign 0\n'), 'bare: its files hold its own lines')
for nofile in (8192, 1024):
    for what, env in (('every 300, zstd', {'MEMTALLY_EVERY': '300'}),
                      ('every 300, plain', {'MEMTALLY_EVERY': '300', 'MEMTALLY_COMPRESS': '0'}),
                      ('interval and signal', {'MEMTALLY_INTERVAL': '0.002'})):
        if nofile == 1024 and what != 'every 300, zstd':
            continue
        what = '%s, soft limit %d' % (what, nofile)
        r, out = run(True, nofile, env)
        mt.eq((r.returncode, r.stdout), (bare.returncode, bare.stdout),
              what + ': the program\'s files hold its own lines, its output as bare')
        fs = mt.files(out)
        mt.eq(len(fs), 1, what + ': one file of the shim\'s')
        if not fs:
            continue
        snaps = fs[0].snapshots
        last = snaps[-1]
        mt.eq(last['reason'], 'exit', what + ': the file ends with the exit snapshot')
        missing = last['seq'] + 1 - len(snaps)
        dropped = last.get('shim', {}).get('dropped_snapshots', 0)
        mt.check(missing <= dropped, what + ': every snapshot not in the file is counted '
                 '(%d missing, %d dropped, of %d)' % (missing, dropped, last['seq'] + 1))
        rep = subprocess.run([os.path.join(B, 'memtally'), 'report', out], capture_output=True,
                             text=True, timeout=120)
        mt.eq(rep.returncode, 0, what + ': memtally report reads it (%s)' % rep.stderr[-200:])
mt.done()
