"""Strings from an input file never change the structure of what the
command writes for other programs: a snapshot reason, the OOM record's
kind and error and a trace event's op crafted to close their JSON string
and add keys.  Every --json output must parse, with the crafted text as a
value and no key it added.  (The first version printed these four with
%s: `memtally oom --json` then carried a key "injected".)  Also the HTML
page's data ('<' and non-finite numbers) and the flame graph's labels
(cut by characters, bytes that are not UTF-8 replaced) stay well-formed."""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
GOLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'golden', 'in')
EVIL = 'x","injected":1,"y":"'
d = os.path.join(OUT, 'in')
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
for p in glob.glob(GOLD + '/*.jsonl'):
    recs = [json.loads(l) for l in open(p)]
    for r in recs:
        if r.get('type') == 'snapshot':
            r['reason'] = EVIL
        if r.get('type') == 'oom':
            r['kind'] = 'cuda'  # the kind decides what a dump is; the error is free text
            r['error'] = EVIL
        if r.get('type') == 'trace':
            r['op'] = 'a"b:c}'  # ops are kept to 7 bytes
    with open(os.path.join(d, os.path.basename(p)), 'w') as f:
        f.write(''.join(json.dumps(r) + '\n' for r in recs))

def keys(v, acc):
    if isinstance(v, dict):
        for k, x in v.items():
            acc.add(k)
            keys(x, acc)
    elif isinstance(v, list):
        for x in v:
            keys(x, acc)
    return acc

for cmd in (['report', '--json'], ['leaks', '--json'], ['ranks', '--json'], ['oom', '--json'],
            ['diff', '--json', os.path.join(d, 'memtally.node1.r1.p101.jsonl'),
             os.path.join(d, 'memtally.node1.r0.p100.jsonl')]):
    args = [MT] + cmd + ([] if cmd[0] == 'diff' else [d])
    r = subprocess.run(args, capture_output=True, text=True)
    try:
        v = json.loads(r.stdout)
        ok = 'injected' not in keys(v, set())
        why = 'no key added' if ok else 'a key "injected" was added'
    except ValueError as e:
        ok, why = False, 'not JSON: %s' % e
    mt.check(r.returncode == 0 and ok, 'memtally %s: %s (exit %d)' % (cmd[0], why, r.returncode))
r = subprocess.run([MT, 'oom', '--json', d], capture_output=True, text=True)
v = json.loads(r.stdout) if r.returncode == 0 else {}
dump = (v.get('dumps') or [{}])[0]
mt.eq((dump.get('error'), [e.get('op') for e in dump.get('events', [])][:1]), (EVIL, ['a"b:c}']),
      'oom --json: the crafted error and op come through as values')
page = os.path.join(OUT, 'p.html')
r = subprocess.run([MT, 'html', d, '-o', page], capture_output=True, text=True)
data = open(page).read().split('<script id="mt-data" type="application/json">')[1].split('</script>')[0]
try:
    ok = 'injected' not in keys(json.loads(data), set())
except ValueError:
    ok = False
mt.check(r.returncode == 0 and ok, 'html: the page\'s data parses with no key added')

# The page: a label "<!--<script>" (HTML's script-data escape states then
# swallowed the page's own script) and a mark of 1e999 (printed "inf":
# JSON.parse failed).  The data must hold no '<' at all and parse.
d2 = os.path.join(OUT, 'page')
shutil.rmtree(d2, ignore_errors=True)
os.makedirs(d2)
src = os.path.join(GOLD, 'memtally.node1.r0.p100.jsonl')
lines = open(src).read().split('\n')
out = []
for l in lines:
    if l.startswith('{"type":"snapshot"'):
        l = l.replace('"marks":{"step":', '"label":"<!--<script></script>","marks":{"step":1e999,"s2":')
    out.append(l)
with open(os.path.join(d2, os.path.basename(src)), 'w') as f:
    f.write('\n'.join(out))
page = os.path.join(OUT, 'p2.html')
r = subprocess.run([MT, 'html', d2, '-o', page], capture_output=True, text=True)
mt.eq(r.returncode, 0, 'html on a file with "<!--<script>" labels and an infinite mark: exit code (%s)' % r.stderr[-200:])
if r.returncode == 0:
    data = open(page).read().split('<script id="mt-data" type="application/json">')[1].split('</script>')[0]
    mt.check('<' not in data, 'html: no "<" in the page\'s data (%d found)' % data.count('<'))
    try:
        v = json.loads(data)
        labels = v['processes'][0]['snapshots']['label']
        marks = v['processes'][0]['snapshots']['mark']
        ok = labels[0] == '<!--<script></script>' and marks[0] is None
    except (ValueError, KeyError, IndexError) as e:
        ok = False
    mt.check(ok, 'html: the data parses; the label comes back as written, the infinite mark as null')

