"""MEMTALLY_PROMETHEUS (issue 55): each process keeps an exposition file for
node_exporter's textfile collector, written whole (a temporary name, then
renamed), its figures those of a snapshot in its memtally file, at most
every MEMTALLY_PROMETHEUS_INTERVAL, with memtally_running 0 in the file
its last snapshot leaves (exit, or a death by signal).  promtool check
metrics passes on every version of every file seen.
Cases: file (the shim's file, live and at exit), death, worker (a fork
child of Python is role "worker"), top (the bound on series), run
(memtally run --prometheus), metrics (memtally metrics: the same series
from the files), cuda (per-GPU series, a fake driver), samefirst (1024
sites, one innermost frame: one line series, summed), exec (two images
of one pid: memtally metrics gives the later one's series, once)."""
import glob, os, re, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
PROG = os.path.join(B, 'test', 'prog_promleak')
MEMTALLY = os.path.join(B, 'memtally')

LINE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$')

DUPS = []  # a series written twice in one exposition (node_exporter refuses it)

def parse(text):
    """{(name, frozenset(labels)): value} of an exposition; asserts every
    line is a comment or a sample; a series seen twice goes to DUPS."""
    out = {}
    for l in text.splitlines():
        if l.startswith('#'):
            continue
        m = LINE.match(l)
        assert m, 'not a sample: %r' % l
        labels = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        k = (m.group(1), frozenset(labels.items()))
        if k in out:
            DUPS.append(l)
        out[k] = float(m.group(3))
    return out

def value(samples, name, **want):
    got = [v for (n, ls), v in samples.items() if n == name and
           all((k, str(x)) in ls for k, x in want.items())]
    return got[0] if len(got) == 1 else None

def labels_of(samples, name):
    for (n, ls), v in samples.items():
        if n == name:
            return dict(ls)
    return None

def promtool_check(text, what):
    r = subprocess.run(['promtool', 'check', 'metrics'], input=text, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
    return r.returncode == 0

def env(out, prom, **vars):
    e = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, MEMTALLY_PROMETHEUS=prom)
    e.update({k if k in ('RANK', 'LOCAL_RANK') else 'MEMTALLY_' + k: v for k, v in vars.items()})
    return e

def proms(d):
    return sorted(glob.glob(os.path.join(d, '*.prom')))

