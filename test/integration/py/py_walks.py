# The shim checks a Python stack against the thread's last one before it
# walks it again (shim/capture/python.c): allocations that alternate between two
# lines of one function, and between two depths of one recursive
# function, must each keep their own line and chain.  bytearray(n)
# allocates n + 1 bytes with malloc.
import ctypes
keep = [None] * 300
snap = getattr(ctypes.CDLL(None), 'memtally_snapshot', None)

def two(i):
    keep[2 * i] = bytearray(30000)       # SITE_X
    keep[2 * i + 1] = bytearray(40000)   # SITE_Y

def rec(n, i):
    if n:
        return rec(n - 1, i)             # SITE_CALL
    keep[200 + i] = bytearray(50000)     # SITE_R

for i in range(60):
    two(i)
for i in range(70):
    rec(2 + i % 2, i)                    # SITE_LOOP
snap(b'end')
