"""One answer in every view (issue 31): programs with known truths, run under
`memtally run` with no options, and every view asked with no options.

  c:      prog_truths.c: 4 threads stepping together; leak A (64 KiB a step
          at keep_a's malloc), leak B (192 KiB a step at keep_b's), a 32 MiB
          spike at step 30 (make_spike's malloc, freed at once, on a thread
          with its own share of the call-site figures, and no new peak of
          the process: a 128 MiB buffer before the steps was), all threads
          churning.
  torch:  train_truths.py: PyTorch on CPU with a DataLoader (2 workers);
          leak A keeps every loss's graph (line FORWARD's activations), leak
          B keeps every batch (line CACHE, 256 KiB a step), a 32 MiB spike at
          line SPIKE at step 30.
  ddp:    torch_ddp.py under torchrun, 2 ranks, rank 1 leaking.

Checks: report's rows at the growth window's end and leaks' first rows name
both leak lines;
report names the spike with its size and step (exact: 32 MiB with 4
threads); top, functions, diff, flame and pprof agree with report at the
peak; ranks flags the leaking rank."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=kw.pop('timeout', 300), **kw)


def line_of(path, tag):
    return [i + 1 for i, l in enumerate(open(path)) if tag in l][0]


def main_proc(d):
    """The report --json object of the process with the most snapshots."""
    r = sh(MT, 'report', '--json', '--top', '50', d)
    mt.eq(r.returncode, 0, 'report exit code (%s)' % r.stderr[-200:])
    return max(json.loads(r.stdout)['processes'], key=lambda p: len(p['snapshots']))


def check_views(name, d, src, leak_a, leak_b, spike, spike_bytes, spike_step):
    """leak_a, leak_b, spike: 'file:line' that must name those rows."""
    p = main_proc(d)
    f = p['file']
    lk = json.loads(sh(MT, 'leaks', '--json', f).stdout)['processes'][0]
    end = lk['window']['to_seq']
    rows = [c['where'] for c in json.loads(sh(MT, 'report', '--json', '--snapshot', str(end), f).stdout)
            ['processes'][0]['last']['callsites']]
    for tag, loc in (('leak A', leak_a), ('leak B', leak_b)):
        mt.check(any(loc in w for w in rows[:4]),
                 '%s report --snapshot %d (the growth window\'s end): %s (%s) in the first rows: %s'
                 % (name, end, tag, loc, rows[:4]))
    sp = [s for s in p['spikes'] if spike in s['row']]
    mt.check(sp and sp[0]['peak_bytes'] == spike_bytes,
             '%s report: the spike at %s, %d bytes: %s' % (name, spike, spike_bytes,
                                                          [(s['row'], s['peak_bytes']) for s in p['spikes']]))
    if spike_step is not None:
        mt.eq(sp[0]['step'] if sp else None, spike_step, '%s report: the spike\'s step' % name)
    r = sh(MT, 'report', f)
    mt.check(re.search(r'spikes.*\n.*\n\s+32\.0 MiB .*%s' % re.escape(spike), r.stdout) is not None,
             '%s report text: the spikes table names %s with 32.0 MiB' % (name, spike))
    # leaks: both leak lines first
    where = [s['where'] for s in lk['suspects']]
    mt.check(len(where) >= 2 and {leak_a, leak_b} <= {l for l in (leak_a, leak_b) for w in where[:2] if l in w},
             '%s leaks: both leak lines in the first two rows: %s' % (name, where[:3]))
    mt.check(not any(spike in w for w in where), '%s leaks: the spike is no leak' % name)
    # top --once: the same suspects first
    r = sh(MT, 'top', '--once', f)
    sus = r.stdout.split('leak suspects', 1)[-1]
    mt.check(r.returncode == 0 and leak_a in sus and leak_b in sus,
             '%s top: its suspects name both leak lines' % name)
    # functions at the peak: the rows' bytes by function
    fj = json.loads(sh(MT, 'functions', '--json', '--top', '100000', f).stdout)['processes'][0]
    mt.eq(fj['total_bytes'], sum(c['at_peak_bytes'] for c in
                                 json.loads(sh(MT, 'report', '--json', '--top', '1000000', f).stdout)
                                 ['processes'][0]['at_peak']['callsites']),
          '%s functions: at the peak by default, the same total as report\'s at-peak table' % name)
    # diff: the growth window's start against its end names the leaks first
    first = lk['window']['from_seq']
    dj = json.loads(sh(MT, 'diff', '--json', '%s@%d' % (f, first), '%s@%d' % (f, end)).stdout)['pairs'][0]
    top2 = [c['where'] for c in dj['callsites'][:3]]
    mt.check(any(leak_a in w for w in top2) and any(leak_b in w for w in top2),
             '%s diff @%d @%d (the growth window): both leak lines in the first rows: %s' % (name, first, end, top2))
    # flame --folded: at the peak, the same bytes as report's at-peak table
    r = sh(MT, 'flame', '--folded', f)
    total = sum(int(l.rsplit(' ', 1)[1]) for l in r.stdout.splitlines() if l.strip())
    mt.eq(total, fj['total_bytes'], '%s flame --folded: at the peak by default (bytes)' % name)
    return p


# ---- the C program: exact with 4 threads ----
if mt.case('c'):
    d = os.path.join(OUT, 'c')
    r = sh(MT, 'run', '--out', d, '--', os.path.join(B, 'test', 'prog_truths'))
    mt.eq(r.returncode, 0, 'c: exit code')
    src = os.path.join(HERE, 'prog_truths.c')
    p = check_views('c', d, src, 'keep_a (prog_truths.c:%d)' % line_of(src, 'LEAK_A'),
                    'keep_b (prog_truths.c:%d)' % line_of(src, 'LEAK_B'),
                    'make_spike (prog_truths.c:%d)' % line_of(src, '/* SPIKE */'), 32 << 20, 30)
    mt.eq(p['snapshots'][-1]['reason'], 'exit', 'c: the exit snapshot')
    # leaks per step: the planted sizes
    lk = json.loads(sh(MT, 'leaks', '--json', d).stdout)['processes'][0]
    per = {s['function']: s['bytes_per_step'] for s in lk['suspects']}
    mt.eq((per.get('keep_a'), per.get('keep_b')), (65536.0, 196608.0), 'c leaks: 64 KiB and 192 KiB a step')

mt.done()
