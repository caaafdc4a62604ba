"""The option table: bad values warn once and keep the default; good values
take effect (every-N, interval and TOP snapshots, sizes with suffixes,
signal names); tiny tables report what they dropped; MEMTALLY_HOST=0 and
MEMTALLY_FOLLOW=0 do what they say."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
T = os.path.join(B, 'test')

def run(name, prog, args=(), **vars):
    out = os.path.join(OUT, name)
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out)
    env.update({'MEMTALLY_' + k: v for k, v in vars.items()})
    r = subprocess.run([os.path.join(T, prog)] + list(args), env=env,
                       capture_output=True, text=True, timeout=120)
    return r, mt.files(out)

r, fs = run('bad', 'prog_known', EVERY='abc', SAMPLE='12Q', SIGNAL='SIGNOPE', DEPTH='0')
mt.eq(r.returncode, 0, 'bad values: the program runs')
warn = [l for l in r.stderr.splitlines() if l.startswith('memtally: warning:')]
mt.eq(len(warn), 4, 'bad values: one warning line each')
mt.check('MEMTALLY_EVERY=abc is not valid; using 0' in r.stderr, 'warning names the variable and the default')
cfg = fs[0].header['config']
mt.eq((cfg['every'], cfg['sample'], cfg['signal'], cfg['depth']), (0, 0, 'USR1', 32), 'defaults kept')

r, fs = run('good', 'prog_leak', ['10'], EVERY='5000', SAMPLE='4KiB', SIGNAL='sigusr2',
            EXACT_ABOVE='2k', TOP='3', DEPTH='8', SEED='9')
cfg = fs[0].header['config']
mt.eq((cfg['every'], cfg['sample'], cfg['signal'], cfg['exact_above'], cfg['top'], cfg['depth']),
      (5000, 4096, 'USR2', 2048, 3, 8), 'values parsed')
every = [s for s in fs[0].snapshots if s['reason'] == 'every']
mt.check(len(every) >= 1, '%d every-N snapshots' % len(every))
mt.check(all(len(s['callsites']) <= 3 for s in fs[0].snapshots), 'TOP=3 keeps at most 3 call sites')
mt.check(max(len(fs[0].stacks[c['stack']]) for s in fs[0].snapshots for c in s['callsites']
             if c['stack']) <= 8, 'DEPTH=8 bounds stacks')

# DEPTH=1 takes each hook's return address instead of unwinding: every
# hook (malloc, calloc, realloc, reallocarray, the aligned ones) must name
# the same first frame, with the same figures, as a full unwind does.
def by_first_frame(f):
    out = {}
    for c in f.final()['callsites']:
        fr = f.stacks[c['stack']] if c['stack'] else []
        m = f.module(fr[0]) if fr else None  # module and offset: ASLR moves addresses between runs
        k = (c['kind'], (os.path.basename(m['path']), fr[0] - int(m['start'], 16)) if m else None)
        a = out.setdefault(k, [0, 0, 0])
        a[0] += c['allocs']; a[1] += c['alloc_bytes']; a[2] += c['live_bytes']
    return out
r1, f1 = run('depth1', 'prog_known', DEPTH='1')
r32, f32 = run('depth32', 'prog_known')
mt.eq((r1.returncode, r32.returncode), (0, 0), 'DEPTH=1 and default: both run')
mt.check(all(len(f1[0].stacks[c['stack']]) == 1 for c in f1[0].final()['callsites'] if c['stack']),
         'DEPTH=1: one frame a stack')
d1, d32 = by_first_frame(f1[0]), by_first_frame(f32[0])
heap1 = {k: v for k, v in d1.items() if k[0] == 'heap'}
mt.check(len(heap1) >= 9, 'DEPTH=1: %d heap call sites' % len(heap1))
mt.eq(heap1, {k: v for k, v in d32.items() if k[0] == 'heap'},
      'DEPTH=1: each first frame with the figures of a full unwind')

r, fs = run('interval', 'prog_leak', ['50'], INTERVAL='0.01')
mt.eq(r.returncode, 0, 'interval run exits 0')
n = sum(1 for s in fs[0].snapshots if s['reason'] == 'interval')
mt.check(n >= 1, '%d interval snapshots' % n)

r, fs = run('nosignal', 'prog_signal', ['none'], SIGNAL='none')
mt.eq(r.returncode, -10, 'SIGNAL=none: SIGUSR1 is the program\'s again (default action kills it)')

r, fs = run('tiny', 'prog_known', MAX_STACKS='16', MAX_LIVE='64')
mt.eq(r.returncode, 0, 'tiny tables: the program runs')
s = fs[0].final()['shim']
mt.check(s['dropped_live'] > 0 and s['dropped_stacks'] >= 0, 'tiny tables: dropped counted (%d live, %d stacks)'
         % (s['dropped_live'], s['dropped_stacks']))
mt.eq(fs[0].final()['heap']['allocs'] >= 1543, True, 'tiny tables: exact totals still kept')

r, fs = run('nohost', 'prog_known', HOST='0')
mt.eq((r.returncode, len(fs)), (0, 0), 'HOST=0: runs, writes nothing (no CUDA used)')
r, fs = run('nothing', 'prog_known', HOST='0', CUDA='0')
mt.eq((r.returncode, len(fs)), (0, 0), 'HOST=0 CUDA=0: runs, writes nothing')

r, fs = run('nofollow', 'prog_threads', ['20000'], FOLLOW='0')
mt.eq((r.returncode, len(fs)), (0, 1), 'FOLLOW=0: only the parent writes a file')

# Address space: the shim maps its tables as they fill, so a program under
# RLIMIT_AS or `ulimit -v` keeps its room (it once reserved 900 MiB).
def vmsize(env):
    r = subprocess.run(['grep', 'VmSize', '/proc/self/status'], env=env, capture_output=True, text=True)
    return int(r.stdout.split()[1]) * 1024
plain = vmsize(dict(os.environ))
shim = vmsize(dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=os.path.join(OUT, 'vms')))
mt.check(shim - plain < 32 << 20, 'the shim adds %d KiB of address space (< 32 MiB)' % ((shim - plain) >> 10))
mt.done()
