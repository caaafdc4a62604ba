"""The right answer on any run (issue 40): PyTorch CPU trainers of many
shapes (py/shapes/trainer.py writes them), each run unchanged under
`memtally run` with no option, then `memtally leaks` (and `ranks` for the
DDP job) with no option.  The shapes vary what users vary: the run's length
(40 and 120 steps, 600 with a leak that starts at step 300: `make test` 400
from 200), where the loop
lives (module level, a function that returns, spawn Pool workers that the
pool's terminate() kills with SIGTERM, DataLoader workers, a 2-rank DDP
job), what leaks (a forward's output kept with its graph, a batch cache)
and how the process ends (falling off the end, more work after the loop,
SIGTERM).  On each:
 - a leaking shape names the leaking line (the one ending "# LEAK") as the
   script's frame of row 1, in every process that leaks (the trainer, each
   pool worker, DDP's rank 1), and `ranks` names rank 1;
 - its fixed variant has no suspect row in the script's own lines;
 - a process ended by SIGTERM has its final snapshot (reason signal-*);
 - no process writes more than 2,000 snapshots, and a leak's growth
   window holds at least 24 of them.
A table of the shapes and what each got closes the output.
MT_FULL=1 (`make check`) runs a covering array of the matrix: every pair of
values of any two of length, loop and leak is one shape's (12 shapes, and
DDP's 3), where the whole product is 36 (18 minutes on CI's machine);
MEMTALLY_TRAINERS=all runs the whole product.  The default (`make test`) is
a fast subset that still covers each length, loop, leak and end once."""
import concurrent.futures as cf
import itertools, json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, 'py', 'shapes'))
import trainer  # noqa: E402

PY = '/usr/bin/python3'
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'PYTHONPATH'}
env0['OMP_NUM_THREADS'] = '1'

# (steps, loop, leak, end, leak_from)
FAST = [
    (40, 'module', 'graph', 'exit', 0),
    (60, 'pool', 'graph', 'exit', 0),
    (120, 'workers', 'graph', 'term', 0),
    (400, 'function', 'cache', 'more', 200),  # (make check: 600 from 300)
    (80, 'ddp', 'cache', 'exit', 0),
    (40, 'module', 'none', 'term', 0),
]


LENGTHS = [(40, 0), (120, 0), (600, 300)]
LOOPS = ['module', 'function', 'pool', 'workers']
LEAKS = ['graph', 'cache', 'none']


def covering():
    """(length, loop, leak) with every pair of values of any two of them:
    each loop with each leak once, its length the (loop + leak)-th, so
    each loop meets each length and each leak each length."""
    return [(LENGTHS[(i + j) % 3], loop, leak)
            for i, loop in enumerate(LOOPS) for j, leak in enumerate(LEAKS)]


def full(whole):
    shapes = []
    combos = itertools.product(LENGTHS, LOOPS, LEAKS) if whole else covering()
    for (steps, lf), loop, leak in combos:
        end = {'module': 'term', 'function': 'more', 'pool': 'exit', 'workers': 'exit'}[loop]
        if steps == 120 and loop in ('module', 'workers'):
            end = 'exit' if loop == 'module' else 'term'
        shapes.append((steps, loop, leak, end, lf))
    shapes += [(80, 'ddp', leak, 'exit', 0) for leak in ('graph', 'cache', 'none')]
    return shapes


def sh(*a):
    return subprocess.run(list(a), capture_output=True, text=True, timeout=mt.slack(280))


def name_of(shape):
    steps, loop, leak, end, lf = shape
    return '%s-%d-%s-%s%s' % (loop, steps, leak, end, '-from%d' % lf if lf else '')


def script_frame(sus, script):
    """The line of the script's innermost frame in a suspect's stack."""
    for fr in sus.get('frames', []):
        if fr.get('python') and (fr.get('file') or '').endswith('/' + script):
            return fr['line']
    return None


def run_shape(shape):
    steps, loop, leak, end, lf = shape
    name = name_of(shape)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    script = 'train_%s.py' % name.replace('-', '_')
    path = os.path.join(d, script)
    line = trainer.write(path, steps, loop, leak, end, lf)
    out = os.path.join(d, 'run')
    cmd = [PY, path]
    if loop == 'ddp':
        port = mt.free_port()  # (two DDP shapes may run at once)
        cmd = ['torchrun', '--nproc_per_node', '2', '--redirects', '1', '--tee', '1',
               '--master_port', str(port), path]
    r = subprocess.run([MT, 'run', '--out', out, '--'] + cmd, env=env0, capture_output=True,
                       text=True, timeout=mt.slack(280), cwd=d)
    got = {'shape': name, 'line': line, 'script': script, 'rc': r.returncode,
           'stderr': r.stderr[-600:], 'procs': [], 'ranks': None}
    lk = sh(MT, 'leaks', '--json', out)
    got['leaks_rc'] = lk.returncode
    try:
        procs = json.loads(lk.stdout)['processes']
    except ValueError:
        procs = []
    files = {f.path: f for f in mt.files(out)}
    for p in procs:
        f = files.get(os.path.join(out, os.path.basename(p['file'])))
        snaps = f.snapshots if f else []
        steps_seen = max([s.get('marks', {}).get('step') or 0 for s in snaps] or [0])
        sus = p.get('suspects') or []
        got['procs'].append({
            'pid': p['pid'], 'rank': p.get('rank'), 'steps': steps_seen,
            'nsnaps': len(snaps), 'used': p.get('snapshots_used'),
            'last_reason': snaps[-1]['reason'] if snaps else None,
            'row1_line': script_frame(sus[0], script) if sus else None,
            'script_rows': [s['where'] for s in sus if script_frame(s, script) is not None],
            'row1': sus[0]['where'] if sus else None})
    if loop == 'ddp':
        rk = sh(MT, 'ranks', '--json', out)
        try:
            got['ranks'] = json.loads(rk.stdout)
        except ValueError:
            got['ranks'] = {'error': rk.stdout[-300:] + rk.stderr[-300:]}
    return shape, got


