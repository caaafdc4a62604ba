# Three threads: one calls malloc through ctypes (the GIL released during
# the call), two allocate bytearrays; each line's bytes must be exactly its
# own thread's.
import ctypes, sys, threading
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
snap = libc.memtally_snapshot
N = 3000
ka, kb, kc = [None] * N, [None] * N, [None] * N
start = threading.Barrier(3)

def worker_a():
    start.wait()
    for i in range(N):
        ka[i] = libc.malloc(7777) # SITE_A

def worker_b():
    start.wait()
    for i in range(N):
        kb[i] = bytearray(5554) # SITE_B

def worker_c():
    start.wait()
    for i in range(N):
        kc[i] = bytearray(3332) # SITE_C

ts = [threading.Thread(target=f) for f in (worker_a, worker_b, worker_c)]
for t in ts: t.start()
for t in ts: t.join()
snap(b'end')
