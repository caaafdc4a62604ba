"""The real parts (issue 55): node_exporter's textfile collector and
Prometheus (Debian's prometheus-node-exporter and prometheus), started by
this test on free loopback ports (127.0.0.1 only), a 1 s scrape, the
rules of scripts/prometheus/memtally-rules.yml with their windows cut to
seconds; a two-rank job under `memtally run --prometheus DIR` (a shell
launcher starting prog_promleak with RANK=0 and RANK=1; rank 1 leaks).
Through Prometheus' HTTP API: each rank's memtally_heap_live_bytes equals
the figure of the snapshot memtally_last_snapshot_seq names in that
rank's file, at every moment asked; rank 1's series rises and rank 0's
does not; the alert expression (and ALERTS) holds for rank 1 only;
headless Chromium renders Prometheus' graph of the two ranks (case c)
and the test reads it: its legend, rank 1's line rising, rank 0's flat;
promtool check metrics passes on every .prom file, and the collector
reports no scrape error.  Every process it starts is in a process group
of its own, killed at the end whatever happens; the test is bounded in
time (DEADLINE: 100 s for c, 180 s for torch)."""
import html, json, os, re, signal, socket, subprocess, sys, time, urllib.parse, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
MEMTALLY = os.path.join(B, 'memtally')
PROG = os.path.join(B, 'test', 'prog_promleak')
RULES = os.path.join(ROOT, 'scripts', 'prometheus', 'memtally-rules.yml')
DEADLINE = time.time() + 100  # each case's (one_job)
RUN_SECS = 24

def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p

procs = []

def start(args, log, **kw):
    f = open(log, 'w')
    p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, **kw)
    procs.append(p)
    return p

def kill_all():
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()

def wait_url(url, what, secs=30):
    t0 = time.time()
    while time.time() - t0 < secs and time.time() < DEADLINE:
        try:
            get(url, 2)
            return True
        except Exception:
            time.sleep(0.2)
    print('  %s did not answer at %s' % (what, url))
    return False

def query(prom, expr, at=None):
    q = {'query': expr}
    if at is not None:
        q['time'] = '%.3f' % at
    r = json.loads(get('http://127.0.0.1:%d/api/v1/query?%s' % (prom, urllib.parse.urlencode(q))))
    assert r['status'] == 'success', r
    return r['data']['result']

def by_rank(res):
    return {x['metric'].get('rank'): float(x['value'][1]) for x in res if 'rank' in x['metric']}

if not all(subprocess.run(['sh', '-c', 'command -v ' + c], capture_output=True).returncode == 0
           for c in ('prometheus', 'prometheus-node-exporter', 'promtool')):
    mt.check(False, 'prometheus, prometheus-node-exporter and promtool installed (scripts/setup-deps.sh)')
    mt.done()


def graph(pr, name):
    """Headless Chromium (test/lib/pages.py: a fresh profile, no network
    but loopback) on Prometheus' own graph page of the two ranks' heap
    over the last 2 minutes: the DOM it built (kept as graph.html, with a
    screenshot graph.png) has a legend of the two ranks, and the line
    drawn in rank 1's colour rises while rank 0's stays flat."""
    import pages
    if not pages.CHROME:
        mt.check(False, 'chromium is not installed (scripts/setup-deps.sh installs it)')
        return
    url = 'http://127.0.0.1:%d/graph?%s' % (pr, urllib.parse.urlencode({
        'g0.expr': 'memtally_heap_live_bytes{job="it55",rank!=""}', 'g0.tab': '0', 'g0.range_input': '2m'}))
    d = os.path.join(OUT, name)
    pages.chrome(url, '--window-size=1200,900', '--virtual-time-budget=15000',
                 '--screenshot=' + os.path.join(d, 'graph.png'))
    dom = pages.chrome(url, '--window-size=1200,900', '--virtual-time-budget=15000', '--dump-dom').stdout
    with open(os.path.join(d, 'graph.html'), 'w') as f:
        f.write(dom)
    mt.check(os.path.getsize(os.path.join(d, 'graph.png')) > 10000 if os.path.exists(os.path.join(d, 'graph.png'))
             else False, '%s: Chromium\'s screenshot of the graph (graph.png)' % name)
    legend = re.findall(r'<div class="swatch" style="background-color: rgb\((\d+), (\d+), (\d+)\);"></div>'
                        r'<span class="label">([^<]*)</span>', dom)
    colour = {}
    for r_, g_, b_, label in legend:
        m = re.search(r'rank="(\d+)"', html.unescape(label))
        if m:
            colour[m.group(1)] = '#%02x%02x%02x' % (int(r_), int(g_), int(b_))
    mt.eq(sorted(colour), ['0', '1'], '%s: the graph\'s legend: the two ranks' % name)
    ys = {}
    for stroke, dpath in [(m.group(2), m.group(1)) for m in
                          re.finditer(r'<path class="path" d="([^"]*)" fill="none" stroke="(#[0-9a-f]{6})"', dom)]:
        ys[stroke] = [float(y) for y in re.findall(r'[ML][-0-9.e]+,([-0-9.e]+)', dpath)]
    y1, y0 = ys.get(colour.get('1'), []), ys.get(colour.get('0'), [])
    # SVG y grows downwards: a rising line's y falls
    mt.check(len(y1) > 5 and y1[0] - min(y1) > 150,
             '%s: in the graph, rank 1\'s line rises (%d points, %.0f px)' % (name, len(y1), y1[0] - min(y1) if y1 else 0))
    mt.check(len(y0) > 5 and max(y0) - min(y0) < 25,
             '%s: rank 0\'s stays flat (%.0f px)' % (name, max(y0) - min(y0) if y0 else -1))

