"""Rows lead with the user's line, and memtally's own frames appear in no
view (issue 40).  Several Python programs, each run under `memtally run`
(so with memtally's start-up hook, whose exec_module wrapper used to be
the caller of torch's import):

  json:   a pure-Python leak in a function: one line keeps json.loads's
          result (through the decoder's several paths), another keeps a
          string built from collections and json.dumps; a third line
          allocates and frees (no leak)
  loop:   the leak in a loop at module level, two lines through the same
          library function (each its own row)
  torch:  a retained graph on a small conv net (Conv2d, BatchNorm2d, ReLU:
          several library paths from one line), optimizer steps (marked by
          memtally_torch's hook), and the import of torch: it reads as the
          script's `import torch` line

For each: the first row of `leaks` and of report's at-peak table is the
leaking line, written "file.py:LINE  source text"; one row per user line
(and kind) in report, leaks and diff; no memtally frame in report, leaks,
--stacks, --json frames, flame --folded, pprof (decoded with go tool pprof
-traces when go is there) and the HTML page; --by site keeps the rows by
call site (no row led by a user line)."""
import json, os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
PY = '/usr/bin/python3'
# memtally's hook directory (scripts/python, share/memtally/python) and
# its names; Debian's own /usr/lib/python3.11/sitecustomize.py, which the
# hook chains to, is no frame of memtally's
OWN = re.compile(r'(?:scripts|memtally)/python/|\((?:sitecustomize|memtally)\.py:|memtally_torch|'
                 r'memtally_cuda|/_memtally/|_Memtally|_memtally_')

PROGS = {
    'json': '''import json, collections, time
keep = []
def work(i):
    d = collections.OrderedDict(("k%d" % k, "x" * 600) for k in range(40))
    s = json.dumps(d)
    keep.append(json.loads(s))  # LEAK
    keep.append(s[:700] * 2)  # LEAK2
    json.loads(json.dumps([d] * 4))  # FREED
def main():
    for i in range(1500):
        work(i)
        time.sleep(0.001)
main()
''',
    'loop': '''import json, time
keep = []
for i in range(1500):
    blob = json.dumps({"i": i, "v": "y" * 5000})
    keep.append(json.loads(blob))  # LEAK
    if i % 2:
        keep.append(json.loads(blob + " "))  # LEAK2
    time.sleep(0.001)
''',
'torch': '''import torch  # IMPORT
import torch.nn as nn
net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
keep = []
def step(x):
    out = net(x)  # LEAK
    return out.sum()
for i in range(200):
    x = torch.randn(8, 3, 32, 32)
    keep.append(step(x))
    opt.step()
''',
}


def sh(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300, **kw)


def line_of(src, tag):
    return [i + 1 for i, l in enumerate(src.splitlines()) if tag in l][0]


SIZE = r'[-+]?[\d.]+ (?:B|KiB|MiB|GiB|TiB)'
ROW = re.compile(r'^\s+(?:\d+\s+)?%s\s.*?\s(heap|mmap|mmap_file|cuda\w*)\s+(\S.*)$' % SIZE, re.M)


def rows(text, kinds=False):
    """The `where` column of a text table's rows (after the kind column)."""
    return [(m.group(1), m.group(2)) if kinds else m.group(2) for m in ROW.finditer(text)]


def key(where):
    return re.sub(r' \[\d+ sites\]$', '', where).split('   via ')[0]


def check_prog(name, src):
    d = os.path.join(OUT, 'userline-' + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    script = os.path.join(d, name + '_prog.py')
    open(script, 'w').write(src)
    # snapshots often enough for leaks to judge (the cadence is not this test's)
    r = sh(MT, 'run', '--out', os.path.join(d, 'run'), '--interval', '0.1', '--', PY, script, cwd=d)
    mt.eq(r.returncode, 0, '%s: memtally run exit code (%s)' % (name, r.stderr[-300:]))
    run = os.path.join(d, 'run')
    base = os.path.basename(script)
    leak = '%s:%d  ' % (base, line_of(src, '# LEAK'))
    text = src.splitlines()[line_of(src, '# LEAK') - 1].split('#')[0].strip()

    # leaks: row 1 is the leaking line, with its source text
    lk = json.loads(sh(MT, 'leaks', '--json', run).stdout)['processes']
    lk = max(lk, key=lambda p: len(p['suspects']))
    where = [s['where'] for s in lk['suspects']]
    mt.check(where and where[0].startswith(leak + text),
             '%s leaks: row 1 is "%s%s": %s' % (name, leak, text, where[:3]))
    # report at the peak: row 1 too
    rep = sh(MT, 'report', '--top', '200', run).stdout
    peak = rows(rep.split('at the peak', 1)[-1])
    mt.check(peak and peak[0].startswith(leak + text),
             '%s report: row 1 at the peak is the leaking line: %s' % (name, peak[:2]))
    # one row per user line and kind, in every table of report and leaks
    for view, table in (('report', rep), ('leaks', sh(MT, 'leaks', '--top', '200', run).stdout)):
        for part in re.split(r'\n(?=  \S)', table):
            rs = [(k, key(w)) for k, w in rows(part, kinds=True)]
            user = [k for k in rs if k[1].startswith(base + ':')]
            mt.check(len(set(user)) == len(user),
                     '%s %s: one row per user line (%d rows of the script)' % (name, view, len(user)))
    # no memtally frame, in any view
    views = {
        'report': rep,
        'report --stacks': sh(MT, 'report', '--stacks', '--top', '300', run).stdout,
        'leaks --stacks': sh(MT, 'leaks', '--stacks', '--top', '100', run).stdout,
        'report --json': sh(MT, 'report', '--json', '--top', '300', run).stdout,
        'leaks --json': sh(MT, 'leaks', '--json', '--top', '300', run).stdout,
        'flame --folded': sh(MT, 'flame', '--folded', run).stdout,
        'functions': sh(MT, 'functions', '--top', '300', run).stdout,
    }
    html = os.path.join(d, 'page.html')
    sh(MT, 'html', '-o', html, run)
    views['html'] = open(html).read() if os.path.exists(html) else ''
    pb = os.path.join(d, 'p.pb.gz')
    sh(MT, 'pprof', '-o', pb, run)
    if shutil.which('go'):
        views['pprof -traces'] = sh('go', 'tool', 'pprof', '-traces', pb).stdout
    for v, out in views.items():
        bad = OWN.search(out)
        mt.check(out and not bad, '%s %s: no memtally frame (%s)' % (
            name, v, out[max(0, bad.start() - 120):bad.end() + 40] if bad else 'none'))
    # --by site: rows by call site again
    bysite = rows(sh(MT, 'report', '--by', 'site', '--top', '50', run).stdout)
    mt.check(bysite and not any(w.startswith(base + ':') for w in bysite),
             '%s report --by site: rows by call site: %s' % (name, bysite[:2]))
    return run, src, base, rep


for name, src in PROGS.items():
    if not mt.case(name):
        continue
    run, src, base, rep = check_prog(name, src)
    if name == 'loop':  # two lines through one library function: two rows
        l2 = '%s:%d  ' % (base, line_of(src, '# LEAK2'))
        mt.check(any(w.startswith(l2) for w in rows(rep)), 'loop report: the second line its own row')
    if name == 'torch':  # the import reads as the script's import line
        imp = '%s:%d  import torch' % (base, line_of(src, '# IMPORT'))
        ws = rows(rep.split('at the peak', 1)[-1])
        mt.check(any(w.startswith(imp) for w in ws[:5]),
                 'torch report: the import of torch is the script\'s line "%s": %s' % (imp, ws[:5]))

mt.done()
