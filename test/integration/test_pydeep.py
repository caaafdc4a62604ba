"""Whole Python stacks (issue 53): a Python stack is kept whole up to
MEMTALLY_PYDEPTH (64) frames; past it both ends are kept, the innermost
three quarters and the outermost quarter, with the count left out
between them (pystack.elided, elided_at; views: "[N Python frames left
out]"), so the script's outermost lines and the user's line a library
calls deep are never what is dropped:

  deep40, deep100: an allocation 40 and 100 Python frames deep (the
          script's own recursion): every frame kept at 40; at 100, 64 kept,
          the mark says 36, the innermost frame is the allocating line
          and the outermost the script's <module> line (report --stacks,
          --json frames); the pystack record says elided 36 at 48;
  library: the allocation 80 frames deep in a library (dist-packages)
          the script calls once: the row is the script's calling line;
  import: the import of a package 24 modules deep (about 150 frames,
          most of them importlib's frozen ones): the row of the module's
          allocation is the script's `import` line, and no row whose
          stack holds the script's frame is led by anything else
          (importlib's `<frozen ...>` frames above all);
  worker: (Debian's torch 1.13) the same import made in a DataLoader
          worker's __getitem__: in the workers' files no row is led by
          importlib's frozen frames where the script's frame is on the
          stack, and the import's row is the __getitem__ line."""
import json, os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
LIB = os.path.join(B, 'libmemtally.so')
PY = '/usr/bin/python3'
os.makedirs(OUT, exist_ok=True)
# a library where Python keeps its packages (what the user's line skips)
PKG = os.path.join(OUT, 'lib', 'python3', 'dist-packages')
os.makedirs(os.path.join(PKG, 'chain'), exist_ok=True)
open(os.path.join(PKG, 'chain', '__init__.py'), 'w').close()
LEVELS = 24
for i in range(LEVELS):
    with open(os.path.join(PKG, 'chain', 'm%d.py' % i), 'w') as f:
        f.write('import chain.m%d\n' % (i + 1) if i + 1 < LEVELS else 'BLOB = bytearray(3000000)\n')
with open(os.path.join(PKG, 'deeplib.py'), 'w') as f:
    f.write('keep = []\n'
            'def down(n):\n'
            '    if n == 0:\n'
            '        keep.append(bytearray(700000))\n'
            '    else:\n'
            '        down(n - 1)\n')


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=kw.pop('timeout', 300), **kw)


def run(name, src, *args):
    script = os.path.join(OUT, name + '.py')
    with open(script, 'w') as f:
        f.write(src)
    out = os.path.join(OUT, name)
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTALLY_OUT=out, PYTHONPATH=PKG)
    r = sh([PY, script] + list(args), env=env)
    mt.eq(r.returncode, 0, '%s: exit code (%s)' % (name, r.stderr[-300:]))
    return script, out


def line_of(script, tag):
    return [i + 1 for i, l in enumerate(open(script)) if tag in l][0]


def procs(out):
    r = sh([MT, 'report', '--json', '--stacks', '--top', '100000', out])
    return json.loads(r.stdout)['processes']


def sites_of(p):
    return p['last']['callsites'] + p['peak']['callsites']


def py_frames(c):
    return [f for f in c['frames'] if f.get('python') or (f['function'] or '').startswith('[')]


def led_right(name, out, script, want_lead):
    """Every row whose stack holds the script's frame is led by the
    script's line; the row holding want_lead's bytes is that line."""
    base = os.path.basename(script)
    bad, seen, blob = [], 0, []
    for p in procs(out):
        for c in sites_of(p):
            # made under the script's line: its frame, or the library's
            # (the script alone calls it), on the stack
            if any(f['file'] == script or f['file'].startswith(PKG) for f in c['frames']
                   if f.get('python')):
                seen += 1
                if not c['where'].startswith(base + ':'):
                    bad.append(c['where'])
            if c['alloc_bytes'] in (700001, 3000001) and c['allocs'] == 1:
                blob.append(c['where'])
    mt.check(seen and not bad, '%s: all %d sites made under the script\'s line are led by it%s'
             % (name, seen, (': not ' + repr(bad[:3])) if bad else ''))
    mt.check(blob and all(w.startswith(want_lead) for w in blob),
             '%s: the deepest allocation\'s row is %r (%r)' % (name, want_lead, blob[:2]))
    rep = sh([MT, 'report', '--top', '100000', out]).stdout
    mt.check(want_lead in rep, '%s: a row reads %r' % (name, want_lead))
    frozen = [l for l in rep.splitlines() if re.search(r'(?:KiB|MiB|B) (?:heap|mmap)\s+\S* ?\(<frozen', l)
              and base in l]
    mt.check(not frozen, '%s: no row led by <frozen ...> names the script (%r)' % (name, frozen[:2]))


