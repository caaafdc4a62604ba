"""The memtally command on real shim output: report names the functions
with exact bytes; leaks puts the planted leak first with the right bytes
per step and lists neither churn, cache nor checkpoints, and without the
leak lists nothing; diff finds the change between two runs; run starts a
command with the shim and keeps its exit code."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
T = os.path.join(B, 'test')

def memtally(*args):
    r = subprocess.run([MT] + list(args), capture_output=True, text=True)
    return r

def traced(name, argv):
    out = os.path.join(OUT, name)
    r = subprocess.run([MT, 'run', '--out', out, '--'] + argv, capture_output=True, text=True)
    return r, out

# run: exit code kept, the closing line names the directory
r, known = traced('known', [os.path.join(T, 'prog_known')])
mt.eq(r.returncode, 0, 'run: exit code of the command')
mt.check('1 new file in %s; see: memtally report %s' % (known, known) in r.stderr,
         'run: says where the files are: %r' % r.stderr.strip())
# a directory holding an earlier run's files is refused (its files would
# read as more processes), unless --append
r = subprocess.run([MT, 'run', '--out', known, '--', '/bin/true'], capture_output=True, text=True)
mt.check(r.returncode == 2 and 'already holds 1 memtally file' in r.stderr and '--append' in r.stderr,
         'run: an output directory with an earlier run\'s files is refused: %d %r' % (r.returncode, r.stderr.strip()))
mt.eq(len([p for p in os.listdir(known) if p.startswith('memtally.')]), 1, 'run: ... and nothing ran into it')
r = subprocess.run([MT, 'run', '--append', '--out', known, '--', os.path.join(T, 'prog_known')], capture_output=True, text=True)
mt.check(r.returncode == 0 and '1 new file in' in r.stderr, 'run --append: adds its file: %r' % r.stderr.strip())
r = subprocess.run([MT, 'report', '--json', known], capture_output=True, text=True)
mt.eq(len(json.loads(r.stdout)['processes']) if r.returncode == 0 else None, 2, 'run --append: both runs read back')
r, _ = traced('znow', [os.path.join(T, 'prog_znow')])
mt.eq(r.returncode, 7, 'run: non-zero exit code passed through')
r = subprocess.run([MT, 'run', '--out', os.path.join(OUT, 'nx'), '--', '/nonexistent/cmd'],
                   capture_output=True, text=True)
mt.eq(r.returncode, 127, 'run: a missing command exits 127')
r = subprocess.run([MT, 'run', '--out', 'd' * 5000, '--', '/bin/true'], capture_output=True, text=True)
mt.check(r.returncode == 2 and 'at most 1023 are supported' in r.stderr,
         'run: a 5000-byte --out is refused with a message (it overflowed a stack buffer): %d %r'
         % (r.returncode, r.stderr[-120:]))
r, _ = traced('killed', ['/bin/sh', '-c', 'kill -SEGV $$'])
mt.eq(r.returncode, 128 + 11, 'run: death by a signal exits 128+N')
mt.check('/bin/sh was killed by signal 11 (SIGSEGV)' in r.stderr,
         'run: says which signal killed the command: %r' % r.stderr.strip())

# report --json: exact bytes by function
r = memtally('report', '--json', '--top', '50', known)
mt.eq(r.returncode, 0, 'report: exit code')
rep = json.loads(r.stdout)
last = rep['processes'][0]['last']['callsites']
by = {}
for c in last:
    k = (c['function'], c['kind'])
    by[k] = by.get(k, 0) + c['live_bytes']
mt.eq(by.get(('alloc_pages', 'heap')), 4096000, 'report: alloc_pages live bytes')
mt.eq(by.get(('map_one', 'mmap')), 300 << 20, 'report: map_one live bytes')
mt.eq(by.get(('realloc_chain', 'heap')), 81920, 'report: realloc_chain live bytes')
f0 = last[0]['frames'][0]
mt.check(f0['function'] == 'map_one' and f0['file'].endswith('prog_known.c') and f0['line'] > 0,
         'report: frames carry function, file and line: %r' % f0)
r = memtally('report', known)
mt.check(r.returncode == 0 and 'alloc_pages (prog_known.c:' in r.stdout, 'report: text names the line')
# a terminal of 100 columns ($COLUMNS, as a terminal sets it) gets lines
# that fit; a pipe gets whole names
r100 = subprocess.run([MT, 'report', known], capture_output=True, text=True,
                      env=dict(os.environ, COLUMNS='100'))
mt.check(max(len(l) for l in r100.stdout.splitlines()) <= 100, 'report: text fits a terminal of 100 columns')

# Rows that print alike are one row, which says how many sites it holds
# (two calls of alloc_weights from main read the same twice); --stacks
# keeps them apart, each with its stack.
alike = os.path.join(OUT, 'alike')
subprocess.run([MT, 'run', '--out', alike, '--', os.path.join(B, 'test', 'prog_alike')], capture_output=True)
r = memtally('report', alike)
rows = [l for l in r.stdout.splitlines() if 'alloc_weights (prog_alike.c:' in l]
mt.check(len(rows) == 2 and all('16.0 MiB' in l and l.endswith('< main < _start [2 sites]') for l in rows),
         'report: two sites that print alike are one row of 16 MiB, "[2 sites]", at exit and at the peak: %s' % rows)
r = memtally('report', '--stacks', alike)
rows = [l for l in r.stdout.splitlines() if 'alloc_weights (prog_alike.c:' in l and 'MiB' in l]
mt.check(len(rows) == 4 and all('8.00 MiB' in l for l in rows), 'report --stacks: each site its own row (%d)' % len(rows))

# leaks: planted leak among churn, an LRU cache and mmap checkpoints
r, leak = traced('leak', [os.path.join(T, 'prog_trainer'), 'leak'])
r, noleak = traced('noleak', [os.path.join(T, 'prog_trainer'), 'noleak'])
r = memtally('leaks', '--json', leak)
sus = json.loads(r.stdout)['processes'][0]['suspects']
mt.check(len(sus) >= 1 and sus[0]['function'] == 'leak_history',
         'leaks: leak_history first (%s)' % [s['function'] for s in sus])
if sus:
    mt.check(abs(sus[0]['bytes_per_step'] - 10240) <= 10240 * 0.005,
             'leaks: %.1f bytes per step (10240 planted)' % sus[0]['bytes_per_step'])
mt.check(not any(s['function'] in ('churn', 'cache_put', 'checkpoint') for s in sus),
         'leaks: churn, cache and checkpoints are not suspects')
r = memtally('leaks', '--json', noleak)
mt.eq(json.loads(r.stdout)['processes'][0]['suspects'], [], 'leaks: no suspect without the leak')
r = memtally('leaks', noleak)
mt.check('no leak suspects' in r.stdout, 'leaks: text says there is none')

# diff: the two trainer runs differ by the leak (ASLR-independent matching)
r = memtally('diff', '--json', noleak + '@last', leak + '@last')
pairs = json.loads(r.stdout)['pairs']
top = pairs[0]['callsites'][0]
mt.eq((top['function'], top['change_bytes']), ('leak_history', 200 * 10240), 'diff @last: the leak is the change at exit')
# with no selector diff compares the peaks (what held memory): the leak's
# row there holds what the leaking run's peak snapshot says it held
r = memtally('diff', '--json', noleak, leak)
pair = json.loads(r.stdout)['pairs'][0]
mt.eq(pair['b']['moment'], 'at the peak', 'diff: compares the peaks by default')
lk = [c for c in pair['callsites'] if c['function'] == 'leak_history']
rep = json.loads(memtally('report', '--json', leak).stdout)['processes'][0]
at_peak = sum(c['at_peak_bytes'] for c in rep['at_peak']['callsites'] if c['function'] == 'leak_history')
mt.eq(lk and lk[0]['live_bytes_b'], at_peak, 'diff at the peak: the leak row holds its bytes at the peak, as report says')
f = mt.files(leak)[0]
# the requested snapshots of steps 105 and 155, by their step mark (rise
# snapshots may fall between them, so not by seq)
at = {s['marks']['step']: s['seq'] for s in f.snapshots if s['reason'] == 'request' and 'marks' in s}
r = memtally('diff', '--json', '%s@%d' % (f.path, at[105]), '%s@%d' % (f.path, at[155]))
top = json.loads(r.stdout)['pairs'][0]['callsites'][0]
mt.eq((top['function'], top['change_bytes']), ('leak_history', 50 * 10240),
      'diff: between two snapshots of one file (steps 105 and 155)')

# a module gone, or rebuilt since the run: marked, not misnamed
import shutil
copy = os.path.join(OUT, 'prog_copy')
shutil.copy(os.path.join(T, 'prog_known'), copy)
r, gone = traced('gone', [copy])
os.remove(copy)
r = memtally('report', gone)
mt.check(r.returncode == 0 and 'prog_copy+0x' in r.stdout and '[module gone]' in r.stdout,
         'report: a deleted module shows as module+0xoffset [module gone]')
shutil.copy(os.path.join(T, 'prog_known'), copy)
r, rebuilt = traced('rebuilt', [copy])
subprocess.run(['gcc', '-O0', '-g', '-D_GNU_SOURCE', '-DREBUILT=1', '-o', copy, os.path.join(os.path.dirname(__file__), 'prog_known.c')],
               check=True)
r = memtally('report', rebuilt)
mt.check('[build id differs]' in r.stdout, 'report: a rebuilt module shows [build id differs]')

# frames the shim left out inside a library initializer: one marked frame,
# skipped for the site's name (lib_ctor's 777 B block, eight calls down)
r, ctor = traced('ctor', [os.path.join(T, 'prog_ctor'), os.path.join(T, 'lib_alloc.so')])
r = memtally('report', '--stacks', '--native', '--top', '100', ctor)
lines = [l.strip() for l in r.stdout.split('\n')]
at = [i for i, l in enumerate(lines) if l.startswith('init_5 (')]
mt.check(at and lines[at[0] + 1] == '[frames left out: MEMTALLY_INITDEPTH]' and
         lines[at[0] + 2].startswith('lib_ctor ('),
         'report --stacks: the mark stands between init_5 and lib_ctor: %r' % (lines[at[0]:at[0] + 3] if at else at,))
r = memtally('flame', '--folded', '--native', ctor)
mt.check(any(l.startswith('heap;') and ';lib_ctor;[frames left out: MEMTALLY_INITDEPTH];init_5;' in l
             for l in r.stdout.split('\n')), 'flame --folded: the mark is a frame of its own')

# a row sums every site of its name: 300 call sites with names of their
# own, each larger than any one of 50 sites that share a name (a pc in no
# module), which together hold the most.  report looked at the largest
# sites until it had 4 x --top + 64 names, and left the 50 out.
rows = os.path.join(OUT, 'rows.jsonl')
with open(rows, 'w') as f:
    f.write('{"type":"header","version":3,"tool":"memtally","pid":9,"ppid":1,"host":"h",'
            '"exe":"/bin/true","argv":["rows"],"sample_bytes":0}\n')
    for i in range(1, 351):
        f.write('{"type":"stack","id":%d,"pcs":["0x%x"]}\n' % (i, 0x10000 + 16 * i if i <= 300 else 0x90000))
    sites = ','.join('{"stack":%d,"kind":"heap","live_bytes":%d,"live_count":1,"allocs":1,'
                     '"alloc_bytes":%d,"frees":0,"peak_bytes":%d,"at_peak_bytes":%d}'
                     % ((i,) + (100000 + i if i <= 300 else 30000,) * 4) for i in range(1, 351))
    f.write('{"type":"snapshot","seq":0,"reason":"exit","wall_ns":1,"mono_ns":1,"elapsed_ms":1,'
            '"heap":{"live_bytes":%d,"live_count":350,"allocs":350,"alloc_bytes":%d,"frees":0,'
            '"free_bytes":0,"peak_bytes":%d},"callsites_mode":"full","callsites":[%s]}\n'
            % ((300 * 100000 + 45150 + 50 * 30000,) * 3 + (sites,)))
r = memtally('report', '--top', '3', rows)
top = [l for l in r.stdout.split('\n') if '[no module]' in l]
mt.check(len(top) >= 2 and top[0].split()[:2] == ['1.43', 'MiB'] and '0x90000 [no module] [50 sites]' in top[0],
         'report: the 50 sites of one name are one row, first, with all their bytes: %r' % top[:1])

# usage errors exit 2
mt.eq(memtally('report').returncode, 2, 'usage: no input exits 2')
mt.eq(memtally('frobnicate', known).returncode, 2, 'usage: unknown command exits 2')
mt.eq(memtally('report', '--top', 'x', known).returncode, 2, 'usage: bad option value exits 2')
# --help on every command: its own usage on stdout, exit 0
for cmd in ('run', 'report', 'leaks', 'functions', 'top', 'diff', 'ranks', 'oom', 'flame', 'html', 'torch',
            'pprof', 'cat'):
    r = memtally(cmd, '--help')
    mt.check(r.returncode == 0 and r.stdout.startswith('usage: memtally %s' % cmd),
             'usage: %s --help prints its usage: %d %r' % (cmd, r.returncode, r.stdout[:60]))
# an option that does not apply is an error, named
for args in (('report', '-o', 'x.txt'), ('diff', '--metric', 'allocs'), ('ranks', '--stacks'),
             ('leaks', '--snapshot', 'peak'), ('torch', '--kind', 'heap')):
    r = memtally(*(args + (known,)))
    mt.check(r.returncode == 2 and 'does not apply' in r.stderr,
             'usage: %s is refused: %d %r' % (' '.join(args), r.returncode, r.stderr[:80]))
# FILE@N, FILE@peak, FILE@last wherever a file is taken
f = [os.path.join(known, p) for p in os.listdir(known) if p.startswith('memtally.')][0]
peak = json.loads(memtally('functions', '--json', f).stdout)['processes'][0]['total_bytes']
mt.eq(json.loads(memtally('functions', '--json', f + '@peak').stdout)['processes'][0]['total_bytes'], peak,
      'FILE@peak: functions at the peak, as with no selector')
last = json.loads(memtally('functions', '--json', '--snapshot', 'last', f).stdout)['processes'][0]['total_bytes']
mt.eq(json.loads(memtally('functions', '--json', f + '@last').stdout)['processes'][0]['total_bytes'], last,
      'FILE@last = --snapshot last')
r = memtally('report', f + '@nope')
mt.check(r.returncode == 1 and "'@nope' is not a snapshot" in r.stderr, 'FILE@nope: a clear error: %r' % r.stderr.strip())
r = memtally('top', '--once', '/nonexistent')
mt.check(r.returncode == 1 and '/nonexistent' in r.stderr, 'top --once /nonexistent: exit 1, named: %r' % r.stderr.strip())
mt.done()
