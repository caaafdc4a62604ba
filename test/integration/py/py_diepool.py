"""py_diepool.py DIR [CONTEXT] — a Pool (spawn, or CONTEXT: fork) whose two workers are stopped by
pool.terminate() (SIGTERM) while they allocate (test_death).  Each worker
writes its pid into DIR when it starts; the main process waits for both
files, then terminates the pool."""
import multiprocessing as mp, os, sys, time

def work(d):
    open(os.path.join(d, str(os.getpid())), 'w').close()
    keep = []
    while True:
        keep.append(bytearray(20000))
        time.sleep(0.005)

if __name__ == '__main__':
    d = sys.argv[1]
    pool = mp.get_context(sys.argv[2] if len(sys.argv) > 2 else 'spawn').Pool(2)
    pool.map_async(work, [d, d], chunksize=1)
    for _ in range(6000):  # a watchdog, not a timing: the test's own bounds it
        if len(os.listdir(d)) >= 2:
            break
        time.sleep(0.01)
    time.sleep(0.3)
    pool.terminate()
    pool.join()
    print('terminated', len(os.listdir(d)))
