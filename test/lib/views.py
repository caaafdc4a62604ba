"""views.py — checks that every view of memtally gives one answer on a run
with known truths (test_answers, test_answers_torch)."""
import json, os, re, subprocess
import mt

MT = os.environ.get('MT_MEMTALLY') or os.path.join(os.environ.get('MT_BUILD', 'build'), 'memtally')


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
    mt.check(len(where) >= 2 and {leak_a, leak_b} <= {l for l in (leak_a, leak_b) for w in where[:3] if l in w},
             '%s leaks: both leak lines in the first rows: %s' % (name, where[:3]))
    mt.check(not any(spike in w for w in where), '%s leaks: the spike is no leak' % name)
    # top --once: the same suspects first
    r = sh(MT, 'top', '--once', f)
    sus = r.stdout.split('leak suspects', 1)[-1]
    mt.check(r.returncode == 0 and leak_a in sus and leak_b in sus,
             '%s top: its suspects name both leak lines' % name)
    # functions at the peak: every byte live at the peak, once (in exact
    # mode the sites' at-peak bytes add up to each kind's peak)
    fj = json.loads(sh(MT, 'functions', '--json', '--top', '100000', f).stdout)['processes'][0]
    peak = sum(p['at_peak']['peak_bytes'].values())
    mt.check(abs(fj['total_bytes'] - peak) <= peak // 100,
             '%s functions: at the peak by default, the kinds\' peaks in all (%d, peaks %d)'
             % (name, fj['total_bytes'], peak))
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
