"""`make bench`, MEMTALLY_PROMETHEUS (issue 55): what writing the .prom
file costs.

 1. test/bench/prombench.c: N distinct call sites (1,000, 100,000 and
    1,000,000), each holding a block, then two requested snapshots and the
    exit, with MEMTALLY_PROMETHEUS_INTERVAL=0 (the file written at every
    snapshot): the time of one write of the file (its
    memtally_prometheus_write_seconds: the call sites' scan for the top
    lines included) beside the time of the snapshot it follows, and the
    series in the file, which do not grow with the call sites.
 2. test/bench/torch_train.py, 300 steps, under `memtally run` (the
    cadence: a snapshot at every step at first), without --prometheus,
    with it (the default 5 s between writes), and with
    MEMTALLY_PROMETHEUS_INTERVAL=0 (a write at every snapshot: the worst
    case); wall time and the median step, alternating rounds after a
    warm-up (BENCH_ROUNDS, default 3).
Prints the tables and writes test/bench/RESULTS-prometheus.md.
BENCH_QUICK=1: 1,000 sites, 30 steps, one round, no file."""
import glob, os, re, statistics, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
B = os.path.join(ROOT, 'build')
MT = os.path.join(B, 'memtally')
SHIM = os.path.join(B, 'libmemtally.so')
PY = '/usr/bin/python3'
TRAIN = os.path.join(ROOT, 'test', 'bench', 'torch_train.py')
QUICK = os.environ.get('BENCH_QUICK') == '1'
ROUNDS = 1 if QUICK else int(os.environ.get('BENCH_ROUNDS', '3'))
STEPS = 30 if QUICK else 300
TMP = tempfile.mkdtemp(prefix='mtprom.')
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'PYTHONPATH'}
env0['OMP_NUM_THREADS'] = '1'

def sample(text, name):
    m = re.search(r'^%s\{[^}]*\} (\S+)$' % name, text, re.M)
    return float(m.group(1)) if m else float('nan')

prog = os.path.join(TMP, 'prombench')
subprocess.run(['gcc', '-O1', '-g', '-fno-omit-frame-pointer', '-o', prog,
                os.path.join(ROOT, 'test/bench/prombench.c'), '-ldl'], check=True)
rows1 = ['| call sites | .prom write | series in it | the snapshot before it (a delta: every site read) |',
         '|---|---|---|---|']
for n in ([1000] if QUICK else [1000, 100000, 1000000]):
    d = os.path.join(TMP, 'sites%d' % n)
    env = dict(env0, LD_PRELOAD=SHIM, MEMTALLY_OUT=d, MEMTALLY_PROMETHEUS=d + '.prom',
               MEMTALLY_PROMETHEUS_INTERVAL='0', MEMTALLY_CADENCE='0', MEMTALLY_COMPRESS='0')
    subprocess.run([prog, str(n)], env=env, check=True)
    text = open(glob.glob(os.path.join(d + '.prom', '*.prom'))[0]).read()
    series = sum(1 for l in text.splitlines() if l and not l.startswith('#'))
    # the exit's file: the write after the "measured" snapshot, and that
    # snapshot's own time (the exit snapshot's last_write_ns)
    snap = open(glob.glob(os.path.join(d, 'memtally.*.jsonl'))[0]).read().splitlines()[-1]
    last = int(re.search(r'"last_write_ns":(\d+)', snap).group(1))
    rows1.append('| %d | %.2f ms | %d | %.1f ms |' % (n, sample(text, 'memtally_prometheus_write_seconds') * 1e3,
                                                     series, last / 1e6))

configs = [('memtally run', []), ('--prometheus (5 s)', ['--prometheus', None]),
           ('--prometheus, a write every snapshot', ['--prometheus', None, '--set', 'PROMETHEUS_INTERVAL=0'])]
walls = {c: [] for c, _ in configs}
steps = {c: [] for c, _ in configs}
writes = {}
for r in range(ROUNDS + (0 if QUICK else 1)):
    for ci, (c, extra) in enumerate(configs):
        out = os.path.join(TMP, 'train-%d-%d' % (ci, r))
        args = [out + '.prom' if a is None else a for a in extra]
        t0 = time.perf_counter()
        p = subprocess.run([MT, 'run', '--out', out] + args + ['--', PY, TRAIN, str(STEPS)], env=env0,
                           capture_output=True, text=True)
        w = time.perf_counter() - t0
        if p.returncode:
            sys.exit('%s failed: %s' % (c, p.stderr[-500:]))
        if QUICK or r:
            walls[c].append(w)
            steps[c].append(float(re.search(r'step_median_ms (\S+)', p.stdout).group(1)))
        if args:
            f = glob.glob(os.path.join(out + '.prom', '*.prom'))
            writes[c] = sample(open(f[0]).read(), 'memtally_prometheus_write_seconds') if f else float('nan')
base_w, base_s = statistics.median(walls['memtally run']), statistics.median(steps['memtally run'])
rows2 = ['| %d steps | wall (median of %d) | vs without | median step | vs without | last .prom write |' % (STEPS, ROUNDS),
         '|---|---|---|---|---|---|']
for c, _ in configs:
    mw, ms = statistics.median(walls[c]), statistics.median(steps[c])
    rows2.append('| %s | %.2f s | %.3fx | %.3f ms | %.3fx | %s |' % (
        c, mw, mw / base_w, ms, ms / base_s, '%.2f ms' % (writes[c] * 1e3) if c in writes else '-'))
text = '\n'.join(rows1) + '\n\n' + '\n'.join(rows2)
print(text)
if not QUICK:
    with open(os.path.join(ROOT, 'test', 'bench', 'RESULTS-prometheus.md'), 'w') as f:
        f.write('# MEMTALLY_PROMETHEUS: what the .prom file costs\n\n'
                'test/bench/prom.py (`make bench`), %s, on this 2-core shared machine (noisy: ratios '
                'within about 1.1x are noise).\n\n'
                'One write of the file (test/bench/prombench.c, MEMTALLY_PROMETHEUS_INTERVAL=0): its '
                'time is memtally_prometheus_write_seconds, the call sites\' scan for the top lines '
                'included; the series it holds do not grow with the call sites (the bound: 13 of the '
                'process, two a GPU, at most 10 lines).\n\n%s\n\n'
                'A trainer (test/bench/torch_train.py: a 2-layer MLP, Debian torch %s, CPU) under '
                '`memtally run` (the cadence: a step snapshot at every step at first, written by the '
                'stepping thread, with the .prom file after it when due): without --prometheus, with '
                'it at the default 5 s between writes, and at a write after every snapshot; rounds '
                'alternate after a warm-up.\n\n%s\n' % (
                    time.strftime('%Y-%m-%d'), '\n'.join(rows1),
                    subprocess.run([PY, '-c', 'import torch; print(torch.__version__)'],
                                   capture_output=True, text=True).stdout.strip(), '\n'.join(rows2)))