if mt.case('file'):
    out, prom = os.path.join(OUT, 'file'), os.path.join(OUT, 'file.prom.d')
    p = subprocess.Popen([PROG, '4', '512'], env=env(out, prom, RANK='1', LOCAL_RANK='1',
                         JOB='job "55"', INTERVAL='0.2', PROMETHEUS_INTERVAL='0.5'),
                         stdout=subprocess.PIPE, text=True)
    seen, names, bad = {}, set(), []
    while p.poll() is None:
        for f in os.listdir(prom) if os.path.isdir(prom) else []:
            names.add(f)
        for f in proms(prom):
            try:
                t = open(f).read()
            except FileNotFoundError:
                continue
            if not t.endswith('\n') or 'memtally_running' not in t:
                bad.append(t)
            if t not in seen.values():
                seen[len(seen)] = t
        time.sleep(0.02)
    mt.eq(p.returncode, 0, 'the program ran')
    mt.eq(bad, [], 'every read of the file found it whole')
    mt.check(all(n.endswith('.prom') or (n.startswith('.') and n.endswith('.prom.tmp'))
                 for n in names), 'only the file and its hidden temporary name: %r' % sorted(names))
    files = proms(prom)
    mt.eq(len(files), 1, 'one .prom file for one process')
    fs = mt.files(out)
    mt.eq(len(fs), 1, 'one memtally file')
    f = fs[0]
    pid = f.header['pid']
    mt.check(files and files[0].endswith('_%d.prom' % pid), 'named memtally_<host>_<pid>.prom')
    last = open(files[0]).read()
    s = parse(last)
    mt.check(promtool_check(last, 'exit'), 'promtool check metrics: the exit file')
    mt.check(all(promtool_check(t, 'live') for t in seen.values()),
             'promtool check metrics: each of the %d versions seen while it ran' % len(seen))
    fin = f.final()
    mt.eq(fin['reason'], 'exit', 'the last snapshot is the exit')
    mt.eq(value(s, 'memtally_running'), 0.0, 'memtally_running 0 in the exit file')
    mt.eq(value(s, 'memtally_last_snapshot_seq'), float(fin['seq']), 'figures of the exit snapshot')
    mt.eq(value(s, 'memtally_heap_live_bytes'), float(fin['heap']['live_bytes']),
          'heap live bytes: the exit snapshot\'s')
    mt.eq(value(s, 'memtally_heap_peak_bytes'), float(fin['heap']['peak_bytes']),
          'heap peak bytes: the exit snapshot\'s')
    mt.check(abs(value(s, 'memtally_last_snapshot_timestamp_seconds') - fin['wall_ns'] / 1e9) < 1e-5,
             'timestamp: the exit snapshot\'s wall time')
    mt.eq(value(s, 'memtally_snapshots_total'), float(len(f.snapshots)), 'snapshots_total')
    mt.eq(value(s, 'memtally_dropped_snapshots_total'), 0.0, 'dropped_snapshots_total')
    mt.eq(value(s, 'memtally_step'), 39.0, 'the step mark')
    mt.check((value(s, 'memtally_rss_bytes') or 0) > 4 << 20, 'rss')
    ls = labels_of(s, 'memtally_heap_live_bytes') or {}
    mt.eq((ls.get('job'), ls.get('rank'), ls.get('local_rank'), ls.get('pid'), ls.get('role')),
          ('job \\"55\\"', '1', '1', str(pid), 'main'), 'labels (the job\'s quotes escaped)')
    mt.check(ls.get('host'), 'host label')
    for t in ['# TYPE memtally_snapshots_total counter', '# TYPE memtally_heap_live_bytes gauge',
              '# HELP memtally_running ']:
        mt.check(t in last, 'has %r' % t)
    lines = [(ls, v) for (n, ls), v in s.items() if n == 'memtally_line_live_bytes']
    mt.check(1 <= len(lines) <= 5, '%d line series (default MEMTALLY_PROMETHEUS_TOP 5)' % len(lines))
    top = max(v for ls, v in lines) if lines else 0
    mt.check(top >= 39 * 512 * 1024, 'the leaking site leads the line series (%d)' % top)
    # every version seen while it ran: a snapshot of the file, its figures
    by_seq = {x['seq']: x for x in f.snapshots}
    live = [parse(t) for t in seen.values()]
    live = [x for x in live if value(x, 'memtally_running') == 1.0]
    mt.check(len(live) >= 3, '%d versions while running' % len(live))
    ok = all(value(x, 'memtally_heap_live_bytes') ==
             by_seq.get(int(value(x, 'memtally_last_snapshot_seq')), {}).get('heap', {}).get('live_bytes')
             for x in live)
    mt.check(ok, 'each running version: heap live bytes of the snapshot it names')
    seqs = sorted(int(value(x, 'memtally_last_snapshot_seq')) for x in live)
    mt.check(len(f.snapshots) > 2 * len(set(seqs)),
             'at most every PROMETHEUS_INTERVAL: %d written of %d snapshots' % (len(set(seqs)), len(f.snapshots)))
    hs = [value(x, 'memtally_heap_live_bytes') for x in sorted(live, key=lambda x: value(x, 'memtally_last_snapshot_seq'))]
    mt.check(hs == sorted(hs) and hs[-1] > hs[0], 'the leaking rank\'s heap rises: %r' % hs)

