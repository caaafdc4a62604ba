"""Real programs under the shim behave as without it (same output, same
exit code): -z now with &malloc, a constructor allocating before main, a
dlopen'ed library allocating, Python 3 running an object-heavy script, gcc
compiling a file.  Their allocations are tracked where they can be named.
Every case runs with each walker: the shim's CFI walker (the default),
libunwind, and frame pointers (MEMTALLY_UNWIND=fp), which once crashed
Python in Py_FinalizeEx by following a frame chain out of the thread's
stack.  MEMTALLY_CASE=name
runs one case (znow, ctor, python, python-malloc, gcc)."""
import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
T = os.path.join(B, 'test')

def both(name, argv, cwd=None, extra_env=None):
    """Run argv without and with the shim; compare output and exit code."""
    name = '%s/%s' % (UNWIND, name)
    out = os.path.join(OUT, name)
    xenv = extra_env or {}
    plain = subprocess.run(argv, capture_output=True, cwd=cwd, env=dict(os.environ, **xenv))
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, MEMTALLY_UNWIND=UNWIND, **xenv)
    shim = subprocess.run(argv, capture_output=True, cwd=cwd, env=env)
    mt.eq(shim.returncode, plain.returncode, name + ': same exit code')
    mt.check(shim.stdout == plain.stdout, name + ': same stdout (%d bytes)' % len(plain.stdout))
    mt.check(shim.stderr == plain.stderr, name + ': same stderr %r' % shim.stderr[-300:])
    return mt.files(out)

def znow():
    fs = both('znow', [os.path.join(T, 'prog_znow')])
    agg = fs[0].sites_by_function(fs[0].final(), kinds=['heap'])
    mt.eq(agg.get(('main', 'heap'), {}).get('live_count'), 50, 'znow: 50 of 100 blocks live, through &malloc')

def ctor():
    fs = both('ctor', [os.path.join(T, 'prog_ctor'), os.path.join(T, 'lib_alloc.so')])
    f = fs[0]
    agg = f.sites_by_function(f.final(), kinds=['heap'])
    mt.eq(agg.get(('ctor_alloc', 'heap'), {}).get('live_bytes'), 4242, 'ctor: allocation before main tracked')
    mt.eq(agg.get(('lib_alloc', 'heap'), {}).get('live_bytes'), 30 * 5555, 'dlopen: library function tracked')
    mt.eq(agg.get(('lib_ctor', 'heap'), {}).get('live_bytes'), 999, 'dlopen: library constructor tracked')
    mt.check(any(m['path'].endswith('lib_alloc.so') for m in f.maps), 'dlopen: maps record rewritten with the library')
    if UNWIND != 'fp':  # the frame-pointer walk does not step through the loader
        init_frames(f, 4)
        fs = both('ctor-initdepth0', [os.path.join(T, 'prog_ctor'), os.path.join(T, 'lib_alloc.so')],
                  extra_env={'MEMTALLY_INITDEPTH': '0'})
        init_frames(fs[0], 0)

def init_frames(f, keep):
    """The 777-byte block lib_ctor allocates eight calls down: its stack
    keeps init_8 .. init_5, the mark (0x1), lib_ctor and the loader's
    frames at MEMTALLY_INITDEPTH=4; every frame at 0."""
    sites = [c for c in f.final()['callsites'] if c['kind'] == 'heap' and c['alloc_bytes'] == 777]
    mt.eq(len(sites), 1, 'initdepth %d: one call site of 777 B' % keep)
    if not sites:
        return
    pcs = f.stacks[sites[0]['stack']]
    names = [fn for fn, _ in f.symbolize(pcs)]
    mods = [os.path.basename(m) for _, m in f.symbolize(pcs)]
    steps = ['init_%d' % i for i in range(8, 0, -1)]
    want = steps[:keep] + ['??', 'lib_ctor'] if keep else steps + ['lib_ctor']
    mt.eq(names[:len(want)], want, 'initdepth %d: the frames inside the initializer' % keep)
    mt.eq(pcs.count(1), 1 if keep else 0, 'initdepth %d: the mark for frames left out' % keep)
    if keep:
        mt.eq(pcs[keep], 1, 'initdepth %d: the mark where the frames were' % keep)
    ld = mods[len(want)] if len(mods) > len(want) else None
    mt.check(ld is not None and ld.startswith('ld-linux'),
             'initdepth %d: the loader\'s frame outside the initializer (%s)' % (keep, ld))

