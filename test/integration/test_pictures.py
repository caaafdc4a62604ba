"""Pictures: the flame graph SVG, the self-contained HTML page and the
PyTorch pickle.  Headless Chromium (Debian's) loads the page and the SVG
with no console errors and with every network request made to fail (a
proxy that does not exist), the expected elements are in the DOM, and
screenshots are kept in test/out/test_pictures/.  The pickle is read by
Python's own pickle, checked opcode by opcode with pickletools (protocol
2, only the opcodes PyTorch's C++ pickler uses, no batch over 1000), and
Debian python3-torch's torch.cuda._memory_viz `stats` and `segments` run on
its segments with totals equal to the dump's.  Cases (MEMTALLY_TEST=
test_pictures:CASE): basic (the above), crafted (issue 31 on a run made
here: the page's per-process summary names the outlier `ranks` names and
opens on it, the table at the peak with report's first row, the snapshot
control moving it, leak suspects and spikes as `leaks` and `report` give
them, one row and one band for a line's native variants; flame frames
0.3-0.5 px wide drawn without a negative width).  A real PyTorch trainer
and a torchrun job: test_pictures_torch.py."""
import html, json, os, pickle, pickletools, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt
from pages import chrome, console_errors, dom_of, page_data, cells, moment, bare, report_first_at_peak, svg_frames

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
CHROME = shutil.which('chromium')
run_dir = os.path.join(OUT, 'run')
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'),
           FAKE_CUDA_MEM=str(1 << 30))
