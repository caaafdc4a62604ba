"""Pre-OOM: a process in a cgroup of its own with a 96 MiB limit grows until
the kernel's OOM killer ends it; with MEMTALLY_PREOOM=0.8 the shim's dump
(reason "preoom") is on disk before the kill, names grow_step with the
memory it holds, and carries the cgroup's usage and limit.  cgroup v2 is
used where its memory controller is available, else v1's (this machine).
Where no cgroup can be created (not root, no controller), the test says why
it did not run and fails, so a broken setup is not mistaken for a pass."""
import glob, json, os, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
LIMIT = 96 << 20

def make_cgroup():
    name = 'memtally-test-%d' % os.getpid()
    v2 = '/sys/fs/cgroup'
    if os.path.exists(os.path.join(v2, 'cgroup.controllers')) and \
            'memory' in open(os.path.join(v2, 'cgroup.controllers')).read():
        d = os.path.join(v2, name)
        os.mkdir(d)
        open(os.path.join(d, 'memory.max'), 'w').write(str(LIMIT))
        open(os.path.join(d, 'memory.swap.max'), 'w').write('0') if os.path.exists(
            os.path.join(d, 'memory.swap.max')) else None
        return d, 2
    v1 = '/sys/fs/cgroup/memory'
    d = os.path.join(v1, name)
    os.mkdir(d)
    open(os.path.join(d, 'memory.limit_in_bytes'), 'w').write(str(LIMIT))
    return d, 1

try:
    cg, version = make_cgroup()
except OSError as e:
    print('  FAIL cannot create a memory cgroup here (%s): run as root on a machine with the '
          'memory controller' % e)
    sys.exit(1)
try:
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=OUT,
               MEMTALLY_PREOOM='0.8')
    prog = os.path.join(B, 'test', 'prog_grow')
    # the shell joins the cgroup, then becomes the program
    r = subprocess.run(['sh', '-c', 'echo $$ > %s/cgroup.procs && exec "$0" 300 20' % cg, prog],
                       env=env, capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, -9, 'cgroup v%d: the OOM killer ended the program (SIGKILL)' % version)
    dumps = glob.glob(os.path.join(OUT, '*.oom*.jsonl'))
    mt.eq(len(dumps), 1, 'one pre-OOM dump')
    if dumps:
        recs = [json.loads(l) for l in open(dumps[0]) if l.strip()]
        oom = [x for x in recs if x['type'] == 'oom'][0]
        mt.eq(oom['kind'], 'preoom', 'oom record kind')
        mt.eq(oom['cgroup_max_bytes'], LIMIT, 'the dump carries the cgroup limit')
        mt.check(oom['cgroup_current_bytes'] >= 0.8 * LIMIT,
                 'usage %d >= 80%% of the limit' % oom['cgroup_current_bytes'])
        d = mt.File(dumps[0])
        snap = d.final()
        mt.eq(snap['reason'], 'preoom', 'the dump ends with a complete snapshot')
        held = d.sites_by_function(snap, kinds=['heap']).get(('grow_step', 'heap'), {})
        mt.check(held.get('live_bytes', 0) >= 60 << 20,
                 'grow_step holds %d MiB in the dump' % (held.get('live_bytes', 0) >> 20))
        mt.eq(snap['cgroup']['version'], version, 'snapshot cgroup version')
        mt.eq(snap['cgroup']['max_bytes'], LIMIT, 'snapshot cgroup max_bytes')
finally:
    for _ in range(50):
        try:
            os.rmdir(cg)
            break
        except OSError:
            time.sleep(0.1)
mt.done()
