# Hundreds of generated modules, compiled, run and dropped, so code objects
# die and their addresses are reused: module i allocates 20000 + i bytes at
# line 3 + i % 7 of gen_<i>.py and keeps them.
import ctypes, gc, sys
R = int(sys.argv[1]) if len(sys.argv) > 1 else 300
keep = [None] * R
for i in range(R):
    src = '\n' * (2 + i % 7) + 'def f(keep):\n    keep[%d] = bytearray(%d)\nf(keep)\n' % (i, 20000 + i - 1)
    code = compile(src, 'gen_%d.py' % i, 'exec')
    ns = {'keep': keep}
    exec(code, ns)
    del code, ns
    gc.collect()
ctypes.CDLL(None).memtally_snapshot(b'end')
