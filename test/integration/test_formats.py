"""The profile formats people already use, read by their own readers:

- pprof (`memtally pprof`), read by Google's `go tool pprof`: per function,
  `-top -sample_index=inuse_space` gives exactly the bytes `memtally report`
  gives for the same snapshot (a C program, a Python process with Python
  frames, the fake driver's OOM dump); `-base` gives what `memtally diff`
  gives; `-tagfocus rank=1` selects a rank of a merged profile; `-http`
  serves a page headless Chromium loads (a screenshot in the output);
- PyTorch 1.13's snapshot (`memtally torch --format 1.13`), read by 1.13's
  own `python3 -m torch.cuda._memory_viz memory|segments`: frames present,
  totals equal to the dump's;
- folded stacks (`memtally flame --folded`), in the line format
  flamegraph.pl reads: totals equal to report's, the same frames as the
  SVG."""
import collections, json, os, re, shutil, signal, socket, subprocess, sys, time, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
LIB = os.path.join(B, 'libmemtally.so')
GO = shutil.which('go')


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=kw.pop('timeout', 120), **kw)


def pprof_top(*args):
    """go tool pprof -top: {function: flat bytes}, and the total."""
    r = sh([GO, 'tool', 'pprof', '-top', '-unit=B', '-nodecount=100000', '-nodefraction=0', '-edgefraction=0']
           + list(args))
    flat = collections.Counter()
    total = None
    for line in r.stdout.splitlines():
        m = re.match(r'\s*(-?\d+)B\s+\S+%\s+\S+%\s+-?\d+B\s+\S+%\s+(.*)$', line)
        if m:
            flat[m.group(2)] += int(m.group(1))
        m = re.search(r'Showing nodes accounting for (-?\d+)B', line)
        if m:
            total = int(m.group(1))
    if r.returncode:
        print('    go tool pprof %s: %s' % (' '.join(args), r.stderr.strip()[-300:]))
    flat = {k: v for k, v in flat.items() if v}  # (Counter's + drops negatives)
    return flat if r.returncode == 0 else None, total


def report_by_function(path, snap=None, kind=None):
    """memtally report --json: live bytes per site's function (the last
    snapshot, or the one named)."""
    args = [MT, 'report', '--json', '--top', '1000000'] + (['--kind', kind] if kind else []) + [path]
    r = sh(args)
    d = json.loads(r.stdout)
    c = collections.Counter()
    for p in d['processes']:
        for s in p['last']['callsites']:
            c[s['function']] += s['live_bytes']
    return {k: v for k, v in c.items() if v}


if not GO:
    mt.check(False, 'go (golang-go) is installed: scripts/setup-deps.sh installs it')
    mt.done()

# --- inputs: a C program, a Python process, the fake driver's OOM dump ---
cdir = os.path.join(OUT, 'c')
sh([MT, 'run', '--out', cdir, '--every', '300', '--', os.path.join(B, 'test', 'prog_trainer'), 'leak', '40'])
cfile = mt.files(cdir)[0].path
pydir = os.path.join(OUT, 'py')
script = os.path.join(OUT, 'grow.py')
with open(script, 'w') as f:
    f.write('keep = []\n'
            'def load_batch(i):\n'
            '    return [bytearray(3000) for _ in range(20)]\n'
            'def step(i):\n'
            '    keep.append(load_batch(i))\n'
            '    keep.append(str(i) * 5000)\n'
            'for i in range(60):\n'
            '    step(i)\n'
            'import ctypes\n'
            'ctypes.CDLL(None).memtally_snapshot(b"end")\n')
sh([MT, 'run', '--out', pydir, '--', '/usr/bin/python3', script])
pyfile = [f for f in mt.files(pydir)][0].path
cudadir = os.path.join(OUT, 'cuda')
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'), FAKE_CUDA_MEM=str(64 << 20),
           MEMTALLY_OUT=cudadir, LD_PRELOAD=LIB)
sh([os.path.join(B, 'test', 'cuda_prog'), 'rt', 'oom', cudadir], env=env)
dumps = sorted(p for p in os.listdir(cudadir) if '.oom' in p) if os.path.isdir(cudadir) else []
mt.check(len(dumps) == 1, 'the fake driver\'s OOM wrote a dump (%s)' % dumps)
dump = os.path.join(cudadir, dumps[0]) if dumps else None

