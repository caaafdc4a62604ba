"""Bad input to the command gets one clear message naming the file and
line, and exit code 1: empty, corrupt, wrong version, not ours, stacks used
before their record, deep nesting, huge numbers.  A truncated last line
(a process killed mid-write) is ignored and said so.  Never a crash."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
good_dir = os.path.join(OUT, 'good')
subprocess.run([MT, 'run', '--out', good_dir, '--', os.path.join(B, 'test', 'prog_trainer'),
                'leak', '20'], capture_output=True, check=True)
good = mt.files(good_dir)[0].path
lines = mt.raw(good).split(b'\n')[:-1]
first_snap = next(i for i, l in enumerate(lines) if b'"type":"snapshot"' in l)
first_stack = next(i for i, l in enumerate(lines) if b'"type":"stack"' in l)

# Damage in stack, Python frame and call-site records: `ranks` reads each
# snapshot's totals and marks only (run_load_summaries) and answers.  An
# id defined twice it refuses as the others do, by the record's bytes
# (records.c summary_seen): up_deep's chain takes ids the file defines again.
UNREAD = {'nostack', 'py_noframe', 'py_nostack', 'py_entry', 'py_badframe', 'up_missing',
          'up_self', 'up_keep', 'up_nokeep'}
RANKS_OWN = {'up_deep': 'is defined a second time, with other frames'}

def case(name, data, code, msg):
    p = os.path.join(OUT, 'memtally.%s.p1.jsonl' % name)
    with open(p, 'wb') as f:
        f.write(data)
    for cmd in ('report', 'leaks', 'ranks'):
        r = subprocess.run([MT, cmd, p], capture_output=True, text=True)
        want = msg.replace('FILE', p)
        ok = r.returncode == code and (want in r.stderr if msg else True)
        if cmd == 'ranks' and name in UNREAD: # records a summary does not read
            ok = r.returncode == 0
        if cmd == 'ranks' and name in RANKS_OWN:
            ok = r.returncode == 1 and RANKS_OWN[name] in r.stderr and p + ':' in r.stderr
        mt.check(ok and r.returncode < 128, '%s (%s): exit %d, stderr %r' %
                 (name, cmd, r.returncode, r.stderr.strip()[:160]))

join = lambda ls: b'\n'.join(ls) + b'\n'
case('empty', b'', 1, 'memtally: FILE: empty file (no header record)')
case('garbage', b'hello world\n', 1, 'memtally: FILE:1: unexpected character (column 1)')
case('notours', b'{"type":"snapshot","seq":0}\n', 1,
     'memtally: FILE:1: not a memtally file: the first record is "snapshot", not a header')
hdr = json.loads(lines[0])
hdr['version'] = 99
case('version', join([json.dumps(hdr).encode()] + lines[1:]), 1,
     'memtally: FILE:1: format version 99; this memtally reads versions 1 to 3')
bad = lines[:]
bad[first_snap] = bad[first_snap][:-40] + b'}'
case('corrupt', join(bad), 1, 'memtally: FILE:%d: ' % (first_snap + 1))
trunc = join(lines)[:-30]
case('truncated', trunc, 0, '')
r = subprocess.run([MT, 'report', os.path.join(OUT, 'memtally.truncated.p1.jsonl')],
                   capture_output=True, text=True)
mt.check('last line truncated' in r.stdout, 'truncated: report says the last line was cut')
# a stack no other stack takes frames from ("up", format 3)
stk_recs = [(i, json.loads(l)) for i, l in enumerate(lines) if b'"type":"stack"' in l]
ups = {r.get('up') for _, r in stk_recs}
drop, sid = next((i, r['id']) for i, r in stk_recs if r['id'] not in ups)
nostack = lines[:drop] + lines[drop + 1:]
case('nostack', join(nostack), 1,
     'which has no earlier stack record'.replace('which', 'call site refers to stack %d, which' % sid))
deep = b'[' * 100 + b']' * 100
case('deep', join([lines[0], b'{"type":"x","v":' + deep + b'}']), 1,
     'memtally: FILE:2: nesting deeper than 64 levels')
snap = json.loads(lines[first_snap])
snap['seq'] = 10 ** 400
case('huge', join(lines[:first_snap] + [json.dumps(snap).encode()]), 1,
     'memtally: FILE:%d: field "seq" is not an integer' % (first_snap + 1))
case('utf8', join([lines[0], b'{"type":"mark","name":"\xff\xfe"}'] + lines[1:]), 0, '')
# Python records (format 2): references to records not written before.
pyf = b'{"type":"pyframe","id":1,"file":"t.py","func":"f","line":3}'
pys = b'{"type":"pystack","id":1,"frames":[1],"entry":[1]}'
stk = b'{"type":"stack","id":99,"py":1,"pcs":["0x1"]}'
case('py_ok', join([lines[0], pyf, pys, stk] + lines[1:]), 0, '')
case('py_noframe', join([lines[0], pys] + lines[1:]), 1,
     'memtally: FILE:2: pystack 1: frame 0 is not a pyframe written before it')
case('py_nostack', join([lines[0], pyf, stk] + lines[1:]), 1,
     'memtally: FILE:3: stack 99 refers to pystack 1, which has no record before it')
case('py_entry', join([lines[0], pyf, b'{"type":"pystack","id":1,"frames":[1],"entry":[]}'] + lines[1:]), 1,
     'memtally: FILE:3: pystack 1: "frames" and "entry" must be arrays of one length')
case('py_badframe', join([lines[0], b'{"type":"pyframe","id":1,"file":7,"func":"f","line":3}'] + lines[1:]), 1,
     'memtally: FILE:2: field "file" is not a string')
# Shared frames (format 3): "up" must name an earlier stack record, "keep"
# at most its frames, and a shared stack is at most 128 frames deep (a
# few bytes a line must not stand for unbounded frames).
s1 = b'{"type":"stack","id":90,"pcs":["0x1","0x2","0x3"]}'
case('up_ok', join([lines[0], s1, b'{"type":"stack","id":91,"up":90,"keep":2,"pcs":["0x9"]}'] + lines[1:]), 0, '')
case('up_missing', join([lines[0], b'{"type":"stack","id":91,"up":90,"keep":2,"pcs":["0x9"]}'] + lines[1:]), 1,
     'memtally: FILE:2: stack 91: "up" names stack 90, which has no record before it')
case('up_self', join([lines[0], b'{"type":"stack","id":91,"up":91,"keep":0,"pcs":["0x9"]}'] + lines[1:]), 1,
     'memtally: FILE:2: stack 91: "up" names stack 91, which has no record before it')
case('up_keep', join([lines[0], s1, b'{"type":"stack","id":91,"up":90,"keep":4,"pcs":["0x9"]}'] + lines[1:]), 1,
     'memtally: FILE:3: stack 91: "keep" is 4, stack 90 has 3 frames')
case('up_nokeep', join([lines[0], s1, b'{"type":"stack","id":91,"up":90,"pcs":["0x9"]}'] + lines[1:]), 1,
     'memtally: FILE:3: missing field "keep"')
chain = [lines[0], b'{"type":"stack","id":1,"pcs":[' + b','.join([b'"0x1"'] * 100) + b']}']
chain += [b'{"type":"stack","id":%d,"up":%d,"keep":%d,"pcs":["0x2"]}' % (i + 1, i, 100 + i - 1) for i in range(1, 40)]
case('up_deep', join(chain + lines[1:]), 1,
     'memtally: FILE:31: stack 30 has 129 frames; a stack with "up" has at most 128')
case('unknown', join([lines[0], b'{"type":"from_the_future","x":[1,2,{"y":null}]}'] + lines[1:]), 0, '')
# Values at the edge of the types (UBSan in `make check` runs this file with
# the command built with -fsanitize=undefined): a call site's live bytes
# of INT64_MIN (the text output negated it; a site's figure is a racy sum
# of per-thread shares, and may be negative) ...
heap_snap = next(i for i, l in enumerate(lines) if b'"type":"snapshot"' in l and b'"heap":' in l
                 and json.loads(l)['callsites'])
snap = json.loads(lines[heap_snap])
snap['callsites'][0]['live_bytes'] = -(1 << 63)
case('int64min', join(lines[:heap_snap] + [json.dumps(snap).encode()] + lines[heap_snap + 1:]), 0, '')
# ... while a kind's or a device's live bytes, one counter in the shim,
# never is: a negative one was printed as "-118 MiB" (issue 51), now
# refused with its line by every reader, top --once included.
for name, where in (('negheap', 'heap'), ('negdevice', 'devices')):
    snap = json.loads(lines[heap_snap])
    if where == 'heap':
        snap['heap']['live_bytes'] = -123731968
    else:
        snap['devices'] = [{'device': 0, 'live_bytes': -123731968, 'live_count': 1, 'peak_bytes': 0,
                            'allocs': 1, 'frees': 0, 'ooms': 0, 'recovered': 0}]
    msg = 'memtally: FILE:%d: field "live_bytes" is negative (-123731968)' % (heap_snap + 1)
    case(name, join(lines[:heap_snap] + [json.dumps(snap).encode()] + lines[heap_snap + 1:]), 1, msg)
    p = os.path.join(OUT, 'memtally.%s.p1.jsonl' % name)
    r = subprocess.run([MT, 'top', '--once', p], capture_output=True, text=True, timeout=60)
    mt.check(r.returncode == 1 and msg.replace('memtally: ', '').replace('FILE', p) in r.stderr and
             '-118 MiB' not in r.stdout,
             '%s (top --once): exit %d, stderr %r' % (name, r.returncode, r.stderr.strip()[:200]))
# ... and an OOM dump without a segment (memcpy from NULL)
p = os.path.join(OUT, 'memtally.noseg.p1.oom1.jsonl')
with open(p, 'wb') as f:
    f.write(join(lines[:first_snap] + [b'{"type":"oom","kind":"host","api":"malloc","requested_bytes":1,'
                                        b'"error":"ENOMEM","sampled":false}', lines[first_snap]]))
r = subprocess.run([MT, 'oom', p], capture_output=True, text=True)
mt.check(r.returncode == 0 and 'live at the OOM: 0 B' in r.stdout,
         'noseg: oom on a dump without segments: exit %d %r' % (r.returncode, r.stderr[-200:]))
# html on 100 k snapshots with a step mark (a day at MEMTALLY_INTERVAL=1):
# the growth-start search was quadratic (22 s here); prefix sums make it
# linear (0.3 s).  A watchdog far from both; the answer must be right.
p = os.path.join(OUT, 'memtally.many.p1.jsonl')
with open(p, 'w') as f:
    f.write(lines[0].decode() + '\n{"type":"stack","id":5,"pcs":["0x10"]}\n')
    for i in range(100000):
        live = 1000000 + (0 if i < 40000 else (i - 40000) * 100)
        f.write('{"type":"snapshot","seq":%d,"reason":"interval","elapsed_ms":%d,"marks":{"step":%d},'
                '"heap":{"live_bytes":%d},"callsites_mode":"%s","callsites":[{"stack":5,"kind":"heap",'
                '"live_bytes":%d,"live_count":1,"allocs":1,"alloc_bytes":%d,"frees":0,"peak_bytes":%d}]}\n'
                % (i, i * 1000, i, live, 'full' if i == 0 else 'delta', live, live, live))
try:
    r = subprocess.run([MT, 'html', p, '-o', os.path.join(OUT, 'many.html')], capture_output=True, text=True,
                       timeout=15)
    page = open(os.path.join(OUT, 'many.html')).read()
    import re
    m = re.search(r'Growth starts at step (\d+)', page)
    mt.check(r.returncode == 0 and m and 39990 <= int(m.group(1)) <= 40020,
             'many: html on 100 k snapshots names the growth start (%s)' % (m.group(0) if m else None))
except subprocess.TimeoutExpired:
    mt.check(False, 'many: html on 100 k snapshots took over 15 s (quadratic?)')

# 300 k modules in one maps record: keeping each once scanned all before it
# (quadratic); now a hash index.
p = os.path.join(OUT, 'memtally.mods.p1.jsonl')
with open(p, 'w') as f:
    f.write(lines[0].decode() + '\n{"type":"maps","modules":[')
    f.write(','.join('{"path":"/gone/m%d.so","base":"0x%x","start":"0x%x","end":"0x%x","offset":"0x0"}'
                     % (i, 0x10000000 + i * 0x1000, 0x10000000 + i * 0x1000, 0x10000000 + i * 0x1000 + 0x800)
                     for i in range(300000)))
    f.write(']}\n' + b'\n'.join(l for l in lines[1:] if b'"type":"maps"' not in l).decode() + '\n')
try:
    r = subprocess.run([MT, 'ranks', p], capture_output=True, text=True, timeout=20)
    mt.eq(r.returncode, 0, 'mods: 300 k modules read in time')
except subprocess.TimeoutExpired:
    mt.check(False, 'mods: 300 k modules took over 20 s (quadratic?)')

# A module path naming a FIFO (symbolizing opened it and waited forever)
fifo = os.path.join(OUT, 'fifo')
if not os.path.exists(fifo):
    os.mkfifo(fifo)
maps = [i for i, l in enumerate(lines) if b'"type":"maps"' in l][0]
m = json.loads(lines[maps])
for mod in m['modules']:
    mod['path'] = fifo
p = os.path.join(OUT, 'memtally.fifo.p1.jsonl')
with open(p, 'wb') as f:
    f.write(join(lines[:maps] + [json.dumps(m).encode()] + lines[maps + 1:]))
try:
    r = subprocess.run([MT, 'report', p], capture_output=True, text=True, timeout=30)
    mt.check(r.returncode == 0 and '[module gone]' in r.stdout, 'fifo: report names modules that are not files "gone"')
except subprocess.TimeoutExpired:
    mt.check(False, 'fifo: report hung on a module path naming a FIFO')

# Ids the file gives: sparse is legitimate (a fork child's ids start where
# its parent's stopped), and memory must follow the records, not the size
# of an id.  One stack record with id 33554432 in a 152-byte file cost
# 1.6 GB; 2^30 asked for 48 GB.  Each run under a watchdog, its peak RSS
# taken from the kernel.
def peak_run(argv, timeout):
    r = subprocess.run([sys.executable, '-c',
                        'import resource, subprocess, sys\n'
                        'r = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))\n'
                        'sys.stderr.write(r.stderr)\nsys.stdout.write(r.stdout)\n'
                        'sys.stderr.write("\\nmaxrss_kb=%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n'
                        'sys.exit(r.returncode)', str(timeout)] + argv, capture_output=True, text=True)
    kb = int(r.stderr.rsplit('maxrss_kb=', 1)[1]) if 'maxrss_kb=' in r.stderr else -1
    return r, kb
for big in (33554432, 1 << 30, 2147483647):
    p = os.path.join(OUT, 'memtally.sparse%d.p1.jsonl' % big)
    with open(p, 'w') as f:
        f.write(lines[0].decode() + '\n{"type":"stack","id":%d,"pcs":["0x10"]}\n' % big)
        f.write('{"type":"snapshot","seq":0,"reason":"exit","elapsed_ms":1,"heap":{"live_bytes":64},'
                '"callsites_mode":"full","callsites":[{"stack":%d,"kind":"heap","live_bytes":64,'
                '"live_count":1,"allocs":1,"alloc_bytes":64,"frees":0,"peak_bytes":64}]}\n' % big)
    r, kb = peak_run([MT, 'report', '--json', p], 60)
    ok = r.returncode == 0 and '"stack":%d,' % big in r.stdout
    mt.check(ok and 0 < kb < 256 * 1024,
             'sparse: a stack id of %d costs %d KiB (bound 256 MiB) and keeps its id: exit %d %r'
             % (big, kb, r.returncode, r.stderr[-200:]))
p = os.path.join(OUT, 'memtally.bigid.p1.jsonl')
with open(p, 'w') as f:
    f.write(lines[0].decode() + '\n{"type":"stack","id":2147483648,"pcs":["0x10"]}\n')
r = subprocess.run([MT, 'report', p], capture_output=True, text=True, timeout=30)
mt.check(r.returncode == 1 and '%s:2: stack id 2147483648 out of range (1..2147483647)' % p in r.stderr,
         'bigid: an id past 32 bits is refused with its line: %r' % r.stderr[-200:])

# A device ordinal of 2e9 in a 5 KB dump made `torch` write device lists
# without end.  The shim keeps an ordinal in a byte: more is refused.
dump_lines = [json.dumps({"type": "oom", "kind": "cuda", "api": "cuMemAlloc_v2", "requested_bytes": 1 << 30,
                          "error": "CUDA_ERROR_OUT_OF_MEMORY", "sampled": False, "device": 0}).encode(),
              b'{"type":"segment","kind":"cuda","address":"0x7e0000000000","size":1024,"stack":0,'
              b'"time_ms":1,"device":2e9,"stream":0,"mapped":false}',
              lines[first_snap]]
p = os.path.join(OUT, 'memtally.devord.p1.oom1.jsonl')
with open(p, 'wb') as f:
    f.write(join(lines[:first_snap] + dump_lines))
devline = first_snap + 2
for cmd in ('torch', 'oom'):
    try:
        r, kb = peak_run([MT, cmd, p] + (['-o', os.path.join(OUT, 'devord.pickle')] if cmd == 'torch' else []), 30)
        mt.check(r.returncode == 1 and 0 < kb < 256 * 1024 and
                 '%s:%d: device ordinal 2000000000 out of range (0..255)' % (p, devline) in r.stderr,
                 'devord (%s): a device ordinal of 2e9 is refused with its line (%d KiB): %r'
                 % (cmd, kb, r.stderr[-200:]))
    except subprocess.TimeoutExpired:
        mt.check(False, 'devord (%s): ran past 30 s' % cmd)
# Issue 45: what cannot be is refused with FILE:LINE and exit 1, by every
# reader, top --once included.  A stack record said again as it was is
# what the shim writes after a failed write: accepted.
snaps = [i for i, l in enumerate(lines) if b'"type":"snapshot"' in l]
second = snaps[1]
sj = json.loads(lines[second])
s0 = json.loads(lines[first_snap])['seq']
goes_back = lines[:second] + [json.dumps(dict(sj, seq=s0 + 5)).encode(), json.dumps(dict(sj, seq=s0 + 4)).encode()]
bad45 = {
    'seqback': (join(goes_back), 'memtally: FILE:%d: snapshot seq %d after seq %d (line %d): a file\'s seq never goes back'
                % (second + 2, s0 + 4, s0 + 5, second + 1)),
    'dupsnap': (join(lines[:second] + [lines[first_snap]] + lines[second:]),
                'memtally: FILE:%d: snapshot seq %d a second time (line %d has it): a duplicate snapshot'
                % (second + 1, s0, first_snap + 1)),
    'stacktwice': (join(lines[:drop + 1] + [b'{"type":"stack","id":%d,"pcs":["0x5","0x6"]}' % sid] + lines[drop + 1:]),
                   'memtally: FILE:%d: stack %d is defined a second time, with other frames' % (drop + 2, sid)),
    'pyframetwice': (join([lines[0], pyf, b'{"type":"pyframe","id":1,"file":"t.py","func":"g","line":3}'] + lines[1:]),
                     'memtally: FILE:3: pyframe 1 is defined a second time, as another frame'),
}
for name, (data, msg) in bad45.items():
    case(name, data, 1, msg)
    p = os.path.join(OUT, 'memtally.%s.p1.jsonl' % name)
    try:
        r = subprocess.run([MT, 'top', '--once', p], capture_output=True, text=True, timeout=60)
        mt.check(r.returncode == 1 and msg.replace('memtally: ', '').replace('FILE', p) in r.stderr,
                 '%s (top --once): exit %d, stderr %r' % (name, r.returncode, r.stderr.strip()[:200]))
    except subprocess.TimeoutExpired:
        mt.check(False, '%s (top --once): ran past 60 s' % name)
# Issue 51: a first line shorter than zstd's magic (four bytes) waited for
# a fourth byte for ever, and top --once spun at full CPU (before: killed
# by the watchdog); and three bytes that may begin the magic, which a
# file being written may still become, end --once (a frame, no record).
for name, data, msg in (('short3', b'{}\n', 'FILE:1: record without a "type"'),
                        ('short2', b'7\n', 'FILE:1: a record must be a JSON object')):
    p = os.path.join(OUT, 'memtally.%s.p1.jsonl' % name)
    with open(p, 'wb') as f:
        f.write(data)
    for argv in (['top', '--once', p], ['report', p]):
        try:
            r = subprocess.run([MT] + argv, capture_output=True, text=True, timeout=20)
            mt.check(r.returncode == 1 and msg.replace('FILE', p) in r.stderr,
                     '%s (%s): refused with its line, exit %d, stderr %r'
                     % (name, argv[0], r.returncode, r.stderr.strip()[-200:]))
        except subprocess.TimeoutExpired:
            mt.check(False, '%s (%s): spun past 20 s' % (name, argv[0]))
p = os.path.join(OUT, 'memtally.zprefix.p1.jsonl.zst')
with open(p, 'wb') as f:
    f.write(b'\x28\xb5\x2f')
try:
    r = subprocess.run([MT, 'top', '--once', p], capture_output=True, text=True, timeout=20)
    mt.check('no snapshot yet' in r.stdout, 'zprefix (top --once): one frame, exit %d' % r.returncode)
except subprocess.TimeoutExpired:
    mt.check(False, 'zprefix (top --once): spun past 20 s')
stk_line = next(l for l in lines if b'"type":"stack"' in l and json.loads(l)['id'] == sid)
case('stackagain', join(lines[:drop + 1] + [stk_line] + lines[drop + 1:]), 0, '')
case('pyframeagain', join([lines[0], pyf, pyf, pys, pys, stk] + lines[1:]), 0, '')

# A FIFO (no writer: open(2) without O_NONBLOCK waits for ever), named or in
# a run directory, or named by a dump's torch_snapshot, is refused naming
# it, by every command; each run has a watchdog, so a regression fails
# instead of hanging the suite.
fd = os.path.join(OUT, 'fifo45')
os.makedirs(fd)
with open(os.path.join(fd, 'memtally.h.p1.jsonl'), 'wb') as f:
    f.write(join(lines))
fifo = os.path.join(fd, 'memtally.h.p2.jsonl')
os.mkfifo(fifo)
dd = os.path.join(OUT, 'fifodump')
os.makedirs(dd)
fifodump = os.path.join(dd, 'memtally.h.p3.oom1.jsonl')
os.mkfifo(fifodump)
td = os.path.join(OUT, 'fifotorch')
os.makedirs(td)
tdump = os.path.join(td, 'memtally.h.p4.oom1.jsonl')
with open(tdump, 'wb') as f:
    f.write(join(lines[:first_snap] + [
        json.dumps({"type": "oom", "kind": "cuda", "api": "cuMemAlloc_v2", "requested_bytes": 1 << 30,
                    "error": "CUDA_ERROR_OUT_OF_MEMORY", "sampled": False, "device": 0}).encode(),
        lines[first_snap],
        b'{"type":"outcome","outcome":"raised","by":"torch","torch_snapshot":"t.torch.jsonl"}']))
with open(os.path.join(td, 'memtally.h.p5.jsonl'), 'wb') as f:  # html reads the run and its dumps
    f.write(join(lines))
tfifo = os.path.join(td, 't.torch.jsonl')
os.mkfifo(tfifo)
o = lambda n: ['-o', os.path.join(OUT, n)]
runs = [(['report', fd], fifo), (['report', fifo], fifo), (['leaks', fd], fifo), (['ranks', fd], fifo),
        (['flame', fd] + o('f.svg'), fifo), (['html', fd] + o('f.html'), fifo),
        (['pprof', fd] + o('f.pb.gz'), fifo), (['diff', fd + '/memtally.h.p1.jsonl', fifo], fifo),
        (['functions', fd], fifo), (['cat', fifo], fifo), (['top', '--once', fd], fifo),
        (['top', '--once', fifo], fifo), (['oom', dd], fifodump), (['oom', fifodump], fifodump),
        (['torch', fifodump] + o('f.pickle'), fifodump),
        (['oom', tdump], tfifo), (['torch', tdump] + o('t.pickle'), tfifo), (['html', td] + o('t.html'), tfifo)]
for argv, named in runs:
    try:
        r = subprocess.run([MT] + argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        mt.check(r.returncode == 1 and '%s: a FIFO, not a regular file' % named in r.stderr,
                 'FIFO (%s): exit %d, stderr %r' % (' '.join(argv[:2]), r.returncode, r.stderr.strip()[-200:]))
    except subprocess.TimeoutExpired:
        mt.check(False, 'FIFO (%s): blocked (killed after 20 s)' % ' '.join(argv[:2]))

# top divided a live change by a step difference cast to an integer: step
# marks 0.05 apart made it 0 (SIGFPE, exit 136).  Marks of several
# spacings, none an integer apart.
for gap in (0.05, 0.5, 1e-300, 0.999):
    p = os.path.join(OUT, 'memtally.steps%s.p1.jsonl' % gap)
    with open(p, 'w') as f:
        f.write('{"type":"header","version":3,"pid":1,"host":"h","exe":"/x","argv":["x"]}\n')
        f.write('{"type":"stack","id":1,"pcs":["0x10"]}\n')
        for i in range(6):
            f.write('{"type":"snapshot","seq":%d,"reason":"step","elapsed_ms":%d,"heap":{"live_bytes":%d},'
                    '"marks":{"step":%r},"callsites":[{"stack":1,"kind":"heap","live_bytes":%d}]}\n'
                    % (i, i * 10, (i + 1) << 20, i * gap, (i + 1) << 20))
    for argv in (['top', '--once', p], ['report', p], ['leaks', p]):
        r = subprocess.run([MT] + argv, capture_output=True, text=True, timeout=60)
        mt.check(r.returncode == 0, 'steps %g apart (%s): exit %d %r' % (gap, argv[0], r.returncode,
                                                                      r.stderr.strip()[-200:]))

mt.done()