DEEP = '''import os, sys
keep = []
def down(n):
    if n == 0:
        keep.append(bytearray(500000))  # ALLOC
    else:
        down(n - 1)
down(int(sys.argv[1]))  # OUTER
os._exit(0)
'''
for depth in (40, 100):
    if not mt.case('deep%d' % depth):
        continue
    name = 'deep%d' % depth
    script, out = run(name, DEEP, str(depth - 2))  # down() depth - 1 times, and <module>
    alloc, outer = line_of(script, '# ALLOC'), line_of(script, '# OUTER')
    p = procs(out)[0]
    cs = [c for c in p['last']['callsites'] if c['where'].startswith('%s.py:%d  ' % (name, alloc))]
    mt.eq(len(cs), 1, '%s: one row at the allocating line' % name)
    if not cs:
        continue
    pf = py_frames(cs[0])
    kept = [f for f in pf if f.get('python')]
    marks = [f['function'] for f in pf if not f.get('python')]
    mt.eq((kept[0]['function'], kept[0]['line']), ('down', alloc), '%s: innermost Python frame' % name)
    mt.eq((kept[-1]['function'], kept[-1]['line'], kept[-1]['file']), ('<module>', outer, script),
          '%s: outermost Python frame is the script\'s <module> line' % name)
    if depth <= 64:
        mt.eq((len(kept), marks), (depth, []), '%s: every frame kept, no mark' % name)
    else:
        mt.eq((len(kept), marks), (64, ['[%d Python frames left out]' % (depth - 64)]),
              '%s: 64 frames kept and the mark' % name)
        i = [k for k, f in enumerate(pf) if not f.get('python')][0]
        mt.eq(i, 48, '%s: the mark after the innermost 48' % name)
        st = sh([MT, 'report', '--stacks', out]).stdout
        mt.check('[%d Python frames left out]\n' % (depth - 64) in st and
                 '<module> (%s:%d)' % (script, outer) in st,
                 '%s: --stacks shows the mark and the <module> line' % name)
        fold = sh([MT, 'flame', '--folded', out]).stdout
        d7 = r'down \(%s:%d\);' % (re.escape(name + '.py'), outer - 1)
        mt.check(re.search(r'<module> \(%s:%d\);(?:%s)+\[%d Python frames left out\];(?:%s)+down \(%s:%d\)'
                           % (re.escape(name + '.py'), outer, d7, depth - 64, d7, re.escape(name + '.py'), alloc),
                           fold),
                 '%s: flame --folded carries <module>, the mark and the allocating frame' % name)
        recs = [json.loads(l) for l in sh([MT, 'cat', out]).stdout.splitlines() if '"pystack"' in l]
        el = [(r.get('elided'), r.get('elided_at'), len(r['frames'])) for r in recs if r.get('elided')]
        mt.check((depth - 64, 48, 64) in el, '%s: a pystack record elided %d at 48 of 64 (%r)'
                 % (name, depth - 64, el[:3]))

if mt.case('library'):
    script, out = run('library', 'import os, deeplib\n'
                      'deeplib.down(80)  # CALL\n'
                      'os._exit(0)\n')
    led_right('library', out, script, 'library.py:%d  deeplib.down(80)' % line_of(script, '# CALL'))

if mt.case('import'):
    script, out = run('importer', 'import os\n'
                      'import chain.m0  # IMPORT\n'
                      'os._exit(0)\n')
    led_right('import', out, script, 'importer.py:%d  import chain.m0' % line_of(script, '# IMPORT'))

if mt.case('worker'):
    if sh([PY, '-c', mt.FIND_TORCH]).returncode:
        print('  skip worker: no torch')
    else:
        script, out = run('worker', '''import torch
from torch.utils.data import DataLoader, Dataset
class DS(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        import chain.m0  # WORKER_IMPORT
        return torch.zeros(4)
if __name__ == "__main__":
    for b in DataLoader(DS(), num_workers=2, batch_size=2):  # LOOP
        pass
''')
        # the workers' files alone (the parent's, torch's import, is a
        # minute of symbolization with every site's stack)
        heads = {}
        for fn in os.listdir(out):
            head = json.loads(sh([MT, 'cat', os.path.join(out, fn)]).stdout.split('\n', 1)[0])
            heads[os.path.join(out, fn)] = (head['pid'], head['ppid'])
        pids = {pid for pid, ppid in heads.values()}
        wdir = os.path.join(OUT, 'workers')
        shutil.rmtree(wdir, ignore_errors=True)
        os.makedirs(wdir)
        for path, (pid, ppid) in heads.items():
            if ppid in pids:
                os.link(path, os.path.join(wdir, os.path.basename(path)))
        mt.check(len(os.listdir(wdir)) >= 2, 'worker: the workers\' files (%d)' % len(os.listdir(wdir)))
        led_right('worker', wdir, script, 'worker.py:%d  import chain.m0' % line_of(script, '# WORKER_IMPORT'))
mt.done()
