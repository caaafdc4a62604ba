"""Issue 31's pictures on real PyTorch runs (Debian's python3-torch 1.13,
CPU): the flame graph and the HTML page, in headless Chromium (test/lib/
pages.py).  Cases (MEMTALLY_TEST=test_pictures_torch:CASE):
 - torch: an unmodified trainer (torch_train.py: an MLP, a DataLoader with 2
   worker processes, SGD, each step's loss kept with its graph): the flame
   graph at the peak has no negative width and no NaN, Python frames keep
   their lines (the forward pass's line its own frame), native frames name
   their lines in the tooltip, --folded adds up to the SVG's total and
   FILE@N is that snapshot; the page has no console error, opens on the
   per-process summary naming the outliers `memtally ranks` names, then on
   the table at the peak whose first row is report's first there; the
   flame graph comes before the table; the snapshot control moves it;
 - ddp: a 2-rank gloo job under torchrun, rank 1 leaking: the page has no
   console error, opens on the summary, a row per process, the launcher
   not compared, the outliers as `memtally ranks` names them.
Screenshots: test/out/test_pictures_torch/{torch,ddp}.png."""
import html, json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt
from pages import MT, OUT, CHROME, dom_of, page_data, cells, moment, bare, report_first_at_peak, svg_frames, \
    folded_total

HERE = os.path.dirname(os.path.abspath(__file__))
if not CHROME:
    mt.check(False, 'chromium is not installed (scripts/setup-deps.sh installs it)')
    mt.done()
if subprocess.run(['/usr/bin/python3', '-c', mt.FIND_TORCH], capture_output=True).returncode:
    mt.check(False, 'python3-torch is not installed (scripts/setup-deps.sh installs it)')
    mt.done()