# --- pprof: per function, exactly report's bytes ---
if mt.case('pprof'):
    for name, src, kind in (('C program', cfile, None), ('Python process', pyfile, None),
                            ('OOM dump', dump, None), ('OOM dump, cuda', dump, 'cuda')):
        pb = os.path.join(OUT, re.sub(r'\W+', '_', name) + '.pb.gz')
        r = sh([MT, 'pprof', '--snapshot', 'last', src, '-o', pb] + (['--kind', kind] if kind else []))
        got, total = pprof_top('-sample_index=inuse_space', pb)
        want = report_by_function(src, kind=kind)
        mt.check(r.returncode == 0 and got == want and total == sum(want.values()) and want,
                 'pprof %s: go tool pprof -top per function = memtally report (%d functions, %s bytes; '
                 'pprof %s)' % (name, len(want), sum(want.values()),
                                sorted(got.items())[:4] if got != want else 'same'))
    # with no --snapshot, the peak: per function what report says was live then
    pb = os.path.join(OUT, 'Python_peak.pb.gz')
    r = sh([MT, 'pprof', pyfile, '-o', pb])
    got, total = pprof_top('-sample_index=inuse_space', pb)
    rp = json.loads(sh([MT, 'report', '--json', '--top', '1000000', pyfile]).stdout)['processes'][0]
    want = collections.Counter()
    for c in rp['at_peak']['callsites']:
        want[c['function']] += c['at_peak_bytes']
    mt.check(r.returncode == 0 and got == dict(want) and want,
             'pprof with no --snapshot: the peak, per function as report\'s at-peak table (%d functions)' % len(want))
    # the Python process: Python frames as functions with file and line
    pb = os.path.join(OUT, 'Python_process.pb.gz')
    r = sh([GO, 'tool', 'pprof', '-traces', '-lines', pb])
    mt.check(re.search(r'load_batch \S*grow\.py:3', r.stdout) and re.search(r'step \S*grow\.py:5', r.stdout)
             and re.search(r'<module> \S*grow\.py:8', r.stdout),
             'pprof Python process: -traces -lines shows load_batch grow.py:3 < step grow.py:5 < <module> grow.py:8')
    # labels, counts, time
    r = sh([GO, 'tool', 'pprof', '-raw', os.path.join(OUT, 'C_program.pb.gz')])
    hdr = mt.File(cfile).header
    mt.check('kind:[heap]' in r.stdout and 'pid:[%d count]' % hdr['pid'] in r.stdout and
             'alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]' in r.stdout,
             'pprof: sample types alloc/inuse objects/space (inuse_space the default), labels kind and pid')
    mt.check(re.search(r'^Duration: \S+', r.stdout, re.M) and re.search(r'^Time: 20', r.stdout, re.M),
             'pprof: the profile carries time and duration')
    # the mapping: the program's file and build id, so pprof can symbolize
    m = re.search(r'Mappings\n(.*)', r.stdout, re.S)
    mt.check(m and 'prog_trainer' in m.group(1) and re.search(r'[0-9a-f]{40}', m.group(1)),
             'pprof: mappings name each module with its build id')

    # -base: what memtally diff gives, per function
    snaps = [s['seq'] for s in mt.File(cfile).snapshots]
    a_seq = snaps[len(snaps) // 2]
    pa, pb = os.path.join(OUT, 'a.pb.gz'), os.path.join(OUT, 'b.pb.gz')
    sh([MT, 'pprof', '--snapshot', str(a_seq), cfile, '-o', pa])
    sh([MT, 'pprof', '--snapshot', 'last', cfile, '-o', pb])
    got, _ = pprof_top('-sample_index=inuse_space', '-base', pa, pb)
    r = sh([MT, 'diff', '--json', '--top', '1000000', '%s@%d' % (cfile, a_seq), cfile + '@last'])
    want = collections.Counter()
    for pair in json.loads(r.stdout)['pairs']:
        for s in pair['callsites']:
            want[s['function']] += s['change_bytes']
    want = {k: v for k, v in want.items() if v}
    mt.check(got is not None and got == want and want,
             'pprof -base a b = memtally diff a b, per function (%s; pprof %s)'
             % (sorted(want.items()), sorted(got.items()) if got else None))

    # --merge and -tagfocus rank=1: the golden run's two ranks
    gold = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'golden', 'in')
    merged = os.path.join(OUT, 'ranks.pb.gz')
    r = sh([MT, 'pprof', '--merge', '--snapshot', 'last', gold, '-o', merged])
    _, t1 = pprof_top('-sample_index=inuse_space', '-tagfocus', 'rank=1', merged)
    _, tall = pprof_top('-sample_index=inuse_space', merged)
    rk = json.loads(sh([MT, 'report', '--json', gold]).stdout)['processes']
    live = {p['rank']: sum(s['live_bytes'] for s in p['last']['callsites']) for p in rk}
    mt.check(r.returncode == 0 and t1 == live[1] and tall == live[0] + live[1],
             '--merge: one profile; -tagfocus rank=1 gives rank 1\'s %s bytes (got %s; all %s = %s)'
             % (live.get(1), t1, tall, sum(live.values())))
    # a directory: -o is the file written, every process in it (as --merge)
    one = os.path.join(OUT, 'one.pb.gz')
    r = sh([MT, 'pprof', '--snapshot', 'last', gold, '-o', one])
    _, tone = pprof_top('-sample_index=inuse_space', one)
    mt.check(r.returncode == 0 and tone == tall and [p for p in os.listdir(OUT) if p.startswith('one.')] == ['one.pb.gz'],
             'a directory without --merge: -o names the one file written, both ranks in it (%s, want %s)'
             % (tone, tall))
    # --each: one profile per process
    r = sh([MT, 'pprof', '--each', gold, '-o', os.path.join(OUT, 'each.pb.gz')])
    each = sorted(p for p in os.listdir(OUT) if p.startswith('each.'))
    mt.eq(each, ['each.node1.r0.p100.pb.gz', 'each.node1.r1.p101.pb.gz'],
          'a directory with --each gives one profile per process')

    # -http: the page pprof serves, in headless Chromium
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    # `go tool pprof` runs the pprof tool as its child: killing go alone
    # left that server running after the suite (issue 51); its own process
    # group is killed whole
    srv = subprocess.Popen([GO, 'tool', 'pprof', '-no_browser', '-http', '127.0.0.1:%d' % port,
                            os.path.join(OUT, 'C_program.pb.gz')], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        page = ''
        for _ in range(100):
            try:
                page = urllib.request.urlopen('http://127.0.0.1:%d/ui/top' % port, timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.2)
        shot = os.path.join(OUT, 'pprof-top.png')
        r = sh(['chromium', '--headless', '--no-sandbox', '--disable-gpu', '--window-size=1200,700',
                '--virtual-time-budget=5000',
                '--screenshot=' + shot, 'http://127.0.0.1:%d/ui/flamegraph' % port], timeout=120)
        mt.check('leak_history' in page and 'cache_put' in page and os.path.exists(shot) and
                 os.path.getsize(shot) > 10000,
                 'pprof -http serves the profile (top names leak_history, cache_put); Chromium\'s '
                 'screenshot of its flame graph: %s' % shot)
    finally:
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()

# --- memtally functions: inclusive and self, per function ---
if mt.case('functions'):
    for name, src in (('C program', cfile), ('Python process', pyfile)):
        peak = name == 'Python process'  # (at exit the interpreter freed the script's data)
        d = json.loads(sh([MT, 'functions', '--json', '--top', '1000000'] + ([] if peak else ['--snapshot', 'last'])
                          + [src]).stdout)['processes'][0]
        self_by = {}
        for fn in d['functions']:
            if fn['self_bytes']:
                self_by[fn['function']] = self_by.get(fn['function'], 0) + fn['self_bytes']
        want = report_by_function(src)
        if peak:
            rp = json.loads(sh([MT, 'report', '--json', '--top', '1000000', src]).stdout)['processes'][0]
            want = {}
            for c in rp['at_peak']['callsites']:
                want[c['function']] = want.get(c['function'], 0) + c['at_peak_bytes']
        total = sum(want.values())
        top = d['functions'][0]
        # report names a site by its function; functions keys a function by
        # name and file, and drops C++ parameter lists: compare the totals
        # and the largest self rows
        outer_ok = top['inclusive_bytes'] == total if name == 'C program' else True
        mt.check(d['total_bytes'] == total and sum(self_by.values()) == total and outer_ok,
                 'functions %s: self sums to the total (%d)%s' % (name, total, ', the outermost function includes '
                 'it all (%s %d)' % (top['function'], top['inclusive_bytes']) if name == 'C program' else ''))
        # the program's own functions: self as report names them
        own = {fn['function'] for fn in d['functions'] if fn['where'] in ('prog_trainer.c', 'grow.py')}
        diff = {f: (self_by.get(f), want.get(f)) for f in own if self_by.get(f, 0) != want.get(f, 0)}
        mt.check(own and not diff, 'functions %s: self of the program\'s own functions = report\'s (%s; differ: %s)'
                 % (name, sorted(own), diff))

# --- PyTorch 1.13's own _memory_viz ---
if mt.case('torch113') and dump:
    pk = os.path.join(OUT, 'dump113.pickle')
    r = sh([MT, 'torch', '--format', '1.13', dump, '-o', pk])
    oomj = json.loads(sh([MT, 'oom', '--json', dump]).stdout)['dumps'][0]
    cuda_live = sum(s['size'] for s in oomj['segments'] if s['kind'] == 'cuda')
    # its CLI pipes the folded lines to /tmp/<uid>_flamegraph.pl (downloaded
    # when missing; nothing is reachable here): in a private mount namespace
    # a stand-in that passes them through is bound over that path (a file
    # there, of the user's, is left as it was; an empty one made for the
    # mount is removed)
    stub = os.path.join(OUT, 'flamegraph-cat.sh')
    with open(stub, 'w') as fh:
        fh.write('#!/bin/sh\ncat\n')
    os.chmod(stub, 0o755)
    fg = '/tmp/%d_flamegraph.pl' % os.getuid()
    made = not os.path.exists(fg)
    if made:
        open(fg, 'w').close()
    outs = {}
    try:
        for view in ('memory', 'segments'):
            o = os.path.join(OUT, '113-%s.txt' % view)
            cmd = ('mount --bind %s %s && /usr/bin/python3 -m torch.cuda._memory_viz %s %s -o %s'
                   % (stub, fg, view, pk, o))
            r2 = sh(['unshare', '-m', '--propagation', 'private', 'sh', '-c', cmd])
            outs[view] = open(o).read() if r2.returncode == 0 and os.path.exists(o) else ''
            if r2.returncode:
                print('    %s: %s' % (view, r2.stderr.strip()[-300:]))
    finally:
        if made:
            os.unlink(fg)
    for view, text in outs.items():
        lines = [l for l in text.splitlines() if l.strip()]
        total = sum(int(l.rsplit(' ', 1)[1]) for l in lines)
        framed = all(re.search(r';active_allocated;.+:\d+:', l) for l in lines)
        mt.check(r.returncode == 0 and lines and framed and total == cuda_live,
                 'torch --format 1.13: 1.13\'s _memory_viz %s shows frames on every block, %d bytes '
                 '(the dump: %d)' % (view, total, cuda_live))
    r3 = sh(['/usr/bin/python3', '-c', 'import pickle, sys; d = pickle.load(open(sys.argv[1], "rb")); '
             'b = [b for s in d["segments"] for b in s["blocks"]]; '
             'print(all(b["history"][0]["frames"] == b["frames"] and b["history"][0]["real_size"] == b["size"] '
             'for b in b), len(b))', os.path.join(OUT, 'dump2.pickle')]) if sh(
        [MT, 'torch', dump, '-o', os.path.join(OUT, 'dump2.pickle')]).returncode == 0 else None
    mt.check(r3 is not None and r3.stdout.startswith('True'),
             'torch (PyTorch 2 format): every block also has its history for 1.13 (%s)'
             % (r3.stdout.strip() if r3 else None))

# --- folded stacks ---
if mt.case('folded'):
    line_re = re.compile(r'^(.*)\s+?(\d+(?:\.\d*)?)$')  # flamegraph.pl's own
    for name, src in (('C program', cfile), ('Python process', pyfile), ('OOM dump', dump)):
        r = sh([MT, 'flame', '--folded', '--snapshot', 'last', src])
        lines = r.stdout.splitlines()
        parsed = [line_re.match(l) for l in lines]
        total = sum(int(m.group(2)) for m in parsed if m)
        want = sum(report_by_function(src).values())
        svg = os.path.join(OUT, 'f.svg')
        sh([MT, 'flame', '--snapshot', 'last', src, '-o', svg])
        svgtext = open(svg).read()
        # the SVG leaves out frames too narrow to draw: those of 1% or more
        big = [m for m in parsed if m and int(m.group(2)) * 100 >= total]
        leaves = {m.group(1).split(';')[-1] for m in big}
        import html as h
        in_svg = all(h.escape(x, quote=False) in svgtext or x in svgtext for x in leaves)
        mt.check(r.returncode == 0 and lines and all(parsed) and total == want and in_svg,
                 'flame --folded %s: %d lines flamegraph.pl reads, %d bytes = report\'s %d, frames as in the SVG'
                 % (name, len(lines), total, want))
        # the SVG's own totals (data-v: a frame's exact value): the whole
        # and each kind's, as the folded lines add them up
        kinds = collections.Counter()
        for m in parsed:
            kinds[m.group(1).split(';')[0]] += int(m.group(2))
        v = {m.group(2): int(m.group(1)) for m in re.finditer(r'<g class="f" [^>]*data-v="(\d+)" data-n="([^"]*)"',
                                                              svgtext) if m.group(2) in ('all',) + tuple(kinds)}
        # (a kind under 0.3 px of the 1200 is not drawn)
        mt.check(v.get('all') == total and all(v.get(k) == n or (k not in v and n * 1200 < 0.3 * total)
                                               for k, n in kinds.items()),
                 'flame %s: the SVG\'s totals are the folded lines\' (all %s, by kind %s)' % (name, v.get('all'), dict(kinds)))
    # Python frames keep their lines (grow.py:5 and grow.py:6 are two
    # frames of step), native frames name theirs in the tooltip
    r = sh([MT, 'flame', '--folded', pyfile])
    mt.check(re.search(r'<module> \(grow\.py:8\);step \(grow\.py:5\);load_batch \(grow\.py:3\)', r.stdout) and
             re.search(r';step \(grow\.py:6\);', r.stdout),
             'flame --folded Python process: frames with their lines: <module> (grow.py:8);step (grow.py:5);'
             'load_batch (grow.py:3), and step (grow.py:6) apart')
    svg = os.path.join(OUT, 'c.svg')
    sh([MT, 'flame', cfile, '-o', svg])
    mt.check(re.search(r'<title>main at prog_trainer\.c:\d+ — ', open(svg).read()),
             'flame C program: a caller\'s tooltip names its line (main at prog_trainer.c:N)')
    r = sh([MT, 'flame', '--folded', '--metric', 'allocs', cfile])
    allocs = sum(int(l.rsplit(' ', 1)[1]) for l in r.stdout.splitlines())
    want = sum(s['allocs'] for s in json.loads(sh([MT, 'report', '--json', '--top', '1000000', cfile]).stdout)
               ['processes'][0]['last']['callsites'])
    mt.eq(allocs, want, 'flame --folded --metric allocs: the allocation count')
    # no --snapshot: the peak (each site's bytes at its kind's high-water
    # mark), as report's at_peak section has them
    for name, src in (('C program', cfile), ('Python process', pyfile)):
        r = sh([MT, 'flame', '--folded', src, '-o', os.path.join(OUT, 'peak.folded')])
        total = sum(int(l.rsplit(' ', 1)[1]) for l in open(os.path.join(OUT, 'peak.folded')))
        rp = json.loads(sh([MT, 'report', '--json', '--top', '1000000', src]).stdout)['processes'][0]
        want = sum(c['at_peak_bytes'] for c in rp['at_peak']['callsites'])
        mt.check(r.returncode == 0 and total == want,
                 'flame --folded %s with no --snapshot: the peak, %d bytes = report\'s at_peak %d' % (name, total, want))
    r = sh([MT, 'pprof', '--snapshot', 'peak', pyfile, '-o', os.path.join(OUT, 'peak.pb.gz')])
    got, total = pprof_top(os.path.join(OUT, 'peak.pb.gz'))
    mt.check(r.returncode == 0 and total == want,
             'pprof --snapshot peak: inuse_space at the peak, %s bytes = report\'s at_peak %d' % (total, want))
mt.done()