if mt.case('death'):
    out, prom = os.path.join(OUT, 'death'), os.path.join(OUT, 'death.prom.d')
    p = subprocess.Popen([PROG, '30', '64'], env=env(out, prom, RANK='0', INTERVAL='0.2',
                         PROMETHEUS_INTERVAL='0.2'), stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    while not proms(prom) and time.time() - t0 < 20:
        time.sleep(0.05)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    mt.eq(p.returncode, -signal.SIGTERM, 'dies of SIGTERM as without the shim')
    fs = mt.files(out)
    s = parse(open(proms(prom)[0]).read()) if proms(prom) else {}
    mt.eq(value(s, 'memtally_running'), 0.0, 'a death\'s final snapshot writes running 0')
    mt.eq(value(s, 'memtally_last_snapshot_seq'), float(fs[0].final()['seq']) if fs else None,
          'of the final snapshot')

if mt.case('worker'):
    out, prom = os.path.join(OUT, 'worker'), os.path.join(OUT, 'worker.prom.d')
    code = ('import os, time\n'
            'x = [bytearray(1000) for i in range(1000)]\n'
            'pid = os.fork()\n'
            'if pid == 0:\n'
            '    y = [bytearray(1000) for i in range(1000)]\n'
            '    os._exit(0)\n'
            'os.waitpid(pid, 0)\n')
    r = subprocess.run(['/usr/bin/python3', '-c', code], env=env(out, prom, RANK='0'),
                       capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, 0, 'python ran')
    roles = sorted(labels_of(parse(open(f).read()), 'memtally_running').get('role') for f in proms(prom))
    mt.eq(roles, ['main', 'worker'], 'the parent is main, its fork child a worker')

if mt.case('top'):
    out, prom = os.path.join(OUT, 'top'), os.path.join(OUT, 'top.prom.d')
    for top, want in (('2', 2), ('0', 0), ('11', 5)):  # 11: out of range, the default kept
        r = subprocess.run(['/usr/bin/python3', '-c',
                            'x = [[bytearray(100 + i) for j in range(10)] for i in range(3000)]\n'
                            + '\n'.join('y%d = bytearray(%d)' % (i, 1000 + i) for i in range(50))],
                           env=env(out + top, prom + top, PROMETHEUS_TOP=top, QUIET='1'),
                           capture_output=True, text=True, timeout=120)
        s = parse(open(proms(prom + top)[0]).read())
        n = sum(1 for (name, ls) in s if name == 'memtally_line_live_bytes')
        mt.eq(n, want, 'PROMETHEUS_TOP=%s: line series' % top)
        mt.check(len(s) <= 13 + 10, 'series bounded (%d)' % len(s))

if mt.case('run'):
    # memtally run --prometheus: a relative DIR made absolute (the program chdirs)
    d = os.path.join(OUT, 'run')
    os.makedirs(d, exist_ok=True)
    r = subprocess.run([MEMTALLY, 'run', '--out', 'o', '--prometheus', 'p/q', '--', '/bin/sh', '-c',
                        'cd / && ' + PROG + ' 0.3 8'], cwd=d, capture_output=True, text=True,
                       timeout=120)
    mt.eq(r.returncode, 0, 'memtally run --prometheus ran')
    got = proms(os.path.join(d, 'p', 'q'))
    mt.check(len(got) >= 1, 'memtally run --prometheus p/q: the files in p/q (%d)' % len(got))
    mt.check(all(value(parse(open(f).read()), 'memtally_running') == 0.0 for f in got),
             'each says running 0 at exit')

if mt.case('metrics'):
    # memtally metrics: the same exposition from the files, after the
    # fact; from the last snapshot, or --at peak
    out, prom = os.path.join(OUT, 'metrics'), os.path.join(OUT, 'metrics.prom.d')
    ps = [subprocess.Popen([PROG, '1.5', '256'], env=env(out, prom, RANK=str(r), JOB='m55',
                           INTERVAL='0.2'), stdout=subprocess.PIPE, text=True) for r in (0, 1)]
    mt.eq([p.wait(timeout=120) for p in ps], [0, 0], 'two ranks ran')
    r = subprocess.run([MEMTALLY, 'metrics', out], capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, 0, 'memtally metrics ran')
    mt.check(promtool_check(r.stdout, 'metrics'), 'promtool check metrics: memtally metrics output')
    got = parse(r.stdout)
    live = {}
    for f in proms(prom):
        live.update(parse(open(f).read()))
    skip = ('memtally_rss_bytes', 'memtally_cgroup_usage_bytes', 'memtally_line_live_bytes',
            'memtally_prometheus_write_seconds')
    want = {k: v for k, v in live.items() if k[0] not in skip}
    same = {k: v for k, v in got.items() if k[0] not in skip}
    diff = sorted(set(same.items()) ^ set(want.items()))
    mt.check(same == want and len(same) >= 18, '%d series but rss, cgroup usage (read apart) and '
             'lines: the shim\'s own (differ: %r)' % (len(same), diff[:4]))
    mt.check(all(value(got, n, rank=r) is not None for n in skip[:1] for r in (0, 1)), 'rss of each rank')
    wh = sorted(dict(ls)['where'] for (n, ls), v in got.items()
                if n == 'memtally_line_live_bytes' and ('rank', '1') in ls)
    mt.check(any(w.startswith('leak_tick (prog_promleak.c:') for w in wh),
             'rank 1\'s lines named func (file:line): %r' % wh)
    mt.check(not any(w.startswith('leak_tick') for (n, ls), v in got.items()
                     if n == 'memtally_line_live_bytes' and ('rank', '0') in ls
                     for w in [dict(ls)['where']]), 'rank 0 has no leak_tick line')
    lk = [v for (n, ls), v in got.items() if n == 'memtally_line_live_bytes' and ('rank', '1') in ls
          and dict(ls)['where'].startswith('leak_tick')]
    mt.eq(lk, [15 * 256 * 1024.0], 'the leak\'s bytes at the last snapshot (15 ticks)')
    pk = subprocess.run([MEMTALLY, 'metrics', '--at', 'peak', out], capture_output=True, text=True,
                        timeout=120)
    mt.check(promtool_check(pk.stdout, 'peak'), 'promtool check metrics: --at peak')
    gp = parse(pk.stdout)
    for f in mt.files(out):
        rk = f.header['rank']
        top = max(s['heap']['live_bytes'] + s.get('mmap', {}).get('live_bytes', 0) for s in f.snapshots)
        mt.eq(value(gp, 'memtally_heap_live_bytes', rank=rk), float(top), 'rank %d --at peak: heap live at its peak' % rk)
    bad = subprocess.run([MEMTALLY, 'metrics', '--at', 'middle', out], capture_output=True, text=True)
    mt.eq(bad.returncode, 2, '--at middle: usage error')

if mt.case('cuda'):
    # a fake driver (test/fakecuda): device series per GPU, the driver's
    # total beside them; memtally metrics says the same from the file
    out, prom = os.path.join(OUT, 'cuda'), os.path.join(OUT, 'cuda.prom.d')
    e = env(out, prom)
    e.update(LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'), FAKE_CUDA_MEM=str(1 << 30))
    r = subprocess.run([os.path.join(B, 'test', 'cuda_prog'), 'rt', 'gpus'], env=e, capture_output=True,
                       text=True, timeout=120)
    mt.eq(r.returncode, 0, 'cuda_prog ran')
    s = parse(open(proms(prom)[0]).read()) if proms(prom) else {}
    fin = mt.files(out)[0].final()
    want = {str(d['device']): (float(d['live_bytes']), float(d['driver_total_bytes'])) for d in fin['devices']}
    got = {d: (value(s, 'memtally_device_live_bytes', device=d), value(s, 'memtally_device_total_bytes', device=d))
           for d in want}
    mt.check(len(want) == 2 and got == want, 'each GPU\'s live and total bytes: the exit snapshot\'s (%r)' % got)
    m = subprocess.run([MEMTALLY, 'metrics', out], capture_output=True, text=True, timeout=120)
    gm = parse(m.stdout)
    got = {d: (value(gm, 'memtally_device_live_bytes', device=d), value(gm, 'memtally_device_total_bytes', device=d))
           for d in want}
    mt.eq(got, want, 'memtally metrics: the same device series')
    mt.check(promtool_check(m.stdout, 'cuda') and promtool_check(open(proms(prom)[0]).read(), 'cuda'),
             'promtool check metrics: both')

if mt.case('samefirst'):
    # 1024 call sites sharing their innermost frame (leaf()'s malloc): one
    # line series, their bytes summed, never the same series twice
    out, prom = os.path.join(OUT, 'samefirst'), os.path.join(OUT, 'samefirst.prom.d')
    r = subprocess.run([os.path.join(B, 'test', 'prog_samefirst')], env=env(out, prom), timeout=120)
    text = open(proms(prom)[0]).read() if proms(prom) else ''
    s = parse(text)
    lines = {dict(ls)['where']: v for (n, ls), v in s.items() if n == 'memtally_line_live_bytes'}
    mt.eq(sum(1 for l in text.splitlines() if l.startswith('memtally_line_live_bytes{')), len(lines),
          'each line series once')
    f = mt.files(out)[0]
    named = {f.symbolize([int(w, 16)])[0][0]: v for w, v in lines.items() if w.startswith('0x')}
    mt.eq(named.get('leaf'), 102400.0, 'leaf()\'s frame: the 1024 sites\' 100 bytes summed (%r)' % named)
    mt.check(promtool_check(text, 'samefirst'), 'promtool check metrics')

if mt.case('exec'):
    # an image that execs another: two memtally files of one pid, one .prom
    # file (the later image's replaced the first's); memtally metrics gives
    # the later image's series, once
    out, prom = os.path.join(OUT, 'exec'), os.path.join(OUT, 'exec.prom.d')
    r = subprocess.run(['/usr/bin/python3', '-c', 'import os; x = bytearray(10**6); '
                        'os.execv(%r, ["p", "0.3", "8"])' % PROG], env=env(out, prom),
                       capture_output=True, text=True, timeout=120)
    mt.eq((r.returncode, len(mt.files(out)), len(proms(prom))), (0, 2, 1),
          'two images of one pid: two memtally files, one .prom file')
    live = parse(open(proms(prom)[0]).read()) if proms(prom) else {}
    m = subprocess.run([MEMTALLY, 'metrics', out], capture_output=True, text=True, timeout=120)
    got = parse(m.stdout)
    heap = [v for (n, ls), v in got.items() if n == 'memtally_heap_live_bytes']
    mt.eq(heap, [value(live, 'memtally_heap_live_bytes')], 'memtally metrics: the later image\'s series, once')
    mt.eq(sum(1 for l in m.stdout.splitlines() if l.startswith('memtally_heap_live_bytes{')), 1,
          'one heap series for the pid')

mt.eq(DUPS[:3], [], 'no series twice in any exposition read')
mt.done()