def basic():
    # one run: a leaking trainer (interval snapshots) and a CUDA process that
    # hits an OOM and holds more than 1000 allocations (batching)
    subprocess.run([MT, 'run', '--out', run_dir, '--interval', '0.02', '--', os.path.join(B, 'test', 'prog_trainer'),
                    'leak'], env=env, capture_output=True, check=True)
    r = subprocess.run([MT, 'run', '--out', run_dir, '--append', '--', os.path.join(B, 'test', 'cuda_prog'), 'rt', 'oom',
                        run_dir], env=dict(env, CUDA_PROG_SMALL='2500'), capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'the CUDA program ran')
    dump = [os.path.join(run_dir, p) for p in os.listdir(run_dir) if '.oom1.' in p][0]

    # flame graph
    svg = os.path.join(OUT, 'flame.svg')
    r = subprocess.run([MT, 'flame', run_dir, '-o', svg], capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'flame: exit code')
    import xml.dom.minidom
    doc = xml.dom.minidom.parse(svg)
    gs = [g for g in doc.getElementsByTagName('g') if g.getAttribute('class') == 'f']
    mt.check(len(gs) > 10, 'flame: valid SVG (XML) with %d frames' % len(gs))
    names = {g.getAttribute('data-n') for g in gs}
    mt.check(any(n.startswith('leak_history (prog_trainer.c:') for n in names), 'flame: the leaking line is a frame')
    mt.check(any(n.startswith('big_block (cuda_prog.c:') for n in names), 'flame: device memory by call site')
    mt.check(not re.search(r'(src|href)=["\']https?:', open(svg).read()), 'flame: no external references')
    if CHROME:
        r = chrome('file://' + svg, '--window-size=1200,700', '--screenshot=' + os.path.join(OUT, 'flame.png'))
        mt.check(os.path.exists(os.path.join(OUT, 'flame.png')), 'flame: Chromium rendered a screenshot')
        mt.eq(console_errors(r.stderr), [], 'flame: no console errors')
        r = chrome('file://' + svg, '--dump-dom')
        mt.check(r.stdout.count('class="f"') == len(gs), 'flame: Chromium\'s DOM holds every frame')
    else:
        mt.check(False, 'chromium is not installed (scripts/setup-deps.sh installs it)')

    # the HTML page
    page = os.path.join(OUT, 'report.html')
    r = subprocess.run([MT, 'html', run_dir, '-o', page], capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'html: exit code')
    text = open(page).read()
    urls = [u for u in re.findall(r'https?://[^\s"\'<>\\]+', text) if u != 'http://www.w3.org/2000/svg']
    mt.eq(urls, [], 'html: no URL in the page but the SVG namespace (nothing to fetch)')
    if CHROME:
        r = chrome('file://' + page, '--window-size=1300,2200', '--screenshot=' + os.path.join(OUT, 'report.png'))
        mt.eq(console_errors(r.stderr), [], 'html: no console errors')
        mt.check(os.path.exists(os.path.join(OUT, 'report.png')), 'html: screenshot kept')
        # the trainer's detail (the page opens on the process that peaked
        # highest when none stands out: here the CUDA program)
        procs = page_data(page)['processes']
        pt = [i for i, p in enumerate(procs) if 'prog_trainer' in p['argv']][0]
        r = chrome('file://%s#p=%d' % (page, pt), '--dump-dom')
        dom = r.stdout
        mt.check('data-ready="1"' in dom, 'html: the page\'s script ran to the end')
        mt.check(re.search(r'<pre id="errors">\s*</pre>', dom) is not None, 'html: no script error reported on the page')
        mt.check(dom.count('<option') == 2, 'html: a process selector with both processes')
        mt.check('class="series"' in dom and 'class="tick"' in dom, 'html: timeline series and snapshot ticks')
        out = subprocess.run([MT, 'report', run_dir], capture_output=True, text=True).stdout
        want = [l.split(None, 5)[5] for l in out.split('\n== ')[pt].split('top call sites at the peak')[1]
                .split('\n\n')[0].splitlines()[2:] if ' other (' not in l]
        got = [c[-1] for c in cells(dom, 'site')]
        mt.check(len(got) >= 4 and got == want and 'leak_history' in got[1],
                 'html: the call-site table at the peak, report\'s rows there (%s)' % got)
        mt.check('class="flame"' in dom, 'html: the flame graph')
        mt.check('class="segmap"' in dom and 'class="oomev"' in dom, 'html: the OOM dump\'s segment map and event timeline')
        mt.check('Growth starts at step' in dom, 'html: marks place the start of growth')

    # the pickle
    pk = os.path.join(OUT, 'dump.pickle')
    r = subprocess.run([MT, 'torch', dump, '-o', pk], capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'torch: exit code')
    raw = open(pk, 'rb').read()
    d = pickle.loads(raw)
    mt.check(raw[:2] == b'\x80\x02', 'torch: protocol 2')
    allowed = {'PROTO', 'EMPTY_DICT', 'EMPTY_LIST', 'MARK', 'SETITEMS', 'APPENDS', 'BINUNICODE', 'BININT',
               'BININT1', 'BININT2', 'LONG1', 'NONE', 'NEWTRUE', 'NEWFALSE', 'TUPLE2', 'STOP',
               'BINPUT', 'LONG_BINPUT', 'BINGET', 'LONG_BINGET'}  # the memo, as PyTorch's own
    ops = [op.name for op, arg, pos in pickletools.genops(raw)]
    mt.eq(sorted(set(ops) - allowed), [], 'torch: only the opcodes PyTorch\'s pickler uses')
    # batch sizes: values between a MARK and its APPENDS/SETITEMS, at that depth
    stack, biggest = [], 0
    for op, arg, pos in pickletools.genops(raw):
        n = op.name
        if n == 'MARK':
            stack.append(0)
        elif n in ('APPENDS', 'SETITEMS'):
            cnt = stack.pop()
            biggest = max(biggest, cnt if n == 'APPENDS' else cnt // 2)
            if stack:
                stack[-1] += 0
        elif stack and n in ('BINUNICODE', 'BININT', 'BININT1', 'BININT2', 'LONG1', 'NONE', 'NEWTRUE',
                             'NEWFALSE', 'EMPTY_DICT', 'EMPTY_LIST', 'BINGET', 'LONG_BINGET'):
            stack[-1] += 1
        if n == 'TUPLE2' and stack:
            stack[-1] -= 1  # two ints became one value
    mt.check(0 < biggest <= 1000, 'torch: no batch over 1000 (largest %d)' % biggest)
    segs = d['segments']
    dump_live = sum(json.loads(l)['size'] for l in open(dump) if '"type":"segment"' in l)
    mt.eq(sum(s['total_size'] for s in segs), dump_live, 'torch: segments hold the dump\'s live device bytes')
    mt.check(all(sum(b['size'] for b in s['blocks']) == s['total_size'] for s in segs), 'torch: blocks tile each segment')
    big = [s for s in segs if s['blocks'][0]['frames'][0]['name'] == 'big_block']
    mt.check(len(big) == 15 and big[0]['blocks'][0]['frames'][0]['line'] > 0 and
             big[0]['blocks'][0]['frames'][0]['filename'].endswith('cuda_prog.c'),
             'torch: frames {filename, line, name}: 15 segments from big_block')
    tr = d['device_traces'][0]
    oom = [json.loads(l) for l in open(dump) if '"type":"oom"' in l][0]
    mt.check(tr[-1]['action'] == 'oom' and tr[-1]['device_free'] == oom['driver_free_bytes'],
             'torch: the trace ends with the oom and the driver\'s free bytes')
    try:
        from torch.cuda import _memory_viz as viz
        st = viz.stats(segs)
        mt.eq((st['segments'], st['total_size'].value), (len(segs), dump_live), 'torch: _memory_viz stats totals')
        lines = viz.segments(segs, format_flamegraph=lambda s: s)
        mt.eq(sum(int(l.rsplit(' ', 1)[1]) for l in lines.splitlines()), dump_live,
              'torch: _memory_viz segments (collapsed lines) add up to the dump')
        lines = viz.memory(segs, format_flamegraph=lambda s: s)
        mt.check(lines.count('\n') == len(segs), 'torch: _memory_viz memory runs')
    except ImportError as e:
        mt.check(False, 'python3-torch is not installed (%s)' % e)

    # The timeline by call site (issue 18): bands of the sites that held the
    # most, the rest as "other", the leak suspect outlined, the x axis in
    # steps with the growth start on it; a run of 1000 snapshots and 100
    # call sites (a leaking one, a spike) renders in Chromium, timed by the
    # page itself (data-render-ms; the figure is printed, not asserted).
    if CHROME:
        big = os.path.join(OUT, 'big')
        os.makedirs(big, exist_ok=True)
        src = os.path.join(big, 'memtally.node1.r0.p7.jsonl')
        with open(src, 'w') as f:
            f.write(json.dumps({"type": "header", "version": 2, "pid": 7, "ppid": 1, "rank": 0, "local_rank": 0,
                                "world_size": 1, "host": "node1", "exe": "/x", "argv": ["train"],
                                "start_wall_ns": 0, "start_mono_ns": 0, "sample_bytes": 0}) + '\n')
            for sid in range(1, 101):
                f.write('{"type":"stack","id":%d,"pcs":["0x%x"]}\n' % (sid, 0x1000 + sid))
            for i in range(1000):
                sites = []
                for sid in range(1, 101):
                    live = 10000 * sid if sid != 50 else 4096 * i      # site 50 leaks
                    if sid == 7 and 300 <= i < 320:
                        live = 64 << 20                                  # a spike
                    sites.append('{"stack":%d,"kind":"heap","live_bytes":%d,"live_count":1,"allocs":1,'
                                 '"alloc_bytes":%d,"frees":0,"peak_bytes":%d}' % (sid, live, live, live))
                total = sum(int(x.split('"live_bytes":')[1].split(',')[0]) for x in sites)
                f.write('{"type":"snapshot","seq":%d,"reason":"every","elapsed_ms":%d,"marks":{"step":%d},'
                        '"heap":{"live_bytes":%d},"callsites_mode":"full","callsites":[%s]}\n'
                        % (i, i * 100, i, total, ','.join(sites)))
        bigpage = os.path.join(OUT, 'big.html')
        r = subprocess.run([MT, 'html', big, '-o', bigpage], capture_output=True, text=True)
        r2 = chrome('file://' + bigpage, '--virtual-time-budget=10000', '--dump-dom')
        bands = len(re.findall(r'<polygon [^>]*class="band', r2.stdout))
        sus = re.findall(r'<polygon [^>]*class="band suspect"[^>]*data-where="([^"]*)"', r2.stdout)
        ms = re.search(r'data-render-ms="([\d.]+)"', r2.stdout)
        mt.check(r.returncode == 0 and bands == 13 and len(sus) == 1 and 'growth-start' in r2.stdout and
                 'step 999' in r2.stdout and ms,
                 'stacked timeline: 1000 snapshots, 100 sites: %d bands (12 sites and other), suspect %s, the growth '
                 'start and steps on the x axis; the page rendered in %s ms' % (bands, sus, ms.group(1) if ms else None))
        print('  (render time of the page with 1000 snapshots and 100 call sites: %s ms)' % (ms.group(1) if ms else '?'))
        chrome('file://' + bigpage, '--virtual-time-budget=10000', '--window-size=1200,1100',
               '--screenshot=' + os.path.join(OUT, 'stacked.png'))
        mt.check(os.path.exists(os.path.join(OUT, 'stacked.png')), 'stacked timeline: a screenshot (stacked.png)')

    # MEMTALLY_OOM_RENDER=1: the pictures appear next to the dump, after it
    rd = os.path.join(OUT, 'render')
    prog = os.path.join(B, 'test', 'cuda_prog')
    plain = subprocess.run([prog, 'rt', 'oom', rd], env=env, capture_output=True, text=True)
    r = subprocess.run([prog, 'rt', 'oom', rd], capture_output=True, text=True,
                       env=dict(env, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=rd,
                                MEMTALLY_OOM_RENDER='1'))
    mt.eq((r.returncode, r.stderr), (plain.returncode, plain.stderr), 'OOM_RENDER: the program\'s exit code and stderr unchanged')
    mt.eq(json.loads(r.stdout)['dump_on_disk'], 1, 'OOM_RENDER: the dump itself still comes first')
    base = [p for p in os.listdir(rd) if p.endswith('.oom1.jsonl')][0][:-6]
    for ext in ('.pickle', '.html', '.svg'):
        mt.check(os.path.getsize(os.path.join(rd, base + ext)) > 1000, 'OOM_RENDER: %s written beside the dump' % (base + ext))
    mt.eq(pickle.loads(open(os.path.join(rd, base + '.pickle'), 'rb').read())['device_traces'][0][-1]['action'],
          'oom', 'OOM_RENDER: the pickle reads back')


if mt.case('basic'):
    basic()

# A run made here (no clock, no randomness): four ranks of a Python trainer
# whose native frames sit in a module that no longer exists, and their
# launcher.  Rank 2 leaks 1 MiB a step at train.py:29, reached through two
# native variants (one row, "[2 sites]"), and spikes 6 MiB at train.py:24
# at step 30 (freed at once); the other ranks hold line 29 flat.  Also a
# process whose flame graph has many frames 0.3-0.5 px wide (they drew
# with a negative width).
MIB, KIB = 1 << 20, 1 << 10
def craft(d):
    os.makedirs(d, exist_ok=True)
    mod = {'path': '/gone/libtrain.so', 'base': '0x7f0000000000', 'start': '0x7f0000001000',
           'end': '0x7f0000100000', 'offset': '0x1000', 'build_id': 'ab' * 20}
    frames = [(1, '/home/u/train.py', '<module>', 24), (2, '/home/u/train.py', '<module>', 29),
              (3, '/home/u/train.py', '<module>', 35), (5, '/home/u/train.py', '<module>', 10),
              (4, '/usr/lib/python3/dist-packages/torch/nn/functional.py', 'relu', 1457)]
    pystacks = {1: [1], 2: [4, 2], 3: [3], 4: [5]}
    stacks = {10: (['0x7f0000002100', '0x7f0000003200'], 2), 11: (['0x7f0000002180', '0x7f0000003280'], 2),
              12: (['0x7f0000004000'], 3), 13: (['0x7f0000005000'], 1), 14: (['0x7f0000006000'], 4)}

    def write(name, rank, pid, argv, nsteps, sites_at):
        recs = [{'type': 'header', 'version': 2, 'pid': pid, 'ppid': 1, 'rank': rank,
                 'local_rank': rank, 'world_size': 4 if rank is not None else None, 'host': 'node1',
                 'exe': '/usr/bin/python3.11', 'argv': argv, 'start_wall_ns': 0, 'start_mono_ns': 0,
                 'sample_bytes': 0}, {'type': 'maps', 'modules': [mod]},
                {'type': 'python', 'version': '3.11.2', 'how': 'table'}]
        recs += [{'type': 'pyframe', 'id': i, 'file': f, 'func': fn, 'line': ln} for i, f, fn, ln in frames]
        recs += [{'type': 'pystack', 'id': i, 'frames': fr, 'entry': [1] * len(fr)} for i, fr in pystacks.items()]
        recs += [{'type': 'stack', 'id': i, 'pcs': pcs, 'py': py} for i, (pcs, py) in stacks.items()]
        recs += [{'type': 'stack', 'id': 100 + i, 'pcs': ['0x%x' % (0x7f0000010000 + 64 * i + k) for k in range(3)],
                  'py': 0} for i in range(60)]
        final = sites_at(nsteps - 1)
        peak = 0
        for step in range(nsteps):
            sites = sites_at(step)
            heap = sum(c['live_bytes'] for c in sites)
            peak = max(peak, heap + (6 * MIB if rank == 2 and step == 30 else 0))
            for c in sites:  # the heap peaks at the last step
                c['at_peak_bytes'] = [f for f in final if f['stack'] == c['stack']][0]['live_bytes']
            recs.append({'type': 'snapshot', 'seq': step, 'reason': 'exit' if step == nsteps - 1 else 'every',
                         'elapsed_ms': 2000 + 1000 * step, 'marks': {'step': step},
                         'proc': {'rss_bytes': 200 * MIB + heap},
                         'heap': {'live_bytes': heap, 'live_count': len(sites), 'allocs': 100 + step,
                                  'alloc_bytes': heap, 'frees': 0, 'free_bytes': 0, 'peak_bytes': peak},
                         'callsites_mode': 'full', 'callsites': sites})
        with open(os.path.join(d, name), 'w') as f:
            for r in recs:
                f.write(json.dumps(r, separators=(',', ':')) + '\n')

    def site(stack, live, **kw):
        c = {'stack': stack, 'kind': 'heap', 'live_bytes': live, 'live_count': 1 if live else 0, 'allocs': 1,
             'alloc_bytes': max(live, kw.get('peak_bytes', 0)), 'frees': 0, 'peak_bytes': live}
        c.update(kw)
        return c

    def rank_sites(rank):
        def at(step):
            v = [site(14, 50 * MIB), site(12, MIB)]
            if rank == 2:
                v += [site(10, step * 512 * KIB), site(11, step * 512 * KIB)]
                spiked = step >= 30
                v.append(site(13, 0, allocs=1 if spiked else 0, peak_bytes=6 * MIB if spiked else 0,
                              alloc_bytes=6 * MIB if spiked else 0, frees=1 if spiked else 0,
                              peak_ms=32500 if spiked else -1, peak_step=30 if spiked else None))
                v[-1] = {k: x for k, x in v[-1].items() if x is not None and x != -1}
            else:
                v += [site(10, 2 * MIB), site(11, 2 * MIB)]
            return v
        return at
    for rank in range(4):
        write('memtally.node1.r%d.p%d.jsonl' % (rank, 100 + rank), rank, 100 + rank, ['python3', 'train.py'],
              40, rank_sites(rank))
    write('memtally.node1.p99.jsonl', None, 99, ['python3', '-m', 'torch.distributed.run', 'train.py'], 5,
          lambda step: [site(14, 30 * MIB)])

if mt.case('crafted') and not CHROME:
    mt.check(False, 'chromium is not installed (scripts/setup-deps.sh installs it)')
elif mt.case('crafted'):
    d = os.path.join(OUT, 'crafted')
    craft(d)
    r2f = os.path.join(d, 'memtally.node1.r2.p102.jsonl')
    ranks = json.loads(subprocess.run([MT, 'ranks', '--json', d], capture_output=True, text=True).stdout)
    mt.eq(ranks['outliers'], [2], 'crafted run: memtally ranks names rank 2')
    pg = os.path.join(OUT, 'crafted.html')
    r = subprocess.run([MT, 'html', d, '-o', pg], capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'crafted run: html exit code')
    data = page_data(pg)
    dom, errs = dom_of('file://' + pg, '--window-size=1300,2400')
    mt.check(not errs, 'crafted run: no console errors (%d: %s)' % (len(errs), errs[:1]))
    i_sum, i_det = dom.find('id="procs"'), dom.find('id="timeline"')
    mt.check(0 <= i_sum < i_det, 'crafted run: the per-process summary comes before the detail')
    out = cells(dom, 'proc outlier')
    verdict = re.search(r'<div class="verdict" id="verdict">(.*?)</div>', dom)
    mt.check(len(out) == 1 and out[0][1] == '2' and 'outlier: growth' in out[0] and verdict and
             'rank 2' in verdict.group(1),
             'crafted run: the summary names rank 2 the outlier, as memtally ranks does (%s; %s)'
             % (out, verdict.group(1) if verdict else None))
    other = cells(dom, 'proc other')
    mt.check(len(other) == 1 and 'not compared' in other[0] and len(cells(dom, 'proc')) == 5,
             'crafted run: one row per process, the launcher not compared (%s)' % other)
    det = re.search(r'<h2 id="detail">([^<]*)</h2>', dom)
    mt.check(det and 'r2 p102' in det.group(1), 'crafted run: the page opens on the outlier\'s detail (%s)'
             % (det.group(1) if det else None))
    # leak suspects as `leaks` ranks them, spikes as `report` lists them
    lk = json.loads(subprocess.run([MT, 'leaks', '--json', r2f], capture_output=True, text=True).stdout)
    top = lk['processes'][0]['suspects'][0]
    want = top['where'] + (' [%d sites]' % top['sites'] if top['sites'] > 1 else '')
    got = cells(dom, 'suspect')
    # the cell ends with the chain, or why there is none (leaks' kept_why)
    mt.check(got and got[0][-1].split(' \u2014 ')[0] == want and want.startswith('train.py:29 ')
             and want.endswith(' [2 sites]') and (' \u2014 kept alive by: ' in got[0][-1]) == bool(top.get('kept_by'))
             and (top.get('kept_by') or ' \u2014 no chain: ' in got[0][-1]),
             'crafted run: the first leak suspect is leaks\' first, one row for both variants (%s)'
             % (got[0][-1] if got else None))
    sp = json.loads(subprocess.run([MT, 'report', '--json', r2f], capture_output=True, text=True).stdout)
    sp = sp['processes'][0]['spikes']
    got = cells(dom, 'spike')
    mt.check(sp and got and got[0][-1] == sp[0]['row'] and got[0][0] == '6.00 MiB' and got[0][2].startswith('step 30'),
             'crafted run: the spike as report lists it: %s' % (got[0] if got else None))
    # the table at the peak, and moved to a snapshot
    rows = cells(dom, 'site')
    first = report_first_at_peak(r2f, 'node1 r2 p102')
    mt.check(rows and bare(rows[0][-1]) == bare(first),
             'crafted run: the table opens at the peak, its first row report\'s first there (%s)' % first)
    leak_row = [c for c in rows if c[-1].startswith('train.py:29 ') and c[-1].endswith(' [2 sites]')]
    mt.check(leak_row and leak_row[0][0] == '39.0 MiB', 'crafted run: at the peak the leaking line holds 39 MiB, '
             'its two variants one row (%s)' % leak_row)
    p2 = [i for i, p in enumerate(data['processes']) if 'r2 ' in p['label'] + ' '][0]
    dom5, errs = dom_of('file://%s#p=%d&s=5' % (pg, p2))
    lab = moment(dom5)
    leak5 = [c for c in cells(dom5, 'site') if c[-1].startswith('train.py:29 ') and c[-1].endswith(' [2 sites]')]
    mt.check(errs == [] and lab and lab.startswith('at snapshot 5 ') and leak5 and leak5[0][0] == '5.00 MiB',
             'crafted run: the snapshot control moves the table: at snapshot 5 the line holds %s (%s)'
             % (leak5[0][0] if leak5 else None, lab))
    bands = re.findall(r'<polygon [^>]*class="band suspect"[^>]*data-where="([^"]*)"', dom)
    mt.check(len(bands) == 1 and html.unescape(bands[0]).startswith('train.py:29 ') and bands[0].endswith(' [2 sites]'),
             'crafted run: the timeline by row: one band for the leaking line, a suspect (%s)' % bands)
    mt.check(0 <= dom.find('id="flame"') < dom.find('id="sites"'), 'crafted run: the flame graph comes before the table')
    # frames 0.3-0.5 px wide: 60 stacks of 3 frames, 0.4 px each at 1200
    tiny = os.path.join(OUT, 'tiny')
    os.makedirs(tiny, exist_ok=True)
    lines = open(r2f).read().splitlines()
    snap = json.loads(lines[-1])
    big = sum(c['live_bytes'] for c in snap['callsites'])
    each = int(big * 0.4 / 1200 / (1 - 60 * 0.4 / 1200))
    snap['callsites'] += [{'stack': 100 + i, 'kind': 'heap', 'live_bytes': each, 'live_count': 1, 'allocs': 1,
                           'alloc_bytes': each, 'frees': 0, 'peak_bytes': each, 'at_peak_bytes': each}
                          for i in range(60)]
    snap['heap']['live_bytes'] += 60 * each
    with open(os.path.join(tiny, 'memtally.node1.p7.jsonl'), 'w') as f:
        f.write('\n'.join(l for l in lines if json.loads(l)['type'] != 'snapshot') + '\n' + json.dumps(snap) + '\n')
    svg = os.path.join(OUT, 'tiny.svg')
    subprocess.run([MT, 'flame', tiny, '-o', svg], capture_output=True)
    gs = svg_frames('frames 0.3-0.5 px wide', svg)
    thin = [g for g in gs if float(g.getAttribute('data-w')) * 1200 < 0.5]
    mt.check(len(thin) >= 60, 'frames 0.3-0.5 px wide: %d of them drawn' % len(thin))
    errs = dom_of('file://' + svg)[1]
    mt.check(not errs, 'frames 0.3-0.5 px wide: no console errors on the SVG (%d: %s)' % (len(errs), errs[:1]))
    pg = os.path.join(OUT, 'tiny.html')
    subprocess.run([MT, 'html', tiny, '-o', pg], capture_output=True)
    errs = dom_of('file://' + pg)[1]
    mt.check(not errs, 'frames 0.3-0.5 px wide: no console errors on the page (%d: %s)' % (len(errs), errs[:1]))

mt.done()