def one_job(name, cmd, flat_abs, nproms, min_rise, secs, extra=(), draw=False):
    """Run cmd (after `memtally run ... --`) against a fresh node_exporter
    and Prometheus; the checks above.  Over the middle half of the run
    (past start-up, before teardown frees what was kept) rank 1's series
    rises by min_rise at least, mostly step on step, and rank 0's varies
    by less than flat_abs (None: a quarter of rank 1's rise there);
    nproms: the .prom files the job leaves (None: at least 3).  secs: the
    case's time bound; extra: more `memtally run` options."""
    global DEADLINE
    DEADLINE = time.time() + secs
    d = os.path.join(OUT, name)
    tf, out = os.path.join(d, 'textfile'), os.path.join(d, 'run')
    os.makedirs(tf, exist_ok=True)
    ne, pr = free_port(), free_port()
    start(['prometheus-node-exporter', '--web.listen-address=127.0.0.1:%d' % ne,
           '--collector.disable-defaults', '--collector.textfile',
           '--collector.textfile.directory=' + tf], os.path.join(d, 'node_exporter.log'))
    # the shipped rules, their windows cut to seconds
    rules = open(RULES).read().replace('[15m]', '[20s]')
    rules = re.sub(r'for: \d+m', 'for: 0s', rules)
    with open(os.path.join(d, 'rules.yml'), 'w') as f:
        f.write(rules)
    with open(os.path.join(d, 'prometheus.yml'), 'w') as f:
        f.write('global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n'
                'rule_files: [%s]\n'
                'scrape_configs:\n  - job_name: memtally\n    honor_labels: true\n'
                '    static_configs:\n      - targets: ["127.0.0.1:%d"]\n'
                % (os.path.join(d, 'rules.yml'), ne))
    start(['prometheus', '--config.file=' + os.path.join(d, 'prometheus.yml'),
           '--storage.tsdb.path=' + os.path.join(d, 'tsdb'),
           '--web.listen-address=127.0.0.1:%d' % pr, '--log.level=warn'],
          os.path.join(d, 'prometheus.log'))
    up = wait_url('http://127.0.0.1:%d/metrics' % ne, 'node_exporter') and \
        wait_url('http://127.0.0.1:%d/-/ready' % pr, 'prometheus', 60)
    mt.check(up, '%s: node_exporter and prometheus answer on 127.0.0.1' % name)
    if not up:
        return
    env = dict(os.environ, MEMTALLY_JOB='it55')
    job = start([MEMTALLY, 'run', '--out', out, '--prometheus', tf, '--interval', '0.25',
                 '--set', 'PROMETHEUS_INTERVAL=0.5'] + list(extra) + ['--'] + cmd, os.path.join(d, 'job.log'), env=env)
    t_start = time.time()
    pairs = {'0': [], '1': []}  # (seq, heap live) as Prometheus answers
    expr_ranks, firing = [], []
    both_since = None
    # the alert's own expression, as the rules file has it
    expr = re.search(r'- alert: MemtallyRankHeapGrowing\s+expr: \|\n(.*?)\n\s+for:', rules,
                     re.S).group(1)
    while job.poll() is None and time.time() < DEADLINE:
        time.sleep(1)
        now = time.time() - 1  # a moment Prometheus has scraped
        heap = by_rank(query(pr, 'memtally_heap_live_bytes{job="it55"}', now))
        seq = by_rank(query(pr, 'memtally_last_snapshot_seq{job="it55"}', now))
        run = by_rank(query(pr, 'memtally_running{job="it55"}', now))
        for r in ('0', '1'):
            if r in heap and r in seq and run.get(r) == 1:
                pairs[r].append((int(seq[r]), heap[r]))
        if run.get('0') == 1 and run.get('1') == 1:
            both_since = both_since or time.time()
        if both_since and time.time() - both_since > 8 and run.get('0') == 1 and run.get('1') == 1:
            expr_ranks.append(sorted(by_rank(query(pr, expr))))
            firing.append(sorted(by_rank(query(pr, 'ALERTS{alertname="MemtallyRankHeapGrowing",'
                                                   'alertstate="firing"}'))))
    if job.poll() is None:
        mt.check(False, '%s: the job ended within the deadline' % name)
        return
    mt.eq(job.returncode, 0, '%s: the job ran (%s)' % (name, open(os.path.join(d, 'job.log')).read()[-300:]))
    time.sleep(2.5)  # the exit files scraped
    fs = {str(f.header['rank']): f for f in mt.files(out) if f.header['rank'] is not None}
    mt.eq(sorted(fs), ['0', '1'], '%s: a memtally file for each rank' % name)
    # each moment asked: the figure of the snapshot it names, in that rank's file
    for r in ('0', '1'):
        snaps = {s['seq']: s for s in fs[r].snapshots} if r in fs else {}
        bad = [(q, v, snaps.get(q, {}).get('heap', {}).get('live_bytes')) for q, v in pairs[r]
               if snaps.get(q, {}).get('heap', {}).get('live_bytes') != v]
        mt.check(len(set(pairs[r])) >= 8 and not bad,
                 '%s: rank %s: heap live bytes in Prometheus = its snapshot file\'s at %d moments '
                 '(%d distinct snapshots; wrong: %r)' % (name, r, len(pairs[r]), len(set(pairs[r])), bad[:3]))
    # the series over the run, while both ran
    rng = 'http://127.0.0.1:%d/api/v1/query_range?%s' % (pr, urllib.parse.urlencode({
        'query': 'memtally_heap_live_bytes{job="it55"} and on (job, rank, host, pid) memtally_running == 1',
        'start': '%.3f' % t_start, 'end': '%.3f' % time.time(), 'step': '1'}))
    series = {x['metric'].get('rank'): [float(v) for t, v in x['values']]
              for x in json.loads(get(rng))['data']['result'] if 'rank' in x['metric']}
    s1, s0 = series.get('1', []), series.get('0', [])
    h1, h0 = s1[len(s1) // 4:3 * len(s1) // 4], s0[len(s0) // 4:3 * len(s0) // 4]
    rise = h1[-1] - h1[0] if h1 else 0
    ups = sum(1 for a, b in zip(h1, h1[1:]) if b > a) / max(1, len(h1) - 1)
    mt.check(len(s1) >= 10 and ups >= 0.8 and rise > min_rise,
             '%s: rank 1\'s series rises (%d points; %.1f MiB over the middle half, %d%% of its steps up)'
             % (name, len(s1), rise / 2**20, 100 * ups))
    lim = flat_abs if flat_abs is not None else rise / 4
    mt.check(len(s0) >= 10 and max(h0) - min(h0) < lim,
             '%s: rank 0\'s does not (range %d bytes over the middle half, < %d)'
             % (name, max(h0) - min(h0) if h0 else -1, lim))
    mt.check(['1'] in expr_ranks and all(x in ([], ['1']) for x in expr_ranks),
             '%s: the alert expression holds for rank 1 only (%r)' % (name, expr_ranks))
    mt.check(['1'] in firing and all(x in ([], ['1']) for x in firing),
             '%s: MemtallyRankHeapGrowing fires for rank 1 only (%r)' % (name, firing))
    # the exit files: kept, running 0
    end = by_rank(query(pr, 'memtally_running{job="it55"}'))
    mt.eq(end, {'0': 0.0, '1': 0.0}, '%s: after the job: each rank\'s file says running 0' % name)
    files = [os.path.join(tf, n) for n in os.listdir(tf) if n.endswith('.prom')]
    ok = all(subprocess.run(['promtool', 'check', 'metrics'], stdin=open(p), capture_output=True)
             .returncode == 0 for p in files)
    mt.check((len(files) == nproms if nproms else len(files) >= 3) and ok,
             '%s: promtool check metrics: each of the %d .prom files' % (name, len(files)))
    ne_metrics = get('http://127.0.0.1:%d/metrics' % ne)
    mt.check('node_textfile_scrape_error 0' in ne_metrics, '%s: node_exporter: no textfile scrape error' % name)
    if draw:
        graph(pr, name)

try:
    if mt.case('c'):
        # a launcher shell and two ranks, rank 1 leaking 512 KiB a tick
        one_job('c', ['/bin/sh', '-c', 'RANK=0 LOCAL_RANK=0 %s %d 512 & RANK=1 LOCAL_RANK=1 %s %d 512 & wait'
                      % (PROG, RUN_SECS, PROG, RUN_SECS)], 1 << 20, 3, 10 << 20, 100, draw=True)
        kill_all()
    if mt.case('torch'):
        # torchrun (its --redirects 1 --tee 1: test_torch.py says why), 250
        # steps of 0.06 s at least, rank 1 keeping each loss with its graph
        # (about 90 KiB a step); heap sampled (256K) as test_torch.py does:
        # three torch imports under the shim on a loaded 2-core machine
        ddp = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'torch_ddp.py')
        one_job('torch', ['torchrun', '--nproc_per_node', '2', '--redirects', '1', '--tee', '1',
                          '--master_port', str(29500 + os.getpid() % 400), ddp, '1', '250', '0.06'],
                None, None, 4 << 20, 180, ['--sample', '256K'])
finally:
    kill_all()
    left = []
    for p in procs:  # each group empty: the ranks and the launcher too
        try:
            os.killpg(p.pid, 0)
            left.append(p.pid)
        except ProcessLookupError:
            pass
    mt.eq(left, [], 'nothing it started outlives it (no process left in its groups)')
mt.done()
