"""The shim's CFI walker against libunwind on programs nobody here wrote:
the checking build ($(B)/cfi-check, MT_CFI_CHECK) walks every stack the
CFI walker gives again with libunwind and compares them frame for frame
(past the shim's own frames, cut where a capture cuts them: at the depth
and, under Python, at the eval loop).  gcc's cc1 (30-frame recursions,
no frame pointers), Python (the interpreter's frames, PYTHONMALLOC=malloc
for every object), threads, git and sqlite3 where installed, and PyTorch's
import (dlopen'ed C++ libraries, their initializers) where torch is.
Every walk must equal libunwind's; a handful may be handed to libunwind
(the loader's entry has no unwind information).  The checking build also
walks every capture the recall (cfi.c: a stack seen before, its id
without a walk) would have answered, and counts a recalled id that is not
the walk's as a difference; min_recalls of them must have been checked."""
import os, re, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
LIB = os.path.join(B, 'cfi-check', 'libmemtally.so')
os.makedirs(OUT, exist_ok=True)

def checked(name, argv, min_walks, stdin=None, env_extra=None, min_recalls=0):
    out = os.path.join(OUT, name)
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTALLY_OUT=out, **(env_extra or {}))
    r = subprocess.run(argv, env=env, capture_output=True, text=True, input=stdin, timeout=300)
    mt.eq(r.returncode, 0, '%s: exit code' % name)
    rep = re.findall(r'memtally-cfi-check: walks (\d+) differ (\d+) handed (\d+) recalls (\d+)', r.stderr)
    diffs = [l for l in r.stderr.splitlines() if 'memtally-cfi-check: differs' in l]
    if not rep:
        mt.check(False, '%s: no check report (stderr %r)' % (name, r.stderr[-300:]))
        return
    walks, differ, handed, recalls = (int(x) for x in rep[-1])  # the main process's, last
    mt.check(walks >= min_walks and differ == 0,
             '%s: %d walks, %d differ from libunwind, %d handed to it%s'
             % (name, walks, differ, handed, (': ' + diffs[0][:300]) if diffs else ''))
    mt.check(handed <= max(10, walks // 1000), '%s: %d of %d handed to libunwind' % (name, handed, walks))
    mt.check(recalls >= min_recalls, '%s: %d recalls checked, %d expected at least' % (name, recalls, min_recalls))

tmp = tempfile.mkdtemp(prefix='mtcfi.')
gen = os.path.join(tmp, 'gen.c')
with open(gen, 'w') as f:
    for i in range(60):
        f.write('static int f%d(int x){int s=0;for(int i=0;i<x;i++)s+=i*%d^(s>>3);return s;}\n' % (i, i))
    f.write('int main(void){int s=0;\n' + ''.join('s+=f%d(%d);\n' % (i, i) for i in range(60)) + 'return s&1;}\n')
cc1 = subprocess.run(['gcc', '-print-prog-name=cc1'], capture_output=True, text=True).stdout.strip()
checked('cc1', [cc1, '-quiet', '-O2', gen, '-o', os.path.join(tmp, 'gen.s')], 50000, min_recalls=1000)

script = ('import json, threading\n'
          'd = {"k%d" % i: [i, str(i) * 3, {"v": i}] for i in range(20000)}\n'
          'def work():\n'
          '    for i in range(3000):\n'
          '        json.loads(json.dumps([i, str(i), {"a": [i] * 5}]))\n'
          'ts = [threading.Thread(target=work) for _ in range(3)]\n'
          '[t.start() for t in ts]; [t.join() for t in ts]\n'
          'print(len(json.dumps(d)))\n')
checked('python', ['/usr/bin/python3', '-c', script], 20000)
checked('python-malloc', ['/usr/bin/python3', '-c', script], 200000, env_extra={'PYTHONMALLOC': 'malloc'},
        min_recalls=1000)
# test/bench/insn.sh's shape family: the recall answers each of them
# (rbp compared only where a frame's rule reads it: in main's loop it
# holds the loop's sum), and every answer must be the walk's; with frame
# pointers too, where rbp decides each step
bench = os.path.join(os.path.dirname(__file__), '..', 'bench')
for fp in ('-fomit-frame-pointer', '-fno-omit-frame-pointer'):
    exe = os.path.join(tmp, 'shapes' + fp)
    subprocess.run(['gcc', '-O2', fp, '-o', exe, os.path.join(bench, 'insnshapes.c')]
                   + (['-DSHAPES_FP'] if fp == '-fno-omit-frame-pointer' else []), check=True)
    cxx = os.path.join(tmp, 'shapes_cxx' + fp)
    subprocess.run(['g++', '-O2', fp, '-o', cxx, os.path.join(bench, 'insnshapes_cxx.cc')], check=True)
    for shape in ('main', 'fptr', 'alt', 'realloc', 'calloc', 'ring', 'unique', 'vector'):
        checked('shape-%s%s' % (shape, fp), [cxx if shape in ('unique', 'vector') else exe, shape, '3000'],
                3000, min_recalls=2000)
if shutil.which('git'):
    checked('git', ['git', '-C', os.path.join(os.path.dirname(__file__), '..', '..'), 'log', '--stat', '-n', '200'], 1000)
if shutil.which('sqlite3'):
    sql = ('create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<20000) '
           'insert into t select x, hex(randomblob(20)) from c; create index i on t(b); select count(*) from t;\n')
    checked('sqlite3', ['sqlite3'], 1000, stdin=sql)
if subprocess.run(['/usr/bin/python3', '-c', mt.FIND_TORCH], capture_output=True).returncode == 0:
    checked('import-torch', ['/usr/bin/python3', '-c', 'import torch'], 200000)
else:
    print('  (no torch: the import check is skipped)')
shutil.rmtree(tmp, ignore_errors=True)
mt.done()
