# Three known allocation sites (one a method), then a forked child that
# allocates in a function and leaves through os._exit.  bytearray(n)
# allocates n + 1 bytes with malloc (above pymalloc's 512-byte limit).
import ctypes, os, sys
keep = [None] * 200
snap = getattr(ctypes.CDLL(None), 'memtally_snapshot', None)

def a(i):
    keep[i] = bytearray(100000)          # SITE_A

def b(i):
    keep[i] = bytearray(250000)          # SITE_B

class C:
    def c(self, i):
        keep[i] = bytearray(1000000)     # SITE_C

def child_work():
    keep[199] = bytearray(77776)         # SITE_CHILD
    snap(b'child')
    os._exit(0)

for i in range(100):
    a(i)
for i in range(100, 140):
    b(i)
for i in range(140, 170):
    C().c(i)
snap(b'end')
pid = os.fork()
if pid == 0:
    child_work()
os.waitpid(pid, 0)
