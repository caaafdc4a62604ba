"""Why is it still alive (issue 46): PyTorch CPU trainers that never import
memtally, under `memtally run` with no option (Debian's torch 1.13), each
keeping something of every step in a holder of another shape (a global
list through the autograd graph, a dict keyed by step, a class attribute,
an lru_cache'd function, a dataclass, a closure cell, a local of a function
still running; and the combined trainer of issue 46's "done when"); the
line that keeps it ends with "# LEAK".  For each shape, `memtally leaks --json`
has the suspect row of the leaking line (or, for the graph, the row of
the line whose activations the graph keeps) carry `kept_by`, a chain whose
root is the holder (how and name) and which goes on as the shape says;
`leaks` and `report` print "kept alive by:" under it, the HTML page beside
it.  The shim's C API (memtally_owner, memtally_site_live,
memtally_record) answers from ctypes under LD_PRELOAD.  The fixed variants (nothing
kept) write no "kept" record and no suspect has `kept_by`.  A Python
process without torch is unaffected (no record, same output).  The file's
kept records are well formed (doc/FORMAT.md).  Issue 51: the search runs
none of the program's code (a saved_tensors_hooks unpack hook is not
called, a local's __del__ runs when it would without memtally) and keeps
its time and memory bounds whatever the program holds.  `make test` runs
the holders whose chains differ in kind and one fixed variant; MT_FULL=1
all of them."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
PY = '/usr/bin/python3'
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'PYTHONPATH'}
try:
    subprocess.run([PY, '-c', mt.FIND_TORCH], check=True, capture_output=True)
except subprocess.CalledProcessError:
    print('  FAIL python3-torch is not installed (scripts/setup-deps.sh installs it)')
    sys.exit(1)

HEAD = '''import torch
import torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
STEPS = 48
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.001)


def step(x):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

# name: (holder's definition, the loop's body that keeps, how the chain
# starts (how, name), what follows the root (a list of "how" of the next
# steps, checked as a prefix), the fixed line instead of the leak)
SHAPES = {
    # a list at module level keeping each step's output with its graph:
    # the first Linear's input (x) is saved by the graph
    'graph': ('history = []\n', '    history.append(model(x).sum())  # LEAK\n',
              ('global', 'history'), ['item', 'attr'], '    history.append(float(model(x).sum()))\n'),
    # a dict keyed by step
    'cache': ('cache = {}\n', '    cache[i] = x * 1.5  # LEAK\n',
              ('global', 'cache'), ['key'], '    cache[i] = float((x * 1.5).sum())\n'),
    # a class attribute
    'classattr': ('class Store:\n    items = []\n', '    Store.items.append(x * 1.5)  # LEAK\n',
                  ('global', 'Store'), ['attr', 'item'], '    Store.items.append(float(x.sum()))\n'),
    # an lru_cache'd function: its cache, keyed by the call's arguments
    'lru': ('import functools\n\n\n@functools.lru_cache(maxsize=None)\ndef scaled(i, x=None):\n'
            '    return x * 1.5\n', '    scaled(i, x)  # LEAK\n', ('global', 'scaled'), ['ref', 'key'],
            '    float(scaled.__wrapped__(i, x).sum())\n'),
    # a tensor kept through a dataclass
    'dataclass': ('import dataclasses\n\n\n@dataclasses.dataclass\nclass Rec:\n    t: torch.Tensor\n\n\n'
                  'records = []\n', '    records.append(Rec(x * 1.5))  # LEAK\n', ('global', 'records'),
                  ['item', 'attr'], '    records.append(Rec(float(x.sum())))\n'),
    # a closure's cell
    'closure': ('def make():\n    seen = []\n\n    def remember(t):\n        seen.append(t)\n'
                '    return remember\n\n\nremember = make()\n',
                '    remember(x * 1.5)  # LEAK\n', ('global', 'remember'), ['cell', 'item'],
                '    remember(float(x.sum()))\n'),
}


def script(shape, fixed, loop='module'):
    holder, keep, _, _, fix = SHAPES[shape]
    body = fix if fixed else keep
    if loop == 'module':
        return HEAD + holder + '\nfor i in range(STEPS):\n    x = torch.randn(128, 256)\n    step(x)\n' + body
    # a local list of a function that is still running at the checks
    return HEAD + '''

def train():
    kept = []
    for i in range(STEPS):
        x = torch.randn(128, 256)
        step(x)
        kept.append(x * 1.5)  # LEAK
    return len(kept)


print(train())
'''


def run(name, src):
    d = os.path.join(OUT, name)
    path = os.path.join(OUT, name + '.py')
    with open(path, 'w') as f:
        f.write(src)
    r = subprocess.run([MT, 'run', '--out', d, '--', PY, path], env=env0, capture_output=True,
                       text=True, timeout=280)
    leak_line = [i + 1 for i, l in enumerate(src.splitlines()) if l.endswith('# LEAK')]
    return r, d, path, leak_line[0] if leak_line else None


def kept_records(d):
    recs = []
    for p in mt.jsonl(d):
        for l in mt.lines(p):
            if l.startswith('{"type":"kept"'):
                recs.append(json.loads(l))
    return recs


def suspects(d):
    r = subprocess.run([MT, 'leaks', '--json', d], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    ps = json.loads(r.stdout)['processes']
    return (ps[0]['suspects'] if ps else []), ''


def well_formed(recs):
    for k in recs:
        if not (isinstance(k.get('stack'), int) and k['stack'] > 0 and k['chain'] and
                all(isinstance(s.get(f), str) for s in k['chain'] for f in ('how', 'name', 'type'))
                and k['chain'][0]['how'] in ('global', 'local')):
            return False
    return True


def leak_case(name, src, root, after, graph=False, row_text=None):
    """row_text: the allocating line's text when it is not the # LEAK
    line (a cached function's body)."""
    r, d, path, line = run(name, src)
    mt.eq(r.returncode, 0, '%s: exit code (%s)' % (name, r.stderr[-300:]))
    mt.eq([l for l in r.stderr.splitlines() if l.startswith('memtally:') and 'new file' not in l],
          [], '%s: no memtally: warning' % name)
    recs = kept_records(d)
    mt.check(recs and well_formed(recs), '%s: kept records, well formed (%d)' % (name, len(recs)))
    sus, err = suspects(d)
    base = os.path.basename(path)
    # the graph keeps the activations: the row whose line made them is the
    # one the leaking line's graph saves (x, made at the loop's randn);
    # others: the leaking line's own row
    want = (lambda s: 'torch.randn' in s['where']) if graph else \
        (lambda s: '%s:%d' % (base, line) in s['where'] or (row_text and row_text in s['where']))
    row = [s for s in (sus or []) if want(s)]
    mt.check(row, '%s: a suspect row for the leak (%s)' % (name, [s['where'][:60] for s in sus or []] or err))
    kb = row[0].get('kept_by') if row else None
    mt.check(kb and (kb[0]['how'], kb[0]['name']) == root,
             '%s: kept_by starts at %s: %s' % (name, root, kb and kb[:3]))
    mt.check(kb and [s['how'] for s in kb[1:1 + len(after)]] == after,
             '%s: then %s: %s' % (name, after, kb and [s['how'] for s in kb]))
    if graph:
        mt.check(kb and kb[-1]['how'] == 'saved' and kb[-1]['name'].startswith('_saved_') and
                 any(s['name'] == 'grad_fn' for s in kb),
                 '%s: through grad_fn to a saved tensor: %s' % (name, kb and kb[-2:]))
    if kb and kb[0]['how'] == 'global':
        mt.check(re.match(r'%s:\d+$' % re.escape(base), kb[0].get('where', '')) is not None,
                 '%s: the global\'s where is the file and its line: %s' % (name, kb[0].get('where')))
    # report at the last step's snapshot, where the leak is live (a loop in
    # a function has returned by the last snapshot, and the heap's peak
    # may be torch's import, one row of ~60 MiB with whole Python stacks)
    steps = [s['seq'] for f in mt.files(d) for s in f.snapshots if s.get('reason') == 'step']
    for cmd in (['leaks'], ['report'] + (['--snapshot', str(steps[-1])] if steps else [])):
        t = subprocess.run([MT] + cmd + [d], capture_output=True, text=True).stdout
        cmd = cmd[0]
        mt.check(('kept alive by: %s (%s ' % (root[1], root[0])) in t,
                 '%s: %s prints "kept alive by: %s (%s ..."' % (name, cmd, root[1], root[0]))
    return recs


def unkept_case(name, src, case, args=()):
    """A suspect row with no chain says which case it is (kept_why in
    JSON, "no chain: ..." in text)."""
    d = os.path.join(OUT, name)
    path = os.path.join(OUT, name + '.py')
    with open(path, 'w') as f:
        f.write(src)
    r = subprocess.run([MT, 'run', '--out', d] + list(args) + ['--', PY, path], env=env0,
                       capture_output=True, text=True, timeout=280)
    mt.eq(r.returncode, 0, '%s: exit code (%s)' % (name, r.stderr[-300:]))
    line = [i + 1 for i, l in enumerate(src.splitlines()) if l.endswith('# LEAK')][0]
    sus, err = suspects(d)
    row = [s for s in (sus or []) if '%s.py:%d' % (name, line) in s['where']]
    mt.check(row, '%s: a suspect row for the leak (%s)' % (name, [s['where'][:60] for s in sus or []] or err))
    why = row[0].get('kept_why') if row else None
    mt.check(row and row[0].get('kept_by') is None and why and why.get('case') == case,
             '%s: no chain, kept_why says %s: %s' % (name, case, why))
    t = subprocess.run([MT, 'leaks', d], capture_output=True, text=True).stdout
    mt.check(why and ('no chain: ' + why.get('text', '?')) in t,
             '%s: leaks prints "no chain: %s"' % (name, why and why.get('text')))


def fixed_case(name, src):
    r, d, path, line = run(name, src)
    mt.eq(r.returncode, 0, '%s: exit code (%s)' % (name, r.stderr[-300:]))
    recs = kept_records(d)
    mt.eq(recs, [], '%s: no kept record' % name)
    sus, err = suspects(d)
    mt.check(sus is not None and not [s for s in sus if s.get('kept_by')],
             '%s: no suspect has kept_by (%s)' % (name, err))


# `make test`: the graph's case alone, and the trainer case holds the
# other holders whose chains differ in kind (the key of a dict; lru's
# ref; a closure's cell), one process for them all; MT_FULL=1 (`make
# check`): each holder in a process of its own, and the trainer its two
FAST = ('graph',)
for shape in SHAPES:
    if (mt.full() or shape in FAST or os.environ.get('MEMTALLY_CASE')) and mt.case(shape):
        _, _, root, after, _ = SHAPES[shape]
        leak_case(shape, script(shape, False), root, after, graph=shape == 'graph',
                  row_text='return x * 1.5' if shape == 'lru' else None)

if mt.case('local'):
    leak_case('local', script('cache', False, loop='function'), ('local', 'kept'), ['item'])

if mt.case('trainer'):
    # issue 46's "done when": one trainer keeps each step's output in a
    # global list and caches batches in a global dict; leaks names both
    # make test: lru's and the closure's holders too (their own cases
    # with MT_FULL=1)
    more = () if mt.full() else ('lru', 'closure')
    src = HEAD + 'history = []\ncache = {}\n' + ''.join(SHAPES[m][0] for m in more) + '''
for i in range(STEPS):
    x = torch.randn(128, 256)
    step(x)
    history.append(model(x).sum())
    cache[i] = x * 1.5
''' + ''.join(SHAPES[m][1].replace('x * 1.5', 'x * 2.5' if m == 'lru' else 'x * 3.5') for m in more)
    r, d, path, _ = run('trainer', src)
    sus, err = suspects(d)
    roots = {}
    for s in sus or []:
        if s.get('kept_by'):
            roots.setdefault(s['kept_by'][0]['name'], []).append(s)
    mt.check('history' in roots and 'cache' in roots,
             'trainer: suspects kept by history and by cache: %s' % {k: [s['where'][:40] for s in v] for k, v in roots.items()})
    c = [s for s in roots.get('cache', []) if 'cache[i] = x * 1.5' in s['where']]
    mt.check(c and [st['how'] for st in c[0]['kept_by']] == ['global', 'key'],
             'trainer: the cache line\'s row is kept by cache, by key')
    h = [s for s in roots.get('history', []) if 'history.append' in s['where']]
    mt.check(h and any(st['how'] == 'saved' for st in h[0]['kept_by']),
             'trainer: the history line\'s row is kept by history through the graph')
    for m in more:  # the row, its chain's root and what follows it
        _, _, root, after, _ = SHAPES[m]
        text = 'return x * 1.5' if m == 'lru' else 'remember(x * 3.5)'
        row = [x for x in sus or [] if text in x['where']]
        kb = row[0].get('kept_by') if row else None
        mt.check(kb and (kb[0]['how'], kb[0]['name']) == root and
                 [st['how'] for st in kb[1:1 + len(after)]] == after,
                 'trainer: the %s holder\'s row (%s) is kept by %s, then %s: %s'
                 % (m, text, root, after, kb and [(st['how'], st['name']) for st in kb[:4]]))
    # the page shows the chain beside the suspect (rendered by Chromium)
    page = os.path.join(OUT, 'trainer.html')
    subprocess.run([MT, 'html', d, '-o', page], capture_output=True, text=True)
    dom = subprocess.run(['chromium', '--headless', '--no-sandbox', '--disable-gpu',
                          '--virtual-time-budget=5000', '--dump-dom', 'file://' + page],
                         capture_output=True, text=True, timeout=120).stdout
    mt.check('kept alive by: cache (global dict, trainer.py:' in dom and
             'kept alive by: history (global list, trainer.py:' in dom,
             'trainer: the HTML page shows both chains beside their suspects')

# a leak that starts late (step 50 of 150, step 100 of 300): the search
# follows growth, not the step's number (issue 53)
LATE = HEAD + '''import sys
STEPS, FROM = int(sys.argv[1]), int(sys.argv[2])
history = []
for i in range(STEPS):
    x = torch.randn(16, 256)
    step(x)
    if i >= FROM:
        history.append(torch.randn(64, 256) * 1.5)  # LEAK
'''
if mt.case('late'):
    for steps, start in ((150, 50), (300, 100)) if mt.full() else ((150, 50),):
        name = 'late%d_%d' % (steps, start)
        path = os.path.join(OUT, name + '.py')
        with open(path, 'w') as f:
            f.write(LATE)
        d = os.path.join(OUT, name)
        r = subprocess.run([MT, 'run', '--out', d, '--', PY, path, str(steps), str(start)], env=env0,
                           capture_output=True, text=True, timeout=280)
        mt.eq(r.returncode, 0, '%s: exit code (%s)' % (name, r.stderr[-300:]))
        sus, err = suspects(d)
        line = [i + 1 for i, l in enumerate(LATE.splitlines()) if l.endswith('# LEAK')][0]
        row = [s for s in (sus or []) if '%s.py:%d' % (name, line) in s['where']]
        mt.check(row, '%s: a suspect row for the leak (%s)' % (name, [s['where'][:60] for s in sus or []] or err))
        kb = row[0].get('kept_by') if row else None
        mt.check(kb and (kb[0]['how'], kb[0]['name']) == ('global', 'history'),
                 '%s: kept_by starts at the global history: %s (%s)' % (name, kb and kb[:2], row and row[0].get('kept_why')))
        recs = kept_records(d)
        mt.check(recs and min(k['step'] for k in recs if 'step' in k) < steps,
                 '%s: the chain was found at a step, before exit (%s)' % (name, [k.get('step') for k in recs]))

if mt.case('unkept'):
    # searched after the growth began, but a bytearray's buffer is not
    # mapped to its site: no path from the program's names
    unkept_case('nopath', HEAD + '''hidden = []
for i in range(64):
    step(torch.randn(128, 256))
    hidden.append(bytearray(65536))  # LEAK
''', 'no_path')
    # a process without steps (torch imported, no optimizer): searched at
    # exit only
    unkept_case('nosteps', '''import time
import torch
kept = []
for i in range(100):
    kept.append(torch.randn(64, 256) * 1.5)  # LEAK
    time.sleep(0.04)
''', 'no_steps', ['--interval', '0.2'])

if mt.case('capi'):
    # the shim's C API the search rests on, from ctypes under LD_PRELOAD
    src = '''import ctypes, json
lib = ctypes.CDLL(None)
libc = ctypes.CDLL(None)  # the process's malloc: the shim's (a handle on libc.so.6 would bypass it)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
lib.memtally_owner.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint)]
lib.memtally_site_live.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_longlong)]
sid, live = ctypes.c_uint(0), ctypes.c_longlong(0)
ps = [libc.malloc(1 << 20) for _ in range(3)]
owned = [lib.memtally_owner(p, ctypes.byref(sid)) for p in ps]
stack = sid.value
inner = lib.memtally_owner(ps[0] + 8, ctypes.byref(sid))
r_live = lib.memtally_site_live(stack, ctypes.byref(live))
bad_id = lib.memtally_site_live(0xfffffff0, ctypes.byref(live))
r_live_v = None
lib.memtally_site_live(stack, ctypes.byref(live))
r_live_v = live.value
libc.free(ps[0])
gone = lib.memtally_owner(ps[0], ctypes.byref(sid))
rec = [lib.memtally_record(x) for x in (b'{"type":"kept","stack":%d,"chain":[{"how":"global","name":"a","type":"list"}]}' % stack,
                                         b'{"a":1}\\n{"b":2}', b'not json', b'{' + b'x' * 70000 + b'}', b'')]
print(json.dumps({'owned': owned, 'stack': stack, 'inner': inner, 'live': [r_live, r_live_v], 'bad_id': bad_id,
                  'gone': gone, 'rec': rec}))
'''
    path = os.path.join(OUT, 'capi.py')
    with open(path, 'w') as f:
        f.write(src)
    d = os.path.join(OUT, 'capi')
    env = dict(env0, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=d)
    os.makedirs(d, exist_ok=True)
    r = subprocess.run([PY, path], env=env, capture_output=True, text=True, timeout=120)
    got = json.loads(r.stdout) if r.returncode == 0 and r.stdout else {}
    mt.eq(got.get('owned'), [0, 0, 0], 'memtally_owner: each live 1 MiB block is tracked')
    mt.check(got.get('stack', 0) > 0, 'memtally_owner: its stack id (%s)' % got.get('stack'))
    mt.eq(got.get('inner'), 1, 'memtally_owner: an address inside a block is no block\'s start')
    mt.check(got.get('live', [None])[0] == 0 and got['live'][1] >= 3 << 20,
             'memtally_site_live: the site holds the 3 MiB (%s)' % got.get('live'))
    mt.eq(got.get('bad_id'), 1, 'memtally_site_live: an id not given out')
    mt.eq(got.get('gone'), 1, 'memtally_owner: a freed block is no one\'s')
    mt.eq(got.get('rec'), [0, 1, 1, 1, 1], 'memtally_record: one line written; a newline, '
          'not an object, over 64 KiB, empty: refused')
    recs = kept_records(d)
    mt.eq([k['stack'] for k in recs], [got.get('stack')], 'the file holds the one kept record')
    rd = subprocess.run([MT, 'cat', d], capture_output=True, text=True)
    mt.eq(rd.returncode, 0, 'the reader takes the file (%s)' % rd.stderr[-200:])

if mt.case('fixed'):
    for shape in ('graph', 'cache', 'classattr') if mt.full() else ('graph',):
        fixed_case('fixed-' + shape, script(shape, True))

# issue 51, 4: the search never runs the program's code and keeps its
# bounds.  Each program is run with and without memtally: the same exit
# status and output.
# - unpack: a graph whose tensors were saved under the program's
#   saved_tensors_hooks is kept (the search reaches its grad_fn): the
#   program's unpack hook is called as often as without memtally (never)
UNPACK = HEAD + '''calls = [0]


def pack(t):
    return t


def unpack(t):
    calls[0] += 1
    return t


history = []
for i in range(12):
    x = torch.randn(128, 256)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        history.append(model(x).sum())
    step(x)
print('unpack calls', calls[0])
'''
# - fdel: a local of a running function is rebound each step; its old
#   object's __del__ runs then, not later (3.11's f_locals kept it)
FDEL = HEAD + '''

class Noisy:
    def __init__(self, i):
        self.i = i

    def __del__(self):
        print('del', self.i)


def train():
    for i in range(10):
        obj = Noisy(i)
        print('step', i + 1)
        step(torch.randn(128, 256))
    return obj.i


print('last', train())
'''
# - budget: a million-item list, a dict of 300,000 entries and a chain
#   300,000 deep in scope: each search keeps its budget (1 s: returns
#   within 10) and its memory (the peak grows by less than 150 MB)
BUDGET = HEAD + '''import json, resource, sys


class Node:
    def __init__(self, nxt):
        self.nxt = nxt


items = [[i] for i in range(1000000)]
table = {i: (i,) for i in range(300000)}
head = None
for i in range(300000):
    head = Node(head)


def rss_kb():
    with open('/proc/self/status') as f:
        return [int(l.split()[1]) for l in f if l.startswith('VmRSS:')][0]


before = rss_kb()
for i in range(9):
    step(torch.randn(128, 256))
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
why = sys.modules.get('_memtally.why')
st = why.stats if why else {}
print(json.dumps({'searches': st.get('searches'), 'max_seconds': st.get('max_seconds'),
                  'grew_mb': grew / 1024.0}))
'''


def same_as_plain(name, src, want=None):
    r, d, path, _ = run(name, src)
    plain = subprocess.run([PY, path], env=env0, capture_output=True, text=True, timeout=280)
    mt.eq((r.returncode, r.stdout), (plain.returncode, plain.stdout),
          '%s: the same exit status and output as without memtally (%s)' % (name, r.stderr[-300:]))
    if want:
        mt.check(want in plain.stdout, '%s: the program says %r (%s)' % (name, want, plain.stdout[-200:]))
    mt.eq([l for l in r.stderr.splitlines() if l.startswith('memtally:') and 'new file' not in l],
          [], '%s: no memtally: warning' % name)
    return r, d


if mt.case('unpack'):
    r, d = same_as_plain('unpack', UNPACK, 'unpack calls 0')

if mt.case('fdel'):
    same_as_plain('fdel', FDEL, 'del 3\nstep 5')

if mt.case('budget'):
    r, d, path, _ = run('budget', BUDGET)
    mt.eq(r.returncode, 0, 'budget: exit code (%s)' % r.stderr[-300:])
    try:
        got = json.loads(r.stdout.splitlines()[-1])
    except (ValueError, IndexError):
        got = {}
    mt.check((got.get('searches') or 0) >= 1, 'budget: a search ran at a step (%s)' % got)
    mt.check(got.get('max_seconds') is not None and got['max_seconds'] < 10,
             'budget: each search returned within 10 s of its 1 s budget (%s)' % got.get('max_seconds'))
    mt.check(got.get('grew_mb') is not None and got['grew_mb'] < 150,
             'budget: the peak grew by less than 150 MB (%s)' % got.get('grew_mb'))

if mt.case('notorch'):
    src = 'import sys\nkept = []\nfor i in range(2000):\n    kept.append(bytes(4096))\nprint(len(kept))\n'
    path = os.path.join(OUT, 'notorch.py')
    with open(path, 'w') as f:
        f.write(src)
    plain = subprocess.run([PY, path], env=env0, capture_output=True, text=True)
    d = os.path.join(OUT, 'notorch')
    r = subprocess.run([MT, 'run', '--out', d, '--', PY, path], env=env0, capture_output=True,
                       text=True, timeout=280)
    mt.eq((r.returncode, r.stdout), (plain.returncode, plain.stdout), 'no torch: same exit and output')
    mt.eq(kept_records(d), [], 'no torch: no kept record')

mt.done()
