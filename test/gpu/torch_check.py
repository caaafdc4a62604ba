"""Run under the shim on a machine with a real GPU (test/gpu/check.sh).
Allocates through PyTorch's caching allocator (plain or expandable
segments), runs a cuBLAS matmul, forces an OOM, and records what PyTorch
and the driver say at each step, requesting a memtally snapshot (label) at
each, so check.sh can compare them with memtally's figures."""
import ctypes, glob, json, os, sys
import torch

out = os.environ['MEMTALLY_OUT']
snap = ctypes.CDLL(None).memtally_snapshot
snap.argtypes = [ctypes.c_char_p]
res = {'torch': torch.__version__, 'device': torch.cuda.get_device_name(0),
       'alloc_conf': os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')}

def step(label):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    assert snap(label.encode()) == 0, 'memtally_snapshot failed: is the shim loaded?'
    res[label] = {'reserved': torch.cuda.memory_reserved(), 'allocated': torch.cuda.memory_allocated(),
                  'driver_used': total - free, 'driver_total': total}

step('start')
x = [torch.empty(64 << 20, dtype=torch.uint8, device='cuda') for _ in range(8)]
step('plain')
a = torch.randn(4096, 4096, device='cuda')
b = a @ a
step('cublas')
del x
torch.cuda.empty_cache()
step('emptied')
total = torch.cuda.mem_get_info()[1]
try:
    y = torch.empty(total * 2, dtype=torch.uint8, device='cuda')
    res['oom'] = 'no OOM raised'
except torch.cuda.OutOfMemoryError:
    # the dump must already be on disk when the error reaches Python
    res['oom'] = {'dumps_at_raise': len(glob.glob(os.path.join(out, '*.oom*.jsonl')))}
z = torch.empty(1 << 20, device='cuda')  # a success after the OOM: recovered
step('after_oom')
print(json.dumps(res))
