"""`make bench`, the snapshot cadence (MEMTALLY_CADENCE): what a step
snapshot at every step at first, then every 2nd, 4th, ... costs a real
trainer, and how big a long run's file grows.

 1. test/bench/torch_train.py, 300 steps, under `memtally run` (the hook
    marks the optimizer's steps) with the cadence (the default) and with
    MEMTALLY_CADENCE=0 (no step snapshot), beside bare: wall time of the
    whole process, median alternating rounds (BENCH_ROUNDS, default 3).
 2. The same trainer for 100,000 steps under the default: the file's size
    and its snapshots.
Prints a table and writes test/bench/RESULTS-cadence.md.  BENCH_QUICK=1:
30 and 2,000 steps, one round, no file."""
import glob, json, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
MT = os.path.join(ROOT, 'build', 'memtally')
PY = '/usr/bin/python3'
TRAIN = os.path.join(ROOT, 'test', 'bench', 'torch_train.py')
QUICK = os.environ.get('BENCH_QUICK') == '1'
ROUNDS = 1 if QUICK else int(os.environ.get('BENCH_ROUNDS', '3'))
STEPS, LONG = (30, 2000) if QUICK else (300, 100000)
TMP = tempfile.mkdtemp(prefix='mtcadence.')
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'PYTHONPATH'}
env0['OMP_NUM_THREADS'] = '1'


def run(config, steps, out):
    env = dict(env0)
    cmd = [PY, TRAIN, str(steps)]
    if config != 'bare':
        if config == 'no step snapshots':
            env['MEMTALLY_CADENCE'] = '0'
        cmd = [MT, 'run', '--out', out, '--'] + cmd
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        sys.exit('%s failed: %s' % (config, r.stderr[-500:]))
    return wall, r.stdout


def file_figures(out):
    f = glob.glob(os.path.join(out, 'memtally.*.jsonl.zst'))[0]
    d = subprocess.run(['zstd', '-dcq', f], capture_output=True, check=True).stdout
    n = sum(1 for line in d.splitlines() if line.startswith(b'{"type":"snapshot"'))
    steps = sum(1 for line in d.splitlines() if b'"reason":"step"' in line)
    return os.path.getsize(f), len(d), n, steps


configs = ['bare', 'no step snapshots', 'cadence']
walls = {c: [] for c in configs}
figs = {}
for r in range(ROUNDS + (0 if QUICK else 1)):  # a warm-up round first
    for c in configs:
        out = os.path.join(TMP, '%s-%d' % (c.replace(' ', '_'), r))
        w, _ = run(c, STEPS, out)
        if QUICK or r:
            walls[c].append(w)
        if c != 'bare':
            figs[c] = file_figures(out)
long_out = os.path.join(TMP, 'long')
lw, _ = run('cadence', LONG, long_out)
lsize, lraw, lsnaps, lsteps = file_figures(long_out)

rows = ['| run | wall (median of %d) | vs bare | file | snapshots (step) |' % ROUNDS,
        '|---|---|---|---|---|']
base = statistics.median(walls['bare'])
for c in configs:
    m = statistics.median(walls[c])
    f = figs.get(c)
    rows.append('| %d steps, %s | %.2f s | %.3fx | %s | %s |' % (
        STEPS, c, m, m / base, '%.1f MB' % (f[0] / 1e6) if f else '-',
        '%d (%d)' % (f[2], f[3]) if f else '-'))
rows.append('| %d steps, cadence | %.1f s | - | %.1f MB (%.0f MB of JSON) | %d (%d) |' % (
    LONG, lw, lsize / 1e6, lraw / 1e6, lsnaps, lsteps))
text = '\n'.join(rows)
print(text)
if not QUICK:
    with open(os.path.join(ROOT, 'test', 'bench', 'RESULTS-cadence.md'), 'w') as f:
        f.write('# The snapshot cadence: cost and file size\n\n'
                'test/bench/cadence.py (`make bench`), %s, on this 2-core machine: '
                'test/bench/torch_train.py (a 2-layer MLP, Debian torch %s, CPU) under '
                '`memtally run` with no option (the hook marks each optimizer step; the '
                'cadence snapshots every step at first), with MEMTALLY_CADENCE=0, and bare; '
                'rounds alternate after a warm-up.\n\n%s\n' % (
                    time.strftime('%Y-%m-%d'),
                    subprocess.run([PY, '-c', 'import torch; print(torch.__version__)'],
                                   capture_output=True, text=True).stdout.strip(), text))
