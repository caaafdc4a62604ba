"""The interposed dlsym forwards so that the real one sees the caller, at
every optimisation level the shim is built with (-O0 and -O2): a second
preloaded library's dlsym(RTLD_NEXT, "puts") resolves past itself (at -O0
the old C forwarder made a call, not a tail call, and it got itself back:
infinite recursion), and the dlsym route still hands CUDA names our
wrappers."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
ROOT = os.path.dirname(B)
T = os.path.join(B, 'test')

for opt in ('-O0', '-O2'):
    bdir = os.path.join(OUT, 'build' + opt)
    r = subprocess.run(['make', '-s', '-C', ROOT, 'B=' + bdir, 'CFLAGS=%s -g' % opt,
                        bdir + '/libmemtally.so'], capture_output=True, text=True)
    mt.eq(r.returncode, 0, opt + ': the shim builds ' + r.stderr[-300:])
    shim = os.path.join(bdir, 'libmemtally.so')
    env = dict(os.environ, LD_PRELOAD=shim + ' ' + os.path.join(T, 'lib_next.so'),
               MEMTALLY_OUT=os.path.join(OUT, 'next' + opt))
    r = subprocess.run([os.path.join(T, 'prog_znow')], env=env, capture_output=True, text=True, timeout=60)
    mt.eq((r.returncode, r.stdout), (7, '[next] znow ok 1\n'),
          opt + ': RTLD_NEXT from another preloaded library resolves past it, not to itself')
    # the dlsym route still serves CUDA names through the trampoline
    env = dict(os.environ, LD_PRELOAD=shim, MEMTALLY_OUT=os.path.join(OUT, 'cuda' + opt),
               MEMTALLY_CUDA_ROUTES='dlsym', FAKE_CUDA_MEM=str(1 << 30),
               LD_LIBRARY_PATH=os.path.join(T, 'fakecuda'))
    out = os.path.join(OUT, 'cuda' + opt)
    r = subprocess.run([os.path.join(T, 'cuda_prog'), 'dlsym', 'mix', out], env=env,
                       capture_output=True, text=True, timeout=60)
    fs = mt.files(out)
    got = fs[0].sites_by_function(fs[0].final(), kinds=['cuda']).get(('dev_alloc', 'cuda'), {}) if fs else {}
    mt.eq((r.returncode, got.get('live_bytes')), (0, 6 << 20),
          opt + ': CUDA allocations seen exactly through the dlsym route')
mt.done()
