"""What _memtally/cuda.py costs on the CPU side (no GPU needed):
  - at each optimizer step: the call into the shim with one device's four
    figures (memtally_torch_figures through ctypes), not counting torch's
    own torch._C._cuda_memoryStats (measured on a GPU: test/gpu/check.sh);
  - at an OOM: turning torch's snapshot dict into <dump>.torch.jsonl
    (write_snapshot), for a snapshot shaped as torch 2.1+ writes one with
    history on: N trace entries (default 100000, MEMTALLY_TORCH_HISTORY's
    default), 2000 segments of 10 blocks, Python stacks of 24 frames drawn
    from 200 distinct ones (torch shares one frame list per traceback).
Run under the shim:  LD_PRELOAD=build/libmemtally.so MEMTALLY_OUT=/tmp/cc \\
    PYTHONPATH=scripts/python /usr/bin/python3 test/bench/cuda_cost.py [N]"""
import ctypes, os, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'scripts', 'python'))
from _memtally import cuda as memtally_cuda

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
stacks = [[{'filename': '/srv/train/model_%d.py' % (i % 7), 'line': 10 + k * 3 + i, 'name': 'f%d_%d' % (i, k)}
           for k in range(24)] for i in range(200)]
segs, addr = [], 0x7f0000000000
for s in range(2000):
    blocks = [{'address': addr + b * (2 << 20), 'size': 2 << 20, 'requested_size': (2 << 20) - 100,
               'state': 'active_allocated' if b % 3 else 'inactive', 'frames': stacks[(s + b) % 200]}
              for b in range(10)]
    segs.append({'device': 0, 'address': addr, 'total_size': 20 << 20, 'allocated_size': 0, 'active_size': 0,
                 'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0),
                 'is_expandable': False, 'frames': stacks[s % 200], 'blocks': blocks})
    addr += 20 << 20
acts = ['alloc', 'free_requested', 'free_completed']
trace = [{'action': acts[i % 3], 'addr': 0x7f0000000000 + (i % 5000) * 4096, 'size': 4096 * (1 + i % 9),
          'stream': 0, 'time_us': 1700000000000000 + i, 'frames': stacks[i % 200]} for i in range(n)]
snap = {'segments': segs, 'device_traces': [trace]}
d = tempfile.mkdtemp()
t0 = time.perf_counter()
p = memtally_cuda.write_snapshot(snap, os.path.join(d, 'x.torch.jsonl'), {'device': 0})
t1 = time.perf_counter()
print('write_snapshot: %d trace entries, 20000 blocks: %.2f s, %.1f MB' % (n, t1 - t0, os.path.getsize(p) / 1e6))
try:
    fig = ctypes.CDLL(None).memtally_torch_figures
    fig.argtypes = [ctypes.c_int, ctypes.c_double] + [ctypes.c_ulonglong] * 4
    k = 200000
    t0 = time.perf_counter()
    for i in range(k):
        fig(0, float(i), 1 << 30, 2 << 30, 1 << 30, 1 << 20)
    t1 = time.perf_counter()
    print('memtally_torch_figures through ctypes: %.2f us a call (one device)' % ((t1 - t0) / k * 1e6))
except (OSError, AttributeError):
    print('memtally_torch_figures: the shim is not loaded (LD_PRELOAD)')