def leakers(shape, got):
    """The processes of a shape that run its loop: those that marked steps
    (the trainer, each pool worker, each rank), and of them the ones whose
    code keeps memory (DDP: rank 1 only)."""
    steps, loop, leak, end, lf = shape
    ran = [p for p in got['procs'] if p['steps'] >= steps * 0.9]
    if loop == 'ddp':
        return ran, [p for p in ran if p['rank'] == 1]
    return ran, ran


def judge(shape, got):
    steps, loop, leak, end, lf = shape
    name = name_of(shape)
    ok = True

    def check(cond, what):
        nonlocal ok
        mt.check(cond, '%s: %s' % (name, what))
        ok = ok and bool(cond)
    want_rc = 0
    check(got['rc'] == want_rc or (end == 'term' and got['rc'] == 143),
          'memtally run exits as the trainer does (%s; %s)' % (got['rc'], got['stderr']))
    check(got['leaks_rc'] == 0, 'leaks exits 0')
    ran, leaking = leakers(shape, got)
    check(len(ran) == (2 if loop in ('pool', 'ddp') else 1),
          'the processes that ran the loop: %d of %d' % (len(ran), len(got['procs'])))
    for p in got['procs']:
        check(p['nsnaps'] <= 2000, 'pid %s wrote %d snapshots (<= 2000)' % (p['pid'], p['nsnaps']))
    for p in ran:
        if end == 'term' or loop == 'pool':
            check((p['last_reason'] or '').startswith('signal-'),
                  'pid %s killed by SIGTERM: its last snapshot is its death (%s)'
                  % (p['pid'], p['last_reason']))
    if leak == 'none':
        for p in ran:
            check(not p['script_rows'], 'fixed: no suspect in the script (pid %s: %s)'
                  % (p['pid'], p['script_rows']))
    else:
        for p in leaking:
            check(p['row1_line'] == got['line'], 'pid %s rank %s: row 1 is the leaking line %s '
                  '(got line %s: %s)' % (p['pid'], p['rank'], got['line'], p['row1_line'], p['row1']))
            check((p['used'] or 0) >= 24, 'pid %s: %s snapshots in the growth window (>= 24)'
                  % (p['pid'], p['used']))
    if loop == 'ddp':
        rk = got['ranks'] or {}
        want = [1] if leak != 'none' else []
        check(rk.get('outliers') == want, 'ranks names the outliers %s (got %s)'
              % (want, json.dumps(rk)[:300]))
    return ok


WHOLE = os.environ.get('MEMTALLY_TRAINERS') == 'all'
shapes = full(WHOLE) if mt.full() or WHOLE else FAST
if mt.full() and not WHOLE:  # the covering array's own property
    trio = {(s[0], s[1], s[2]) for s in shapes if s[1] != 'ddp'}
    for a, b in itertools.combinations(range(3), 2):
        want = {(x, y) for x in [[l[0] for l in LENGTHS], LOOPS, LEAKS][a]
                for y in [[l[0] for l in LENGTHS], LOOPS, LEAKS][b]}
        mt.eq({(t[a], t[b]) for t in trio} >= want, True, 'the shapes cover every pair of factors %d, %d' % (a, b))
case = os.environ.get('MEMTALLY_CASE')
if case:
    shapes = [s for s in shapes if case in name_of(s)]
rows = []
with cf.ThreadPoolExecutor(2) as ex:
    for shape, got in ex.map(run_shape, shapes):
        ok = judge(shape, got)
        ran, leaking = leakers(shape, got)
        rows.append((name_of(shape), got['line'], ','.join(str(p['row1_line']) for p in leaking) or '-',
                     ','.join(str(p['used']) for p in leaking) or '-',
                     ','.join(str(p['nsnaps']) for p in ran) or '-',
                     ','.join(str(p['last_reason']) for p in ran) or '-', 'ok' if ok else 'FAIL'))
print('%-34s %5s %9s %9s %9s %-24s %s' % ('shape', 'leak', 'row1', 'window', 'snapshots', 'last', ''))
for r in rows:
    print('%-34s %5s %9s %9s %9s %-24s %s' % tuple(str(x) for x in r))
mt.done()
