"""Python allocation workload for the Python-frames cost (bench.py): run
with PYTHONMALLOC=malloc, so every object allocation is a malloc call,
made 13 Python frames deep.  Prints the loop's own time."""
import sys, time
R = int(sys.argv[1]) if len(sys.argv) > 1 else 20000

def leaf(n):
    return [str(i) for i in range(n)]

def level(d, n):
    return leaf(n) if d == 0 else level(d - 1, n)

t0 = time.perf_counter()
for _ in range(R):
    level(12, 100)
print('loop_s %.4f' % (time.perf_counter() - t0))
