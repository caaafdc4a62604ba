"""Threads with small stacks run under the shim as without it (issue 51,
item 5).  glibc carves every thread's static TLS (each loaded object's
initial-exec variables) out of the thread's stack; the shim once had
52 KB of it, so a 16-48 KiB stack failed with EINVAL (Python's
threading.stack_size(32768), node's threads).  The shim's per-thread
tables live in memory of its own, reached through small TLS pointers
(doc/design.md, "Each thread's tables").

Cases (MEMTALLY_CASE): tls (PT_TLS MemSiz of libmemtally.so under the
bound), c (prog_smallstack: 16, 24, 32, 48 KiB stacks, nested, 64
short-lived threads, a fork from a small-stack thread), python
(threading.stack_size(32768) and a thread that allocates), node (SIGUSR1
starts its inspector: a program's own handler for the snapshot signal
keeps working, and its threads start); each program
run bare and under the shim: same exit status and output, and the
small-stack threads' allocations charged."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
TLS_BOUND = 512  # bytes of static TLS the shim may take from every thread

def tls():
    r = subprocess.run(['readelf', '-lW', SHIM], capture_output=True, text=True, check=True)
    rows = [l.split() for l in r.stdout.splitlines() if l.split()[:1] == ['TLS']]
    mt.eq(len(rows), 1, 'tls: one PT_TLS segment')
    if rows:
        memsz = int(rows[0][5], 16)  # Type Offset VirtAddr PhysAddr FileSiz MemSiz
        mt.check(memsz <= TLS_BOUND, 'tls: PT_TLS MemSiz %d bytes <= %d' % (memsz, TLS_BOUND))

def both(name, argv):
    """argv bare and under the shim: same status, stdout, stderr; the file."""
    out = os.path.join(OUT, name)
    bare = subprocess.run(argv, capture_output=True, timeout=120)
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, MEMTALLY_SAMPLE='0')
    shim = subprocess.run(argv, capture_output=True, env=env, timeout=120)
    mt.eq(bare.returncode, 0, name + ': bare run succeeds')
    mt.eq(shim.returncode, bare.returncode, name + ': same exit status')
    mt.check(shim.stdout == bare.stdout,
             name + ': same stdout %r' % shim.stdout.decode(errors='replace')[-300:])
    mt.check(shim.stderr == bare.stderr, name + ': same stderr %r' % shim.stderr[-300:])
    return mt.files(out)

def c():
    fs = both('c', [os.path.join(B, 'test', 'prog_smallstack')])
    mt.check(len(fs) == 2, 'c: two files (the program and its fork child): %d' % len(fs))
    # 72 threads in the parent, each 2000 allocations or reallocations in churn
    most = max((f.sites_by_function(f.final(), kinds=['heap']).get(('churn', 'heap'), {})
                .get('allocs', 0) for f in fs), default=0)
    mt.check(most >= 72 * 1000, 'c: the threads\' allocations charged to churn (%d)' % most)

PY = r'''
import threading
threading.stack_size(32768)
out = []
def work():
    d = {}
    for i in range(20000):
        d[i] = str(i) * 3
    out.append(sum(len(v) for v in d.values()))
ts = [threading.Thread(target=work) for _ in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(out)
'''

def python():
    fs = both('python', ['/usr/bin/python3', '-c', PY])
    mt.eq(len(fs), 1, 'python: one file')

def node_run(shim, out):
    """node waits; the test sends it SIGUSR1, which starts its inspector
    (a thread of its own, with a small stack); its stderr says so."""
    import signal, time
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    if shim:
        env.update(LD_PRELOAD=SHIM, MEMTALLY_OUT=out)
    p = subprocess.Popen(['node', '--inspect-port=0', '-e',
                          'console.log("ready"); setTimeout(() => process.exit(0), 3000)'],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mt.eq(p.stdout.readline(), 'ready\n', 'node (shim %s): ready' % shim)
    p.send_signal(signal.SIGUSR1)
    so, se = p.communicate(timeout=120)
    return p.returncode, se

def node():
    # node's SIGUSR1 starts its inspector: its own handler for the snapshot
    # signal, chained by the shim, runs as without it; its threads start
    # (they failed with 52 KB of static TLS: "pthread_create: Invalid
    # argument" at every start, and no inspector)
    import shutil
    if not shutil.which('node'):
        print('  (node is not installed: skipped)')
        return
    rb, eb = node_run(False, None)
    rs, es = node_run(True, os.path.join(OUT, 'node'))
    mt.eq(rb, 0, 'node bare: exit 0')
    mt.check('Debugger listening on' in eb, 'node bare: SIGUSR1 starts the inspector (%r)' % eb[-200:])
    mt.eq(rs, rb, 'node under the shim: the same exit status')
    mt.check('Debugger listening on' in es and 'pthread_create' not in es,
             'node under the shim: SIGUSR1 starts the inspector as bare (%r)' % es[-300:])

for name, fn in (('tls', tls), ('c', c), ('python', python), ('node', node)):
    if mt.case(name):
        fn()
mt.done()