# The flame graph: labels are cut to fit their frame; a cut inside a UTF-8
# character (a Python function named in Japanese), bytes that are not
# UTF-8, and U+FFFF / U+FFFE (UTF-8, but not XML characters: found by the
# fuzzer) made the SVG ill-formed.  At every width it must parse as XML.
import xml.etree.ElementTree as ET
d3 = os.path.join(OUT, 'flame')
shutil.rmtree(d3, ignore_errors=True)
os.makedirs(d3)
raw = open(src, 'rb').read()
raw = raw.replace(b'"func":"Model.forward"', ('"func":"%s"' % ('データを読み込む' * 6)).encode())
raw = raw.replace(b'"func":"load_batch"', b'"func":"\xef\xbf\xbf\xef\xbf\xbebad\xff\xc3(\xed\xa0\x80)bytes_' + b'x' * 60 + b'"')
with open(os.path.join(d3, os.path.basename(src)), 'wb') as f:
    f.write(raw.replace(b'\\xff', b'\xff').replace(b'\\xc3', b'\xc3').replace(b'\\xed\\xa0\\x80', b'\xed\xa0\x80'))
bad = []
for snap in range(0, 24, 4):
    svg = os.path.join(OUT, 'f%d.svg' % snap)
    r = subprocess.run([MT, 'flame', '--snapshot', str(snap), d3, '-o', svg], capture_output=True, text=True)
    try:
        ET.parse(svg)
    except (ET.ParseError, OSError) as e:
        bad.append('snapshot %d: %s' % (snap, e))
mt.check(not bad, 'flame: every SVG is well-formed XML with cut non-ASCII and non-UTF-8 names %s' % bad[:2])

# The same names in text and --json: bytes that are not UTF-8 reached the
# terminal raw and made --json output no strict reader takes.  Text shows
# each as \xNN, JSON as U+FFFD.
undecodable = []
for cmd in (['report', '--stacks'], ['leaks'], ['report', '--json'], ['leaks', '--json'], ['diff', '--json']):
    args = [MT] + cmd + ([d3, d3] if cmd[0] == 'diff' else [d3])
    r = subprocess.run(args, capture_output=True)
    try:
        t = r.stdout.decode('utf-8')
        if '--json' in cmd:
            json.loads(t)
    except ValueError as e:
        undecodable.append('%s: %s' % (' '.join(cmd), str(e)[:80]))
r = subprocess.run([MT, 'report', '--stacks', d3], capture_output=True)
mt.check(not undecodable and b'bad\\xff\\xc3(\\xed\\xa0\\x80)bytes_' in r.stdout,
         'text and --json: names with bytes that are not UTF-8 come out as UTF-8 %s' % undecodable[:3])

# Text output: control characters from a file (an ESC sequence in argv, a
# CR in a label, a Python name with a BEL) reach the terminal escaped.
d5 = os.path.join(OUT, 'ctl')
shutil.rmtree(d5, ignore_errors=True)
os.makedirs(d5)
recs = [json.loads(l) for l in open(src)]
for x in recs:
    if x.get('type') == 'header':
        x['argv'] = ['python3', '\x1b[2J\x1b[31mtrain.py\r']
    if x.get('type') == 'pyframe' and x['func'] == 'Model.forward':
        x['func'] = 'fwd\x07\x1b]0;title\x07'
    if x.get('type') == 'snapshot':
        x['label'] = 'step\rX'
with open(os.path.join(d5, os.path.basename(src)), 'w') as f:
    f.write(''.join(json.dumps(x) + '\n' for x in recs))
raw_ctl = []
for cmd in (['report', '--stacks'], ['leaks'], ['ranks']):
    r = subprocess.run([MT] + cmd + [d5], capture_output=True)
    if any(c < 0x20 and c not in (0x0a, 0x09) or c == 0x7f for c in r.stdout):
        raw_ctl.append(cmd[0])
    if cmd[0] == 'report':
        shown = b'\\x1b[31mtrain.py' in r.stdout