script = r'''
import collections, json
d = {}
for i in range(200000):
    d['k%d' % i] = [i, str(i) * 3, {'v': i}]
objs = [collections.OrderedDict(a=i, b=[i] * 5) for i in range(50000)]
s = json.dumps([d['k%d' % i] for i in range(0, 200000, 7)])
print(len(d), len(objs), len(s), sum(len(v[1]) for v in d.values()))
'''

def python():
    fs = both('python', ['/usr/bin/python3', '-c', script])
    mt.check(len(fs) == 1 and fs[0].final()['heap']['allocs'] > 1000, 'python: allocations tracked')
    if fs:
        eval_ends(fs[0])

def eval_ends(f):
    """A native stack captured with a Python stack ends at the innermost
    eval loop's frame (the Python stack explains the rest): the CFI walker
    stops there, libunwind's stacks are cut there."""
    withpy = [s for s, py in f.stack_py.items() if py and s in f.stacks]
    pcs = sorted({pc for s in withpy for pc in f.stacks[s]})
    name = dict(zip(pcs, (fn for fn, _ in f.symbolize(pcs))))
    ending = [s for s in withpy if '_PyEval_EvalFrameDefault' in [name[pc] for pc in f.stacks[s]]]
    past = [s for s in ending if name[f.stacks[s][-1]] != '_PyEval_EvalFrameDefault']
    # Debian's python3 keeps no frame pointers: the fp walk never gets
    # as far as the eval loop
    mt.check((len(ending) > 100 or UNWIND == 'fp') and not past,
             '%s/python: %d stacks with Python frames reach the eval loop, %d go on past it'
             % (UNWIND, len(ending), len(past)))

def gcc():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, 'gen.c')
        with open(src, 'w') as f:
            f.write('#include <stdio.h>\n')
            for i in range(400):
                f.write('static int f%d(int x) { return x * %d + (x >> 3); }\n' % (i, i))
            f.write('int main(void) { int s = 0;\n')
            for i in range(400):
                f.write('  s += f%d(%d);\n' % (i, i))
            f.write('  printf("%d\\n", s); return 0; }\n')
        fs = both('gcc', ['gcc', '-O2', '-c', '-o', os.path.join(d, 'gen.o'), src], cwd=d)
        exes = sorted(os.path.basename(f.header['exe']) for f in fs)
        mt.check('cc1' in exes and any('gcc' in e for e in exes),
                 'gcc: the driver and cc1 each wrote a file: %s' % exes)

def python_malloc():
    # Every object through malloc: the walker sees the interpreter's frames
    # down to Py_FinalizeEx (the fp crash was there, every time).
    for i in range(3):
        fs = both('python-malloc%d' % i,
                  ['/usr/bin/python3', '-c', 'import json; print(len(json.dumps(list(range(10000)))))'],
                  extra_env={'PYTHONMALLOC': 'malloc'})
        mt.check(len(fs) == 1 and fs[0].final()['heap']['allocs'] > 1000,
                 'python-malloc%d: allocations tracked' % i)

for UNWIND in ('cfi', 'libunwind', 'fp'):
    print('-- MEMTALLY_UNWIND=%s' % UNWIND)
    for name, fn in (('znow', znow), ('ctor', ctor), ('python', python),
                     ('python-malloc', python_malloc), ('gcc', gcc)):
        if mt.case(name):
            fn()
mt.done()
