"""Python allocation workload for the Python-frames cost (bench.py): run
with PYTHONMALLOC=malloc, so every object allocation is a malloc call,
made 13 Python frames deep.  Prints the loop's own time; under the shim,
snapshots "loop0" and "loop1" bracket the loop (its allocation count)."""
import ctypes, sys, time
R = int(sys.argv[1]) if len(sys.argv) > 1 else 20000

def leaf(n):
    return [str(i) for i in range(n)]

def level(d, n):
    return leaf(n) if d == 0 else level(d - 1, n)

snap = getattr(ctypes.CDLL(None), 'memtally_snapshot', None) or (lambda label: 0)
snap(b'loop0')
t0 = time.perf_counter()
for _ in range(R):
    level(12, 100)
t1 = time.perf_counter()
snap(b'loop1')
print('loop_s %.4f' % (t1 - t0))