mt.check(not raw_ctl and shown, 'text output: control characters escaped (raw in %s; ESC shown as \\x1b: %s)'
         % (raw_ctl, shown))

# The PyTorch pickle: a Python function name with a byte that is not UTF-8
# (Python's pickle refused the whole file over it).
dump_src = os.path.join(GOLD, 'memtally.node1.r0.p100.oom1.jsonl')
raw = open(dump_src, 'rb').read()
raw = raw.replace(b'"id":14,"pcs":["0x7f0000007000"],"py":0', b'"id":14,"pcs":["0x7f0000007000"],"py":2')
raw = raw.replace(b'"func":"load_batch"', b'"func":"load\xff_batch"'.replace(b'\\xff', b'\xff'))
d6 = os.path.join(OUT, 'pk')
shutil.rmtree(d6, ignore_errors=True)
os.makedirs(d6)
dump6 = os.path.join(d6, os.path.basename(dump_src))
with open(dump6, 'wb') as f:
    f.write(raw)
pk = os.path.join(OUT, 'bad.pickle')
r = subprocess.run([MT, 'torch', dump6, '-o', pk], capture_output=True, text=True)
r2 = subprocess.run(['/usr/bin/python3', '-c', 'import pickle, sys; d = pickle.load(open(sys.argv[1], "rb")); '
                     'print(sorted({f["name"] for s in d["segments"] for b in s["blocks"] for f in b["frames"]}))', pk],
                    capture_output=True, text=True)
mt.check(r.returncode == 0 and r2.returncode == 0 and 'load\ufffd_batch' in r2.stdout,
         'torch: a name with a byte that is not UTF-8 gives a pickle Python loads (%s%s)'
         % (r2.stdout.strip()[:120], r2.stderr.strip()[-120:]))

# The shim's own writer: argv with bytes that are not UTF-8 (F5, an overlong
# form, a surrogate, a sequence cut short), and a label and a mark name cut
# to their buffers in the middle of a character.  Every line must decode as
# strict UTF-8 and parse (the header did not: F5-FF, overlong forms and
# surrogates passed through raw, and labels were cut mid-character).
SHIM = os.path.join(B, 'libmemtally.so')
d4 = os.path.join(OUT, 'shim')
shutil.rmtree(d4, ignore_errors=True)
prog = (b'import ctypes, sys\n'
        b'lib = ctypes.CDLL(None)\n'
        b'lib.memtally_mark.argtypes = [ctypes.c_char_p, ctypes.c_double]\n'
        b'lib.memtally_mark(("m" * 29 + "\u00e9\u00e9").encode(), 1.0)\n'
        b'lib.memtally_snapshot(("L" * 125 + "\u30c7\u30fc").encode())\n')
bad_arg = b'\xf5\x80\x80\x80|\xc0\xaf|\xe0\x80\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe3\x81'
r = subprocess.run([b'/usr/bin/python3', b'-c', prog, bad_arg],
                   env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d4), capture_output=True)
mt.eq(r.returncode, 0, 'shim: the program ran (%r)' % r.stderr[-200:])
ok, why = True, ''
recs = []
for p in mt.jsonl(d4):
    for i, l in enumerate(mt.raw(p).split(b'\n')):
        if not l:
            continue
        try:
            recs.append(json.loads(l.decode('utf-8', errors='strict')))
        except (UnicodeDecodeError, ValueError) as e:
            ok, why = False, '%s:%d: %s' % (os.path.basename(p), i + 1, e)
            break
mt.check(ok and recs, 'shim: every line is strict UTF-8 JSON %s' % why)
hdr = [x for x in recs if x.get('type') == 'header']
mt.check(hdr and hdr[0]['argv'][-1].count('\ufffd') >= 5 and '|' in hdr[0]['argv'][-1],
         'shim: the bad argv bytes became U+FFFD: %r' % (hdr[0]['argv'][-1] if hdr else None))
snaps = [x for x in recs if x.get('type') == 'snapshot' and x.get('label')]
mt.check(snaps and snaps[0]['label'] == 'L' * 125 and list(snaps[0].get('marks', {})) == ['m' * 29 + '\u00e9'],
         'shim: label and mark name cut before the character that did not fit: %r'
         % ((snaps[0]['label'][-5:], list(snaps[0].get('marks', {}))) if snaps else None,))
mt.done()
