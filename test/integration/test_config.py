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
# issue 45: the program's stderr has at most one line of ours; the file
# has each warning as a record
mt.eq(len(warn), 1, 'bad values: one warning line on stderr (%r)' % warn)
mt.eq(len(fs[0].warnings) if fs else 0, 4, 'bad values: a warning record each in the file')
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

# Bounds (issue 33): every numeric option has a range in the table; a
# value outside it warns and keeps the default (TRACE=999999999999 once
# reserved 36 TiB of address space, or turned tracking off).
r, fs = run('bounds', 'prog_known', TRACE='999999999999', TOP='99999999999', INTERVAL='100000')
warn = [l for l in r.stderr.splitlines() if l.startswith('memtally: warning:')]
mt.check(r.returncode == 0 and len(warn) == 1 and len(fs) == 1 and len(fs[0].warnings) == 3 and
         'MEMTALLY_TRACE=999999999999 is out of range (16 to 16777216); using 100000' in fs[0].warnings,
         'out of range: one warning record each, naming the range; one line on stderr (%r)' % warn)
cfg = fs[0].header['config'] if fs else {}
mt.eq((cfg.get('trace'), cfg.get('top'), cfg.get('interval')), (100000, 0, 0), 'out of range: defaults kept')
mt.check(len(fs) == 1 and fs[0].final()['heap']['allocs'] >= 1543, 'out of range: still tracking')

# A misspelt name warns once, naming what was meant; names memtally's own
# parts read (the Python hook's, memtally run's, the tests') do not.
r, fs = run('names', 'prog_known', OUTT='x', INTERVALS='1', TORCH='0', STEPS='5', TORCH_HISTORY='1', LIB='x')
warn = [l for l in r.stderr.splitlines() if l.startswith('memtally: warning:')]
ws = fs[0].warnings if fs else []
mt.check(len(warn) == 1 and len(ws) == 2 and 'MEMTALLY_OUTT is not a memtally variable: ignored (did you mean MEMTALLY_OUT?)'
         in ws and 'MEMTALLY_INTERVALS' in ' '.join(ws),
         'unknown names: one warning record each, one line on stderr (%r)' % warn)

# The snapshot signal: USR1, USR2 and the real-time ones only.  SIGSEGV
# taken as the snapshot signal turned a crash into an endless loop of
# snapshots (12 853 in 3 s); refused, the program crashes as it would.
crash = ['/usr/bin/python3', '-c', 'import ctypes; ctypes.string_at(0)']
bare = subprocess.run(crash, capture_output=True, timeout=60)
for sig in ('11', 'SEGV', 'SIGTERM', '17', '33'):
    try:
        r = subprocess.run(crash, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=os.path.join(OUT, 'sig'),
                                    MEMTALLY_SIGNAL=sig))
        ok = r.returncode == bare.returncode and 'MEMTALLY_SIGNAL=%s is not valid; using USR1' % sig in r.stderr
        mt.check(ok, 'SIGNAL=%s refused: the crash is the program\'s (exit %d, bare %d)' %
                 (sig, r.returncode, bare.returncode))
    except subprocess.TimeoutExpired:
        mt.check(False, 'SIGNAL=%s: the crashing program did not end in 60 s' % sig)
for sig, want in (('RTMIN+2', 36), ('sigrtmax-1', 63), ('40', 40), ('usr2', 'USR2')):
    r, fs = run('sig' + sig, 'prog_known', SIGNAL=sig)
    mt.eq(fs[0].header['config']['signal'] if fs else None, want, 'SIGNAL=%s taken' % sig)

# memtally run checks its options against the same table: a misspelt
# name or a bad value is a usage error (exit 2) and nothing runs.
MT = os.path.join(B, 'memtally')
marker = os.path.join(OUT, 'ran')
for args, want in ((['--set', 'INTERVALS=1'], 'MEMTALLY_INTERVALS is not a memtally variable'),
                   (['--interval', 'abc'], 'INTERVAL=abc is not a valid value'),
                   (['--set', 'TRACE=999999999999'], 'TRACE=999999999999 is out of range (16 to 16777216)'),
                   (['--signal', 'SEGV'], 'SIGNAL=SEGV is not a valid value')):
    r = subprocess.run([MT, 'run', '--out', os.path.join(OUT, 'run')] + args + ['--', 'touch', marker],
                       capture_output=True, text=True)
    mt.check(r.returncode == 2 and want in r.stderr and not os.path.exists(marker),
             'memtally run %s: usage error before anything runs (exit %d, %r)' %
             (' '.join(args), r.returncode, r.stderr.split('\n')[0]))
r = subprocess.run([MT, 'run', '--out', os.path.join(OUT, 'run'), '--set', 'TORCH=0', '--interval', '0.5', '--',
                    'touch', marker], capture_output=True, text=True)
mt.check(r.returncode == 0 and os.path.exists(marker), 'memtally run --set TORCH=0 --interval 0.5: taken (%r)' %
         r.stderr[-200:])

# doc/options.md's table is memtally-config's output, between its markers.
readme = open(os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'options.md')).read()
begin, end = '<!-- BEGIN memtally-config --markdown', '<!-- END memtally-config --markdown -->'
table = readme.split(begin, 1)[1].split('\n', 1)[1].split(end, 1)[0] if begin in readme else ''
gen = subprocess.run([os.path.join(B, 'memtally-config'), '--markdown'], capture_output=True, text=True).stdout
mt.check(table == gen, 'doc/options.md\'s environment table is `memtally-config --markdown` (regenerate it%s)' %
         ('' if table == gen else ': differs at line %d' %
          next(i for i, (x, y) in enumerate(zip(table.split('\n') + [''], gen.split('\n') + [''])) if x != y)))

# Address space: the shim maps its tables as they fill, so a program under
# RLIMIT_AS or `ulimit -v` keeps its room (it once reserved 900 MiB).
def vmsize(env):
    r = subprocess.run(['grep', 'VmSize', '/proc/self/status'], env=env, capture_output=True, text=True)
    return int(r.stdout.split()[1]) * 1024
plain = vmsize(dict(os.environ))
shim = vmsize(dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=os.path.join(OUT, 'vms')))
mt.check(shim - plain < 32 << 20, 'the shim adds %d KiB of address space (< 32 MiB)' % ((shim - plain) >> 10))
mt.done()
