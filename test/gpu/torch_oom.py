"""A real trainer's CUDA OOM under the shim, with memtally's PyTorch side
(scripts/python/_memtally/cuda.py) on a machine with a GPU and torch >= 2.0
(test/gpu/check.sh runs it, plain and with expandable_segments:True).

An MLP trained with AdamW for a few steps (the caching allocator's figures
sent at each), a cuBLAS matmul and, where NCCL works, a one-rank NCCL
all_reduce (memory outside torch's segments); then the batch doubles each
step until torch raises OutOfMemoryError.  Also measures what memory
history costs per allocation (history off, then on as memtally switches it
on) and how long the OOM took to reach Python (the shim's dump, torch's
_snapshot() and its conversion, all inside the observer).  Prints a JSON
object for check.sh."""
import glob, json, os, sys, time
import torch

out = os.environ['MEMTALLY_OUT']
res = {'torch': torch.__version__, 'cuda': torch.version.cuda,
       'alloc_conf': os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')}
from _memtally import cuda as memtally_cuda
memtally_cuda.install(torch)  # the start-up hook's call; a second call is harmless
dev = torch.device('cuda')

# NCCL's buffers, outside the caching allocator (one rank)
try:
    import torch.distributed as dist
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', str(29500 + os.getpid() % 1000))
    dist.init_process_group('nccl', rank=0, world_size=1)
    t = torch.ones(1 << 20, device=dev)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    res['nccl'] = True
except Exception as e:  # no NCCL here: cuBLAS is still outside torch
    res['nccl'] = 'no NCCL: %s' % str(e)[:120]

model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(6)]).to(dev)
opt = torch.optim.AdamW(model.parameters())
a = torch.randn(4096, 4096, device=dev)
b = a @ a  # cuBLAS: its handle and workspace
step = 0


def train(batch):
    global step
    x = torch.randn(batch, 4096, device=dev)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    step += 1
    memtally_cuda.on_step(step)  # what the start-up hook's step hook calls


for _ in range(5):
    train(256)
torch.cuda.synchronize()
res['figures_step'] = {'allocated': torch.cuda.memory_allocated(), 'reserved': torch.cuda.memory_reserved()}

# history's cost per allocation: off, then on as memtally sets it
hist_n = int(os.environ.get('MEMTALLY_TORCH_HISTORY', '100000'))
def loop(k=20000):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(k):
        x = torch.empty(4096, device=dev)
        del x
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / k * 1e6
if memtally_cuda._version(torch) >= (2, 1):
    torch.cuda.memory._record_memory_history(None)
    off = min(loop() for _ in range(3))
    torch.cuda.memory._record_memory_history('all', context='alloc', stacks='python', max_entries=hist_n)
    on = min(loop() for _ in range(3))
    res['history_us_per_alloc_free'] = {'off': round(off, 2), 'on': round(on, 2)}
    t0 = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    t1 = time.perf_counter()
    memtally_cuda.write_snapshot(snap, os.path.join(out, 'cost.torch.jsonl.probe'), {'device': 0})
    t2 = time.perf_counter()
    res['snapshot_s'] = round(t1 - t0, 3)
    res['convert_s'] = round(t2 - t1, 3)
    res['trace_entries'] = sum(len(t) for t in snap['device_traces'])
    os.unlink(os.path.join(out, 'cost.torch.jsonl.probe'))

# the OOM: the batch doubles until the device cannot hold it
batch = 512
res['oom'] = 'no OOM'
try:
    while batch < (1 << 26):
        train(batch)
        batch *= 2
except torch.cuda.OutOfMemoryError:
    t_raise = time.perf_counter()
    res['oom'] = {'batch': batch,
                  'pair_at_raise': sorted(os.path.basename(p) for p in glob.glob(out + '/*.torch.jsonl')),
                  'dumps_at_raise': sorted(os.path.basename(p) for p in glob.glob(out + '/*.oom*.jsonl')
                                           if not p.endswith('.torch.jsonl'))}
free, total = torch.cuda.mem_get_info()
res['after'] = {'driver_used': total - free, 'reserved': torch.cuda.memory_reserved()}
print(json.dumps(res))