if mt.case('torch'):
    script = os.path.join(HERE, 'torch_train.py')
    fwd = [i + 1 for i, l in enumerate(open(script)) if 'model(x)' in l][0]
    d = os.path.join(OUT, 'torch')
    r = subprocess.run([MT, 'run', '--out', d, '--interval', '0.3', '--', '/usr/bin/python3', script, 'leak',
                        '/dev/null', '4096'], capture_output=True, text=True, timeout=300)
    mt.eq(r.returncode, 0, 'trainer: exit code')
    files = mt.files(d)
    trainer = max(files, key=lambda f: len(f.snapshots))
    # the flame graph: at the peak, Python frames with their lines
    svg = os.path.join(OUT, 'torch-flame.svg')
    r = subprocess.run([MT, 'flame', d, '-o', svg], capture_output=True, text=True)
    gs = svg_frames('trainer flame graph', svg)
    names = {g.getAttribute('data-n') for g in gs}
    mods = sorted(n for n in names if n.startswith('<module> (torch_train.py:'))
    mt.check('<module> (torch_train.py:%d)' % fwd in names and len(mods) >= 3,
             'trainer flame graph: Python frames keep their lines: the forward pass <module> (torch_train.py:%d), '
             'and the script\'s other lines apart (%s)' % (fwd, mods))
    titles = [t.firstChild.data for g in gs for t in g.getElementsByTagName('title')]
    nat = [t for t in titles if re.match(r'\S+ at [\w.+-]+\.(c|cc|cpp|h|hpp):\d+', t)]
    mt.check(nat, 'trainer flame graph: native frames name their lines in the tooltip (%s)' % nat[:1])
    allv = [int(g.getAttribute('data-v') or -1) for g in gs if g.getAttribute('data-n') == 'all']
    tot, _ = folded_total([d])
    mt.check(allv == [tot] and tot > 0, 'trainer flame graph: --folded adds up to the SVG\'s total (%d; SVG %s)'
             % (tot, allv))
    seq = trainer.snapshots[len(trainer.snapshots) // 2]['seq']
    want = sum(c['live_bytes'] for c in trainer.snapshots[len(trainer.snapshots) // 2]['callsites']
               if c['live_bytes'] > 0)
    got, _ = folded_total(['%s@%d' % (trainer.path, seq)])
    mt.eq(got, want, 'trainer flame graph: FILE@%d is that snapshot\'s live bytes' % seq)
    dom, errs = dom_of('file://' + svg)
    mt.check(not errs, 'trainer flame graph: no console errors in Chromium (%d: %s)' % (len(errs), errs[:1]))
    # the page
    pg = os.path.join(OUT, 'torch.html')
    r = subprocess.run([MT, 'html', d, '-o', pg], capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'trainer page: exit code')
    print('  (the trainer\'s page: %d bytes, %d processes)' % (os.path.getsize(pg), len(files)))
    data = page_data(pg)
    dom, errs = dom_of('file://' + pg, '--window-size=1300,3000', '--screenshot=' + os.path.join(OUT, 'torch.png'))
    mt.check(not errs, 'trainer page: no console errors (%d: %s)' % (len(errs), errs[:1]))
    dom, errs = dom_of('file://' + pg)
    mt.check(0 <= dom.find('id="procs"') < dom.find('id="timeline"') and
             0 <= dom.find('id="flame"') < dom.find('id="sites"'),
             'trainer page: the per-process summary first; the flame graph before the table')
    rk = json.loads(subprocess.run([MT, 'ranks', '--json', d], capture_output=True, text=True).stdout)
    want = sorted('p%d' % x['pid'] for x in rk['ranks'] if x['outlier'])
    got = sorted(re.search(r'p\d+', c[0]).group(0) for c in cells(dom, 'proc outlier'))
    mt.eq(got, want, 'trainer page: the outliers memtally ranks names')
    po = data.get('summary', {}).get('open', 0)
    opened = data['processes'][po]
    first = report_first_at_peak(d, opened['label'])
    rows = cells(dom, 'site')
    lab = moment(dom)
    mt.check(rows and first and bare(rows[0][-1]) == bare(first) and lab and lab.startswith('at the peak'),
             'trainer page: opens at the peak of %s, its first row report\'s first there (%s)'
             % (opened['label'], first))
    s0 = opened['tables'][1]['seq'] if len(opened.get('tables', [])) > 1 else 0
    dom0, errs = dom_of('file://%s#p=%d&s=%d' % (pg, po, s0))
    lab0 = moment(dom0)
    rows0 = cells(dom0, 'site')
    mt.check(errs == [] and lab0 and lab0.startswith('at snapshot %d ' % s0) and rows0 and rows0 != rows,
             'trainer page: the snapshot control moves the table to snapshot %d (%d rows; first %s)'
             % (s0, len(rows0), rows0[0][-1][:80] if rows0 else None))

# A 2-rank gloo job under torchrun (rank 1 keeps each step's loss with its
# graph): the page opens on the per-process summary, the launcher not
# compared, the outliers as `memtally ranks` names them.
if mt.case('ddp'):
    d = os.path.join(OUT, 'ddp')
    r = subprocess.run([MT, 'run', '--out', d, '--interval', '0.2', '--sample', '256K', '--',
                        'torchrun', '--nproc_per_node', '2', '--redirects', '1', '--tee', '1',
                        '--master_port', str(mt.free_port()), os.path.join(HERE, 'torch_ddp.py'), '1'],
                       capture_output=True, text=True, timeout=300)
    mt.eq(r.returncode, 0, 'torchrun job: exit code%s' % (' (%s)' % r.stderr[-300:] if r.returncode else ''))
    pg = os.path.join(OUT, 'ddp.html')
    subprocess.run([MT, 'html', d, '-o', pg], capture_output=True, text=True)
    print('  (the torchrun job\'s page: %d bytes)' % os.path.getsize(pg))
    dom, errs = dom_of('file://' + pg, '--window-size=1300,1600', '--screenshot=' + os.path.join(OUT, 'ddp.png'))
    mt.check(not errs, 'torchrun page: no console errors (%d: %s)' % (len(errs), errs[:1]))
    dom, errs = dom_of('file://' + pg)
    procs = cells(dom, 'proc')
    rk = json.loads(subprocess.run([MT, 'ranks', '--json', d], capture_output=True, text=True).stdout)
    got = sorted(int(c[1]) for c in cells(dom, 'proc outlier'))
    verdict = re.search(r'<div class="verdict" id="verdict">(.*?)</div>', dom)
    mt.check(0 <= dom.find('id="procs"') < dom.find('id="timeline"') and len(procs) == 3 and
             [c[1] for c in cells(dom, 'proc other')] == ['-'] and got == rk['outliers'],
             'torchrun page: the summary first, a row per process, the launcher not compared, outliers %s as '
             'memtally ranks names them (%s)' % (got, html.unescape(verdict.group(1)) if verdict else None))

mt.done()
