"""Pictures: the flame graph SVG, the self-contained HTML page and the
PyTorch pickle.  Headless Chromium (Debian's) loads the page and the SVG
with no console errors and with every network request made to fail (a
proxy that does not exist), the expected elements are in the DOM, and
screenshots are kept in test/out/test_pictures/.  The pickle is read by
Python's own pickle, checked opcode by opcode with pickletools (protocol
2, only the opcodes PyTorch's C++ pickler uses, no batch over 1000), and
Debian python3-torch's torch.cuda._memory_viz `stats` and `segments` run on
its segments with totals equal to the dump's."""
import json, os, pickle, pickletools, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
CHROME = shutil.which('chromium')
run_dir = os.path.join(OUT, 'run')
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'),
           FAKE_CUDA_MEM=str(1 << 30))
# one run: a leaking trainer (interval snapshots) and a CUDA process that
# hits an OOM and holds more than 1000 allocations (batching)
subprocess.run([MT, 'run', '--out', run_dir, '--interval', '0.02', '--', os.path.join(B, 'test', 'prog_trainer'),
                'leak'], env=env, capture_output=True, check=True)
r = subprocess.run([MT, 'run', '--out', run_dir, '--append', '--', os.path.join(B, 'test', 'cuda_prog'), 'rt', 'oom',
                    run_dir], env=dict(env, CUDA_PROG_SMALL='2500'), capture_output=True, text=True)
mt.eq(r.returncode, 0, 'the CUDA program ran')
dump = [os.path.join(run_dir, p) for p in os.listdir(run_dir) if '.oom1.' in p][0]

def chrome(url, *extra):
    args = [CHROME, '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
            '--no-first-run', '--proxy-server=http://127.0.0.1:9', '--enable-logging=stderr', '--v=0'] + \
        list(extra) + [url]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)

def console_errors(stderr):
    return [l for l in stderr.splitlines() if 'CONSOLE' in l and ('Uncaught' in l or 'rror' in l)]

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
    r = chrome('file://' + page, '--dump-dom')
    dom = r.stdout
    mt.check('data-ready="1"' in dom, 'html: the page\'s script ran to the end')
    mt.check(re.search(r'<pre id="errors">\s*</pre>', dom) is not None, 'html: no script error reported on the page')
    mt.check(dom.count('<option') == 2, 'html: a process selector with both processes')
    mt.check('class="series"' in dom and 'class="tick"' in dom, 'html: timeline series and snapshot ticks')
    mt.check(dom.count('class="site"') >= 5 and 'leak_history' in dom, 'html: the call-site table')
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
mt.done()
