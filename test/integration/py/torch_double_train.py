"""A trainer on the PyTorch double (py/double/torch, on PYTHONPATH first) and
the fake driver: weights, per-step activations, NCCL-like buffers taken by
a library outside torch (libnccl.so.2, test/fakecuda/fakenccl.c) and by
ctypes from Python, then (argv[1]):
  oom       a tensor the device cannot hold after a recovery: the caching
            allocator frees its cache and retries (recovered), later it
            fails twice and raises OutOfMemoryError;
  fraction  set_per_process_memory_fraction: torch refuses without a
            driver failure.
Prints a JSON object: what torch's counters said at each step, and at the
OOM whether the pair of files was on disk when the error reached Python.
With TRAINER_UNMODIFIED=1 it names nothing of memtally's: its steps are an
optimizer's (torch.optim.SGD), and `memtally run`'s start-up hook does the
rest."""
import ctypes, glob, json, os, sys
import torch

plain = os.environ.get('TRAINER_UNMODIFIED') == '1'
if not plain:
    import memtally
    from _memtally import cuda as memtally_cuda
    memtally_cuda.install(torch)  # the start-up hook's call (issue 32); twice is harmless
cuda_after_install = torch.cuda.is_initialized()  # must stay False: memtally never initialises CUDA
opt = torch.optim.SGD([])
out = os.environ['MEMTALLY_OUT']
MIB = 1 << 20
res = {'steps': [], 'version': torch.__version__, 'cuda_after_install': cuda_after_install}
fake = ctypes.CDLL('libcuda.so.1')
fake.fakecuda_used.restype = ctypes.c_uint64
fake.fakecuda_used.argtypes = [ctypes.c_int]
mode = sys.argv[1]


def nccl_init():
    lib = ctypes.CDLL('libnccl.so.2')
    lib.fake_nccl_buffers.argtypes = [ctypes.c_size_t, ctypes.c_int]
    return lib.fake_nccl_buffers(24 * MIB, 0)


def workspace():
    cu = ctypes.CDLL('libcuda.so.1')
    p = ctypes.c_ulonglong()
    return cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(6 * MIB))


def make_weights():
    return [torch.empty(30 * MIB, device='cuda') for _ in range(4)]


def forward(k):
    return [torch.empty(3 * MIB + k * 4096, device='cuda') for _ in range(5)] + \
        [torch.empty(100000, device='cuda') for _ in range(3)]


weights = make_weights()            # CUDA is initialised here, lazily
res['nccl'] = nccl_init()
res['workspace'] = workspace()
for step in range(1, 7):
    acts = forward(step)
    keep = acts[::4]                # some of each step's activations stay
    del acts
    if plain:
        opt.step()                  # the hook marks the step, then memtally_cuda.on_step
    else:
        memtally.mark('step', step)
        memtally_cuda.on_step(step)     # what memtally.on_step calls after each optimizer step
        memtally.snapshot('step %d' % step)
    f = torch._C._cuda_memoryStats(0)
    res['steps'].append({k: f[k]['all']['current'] for k in
                         ('allocated_bytes', 'reserved_bytes', 'active_bytes', 'inactive_split_bytes')})
    weights.append(keep)

if mode == 'fraction':
    torch.cuda.set_per_process_memory_fraction(0.5, 0)
    try:
        huge = torch.empty(400 * MIB, device='cuda')
        res['oom'] = 'no OOM'
    except torch.cuda.OutOfMemoryError:
        res['oom'] = {'pair_at_raise': sorted(os.path.basename(p) for p in glob.glob(out + '/*.torch.jsonl')),
                      'driver_used': fake.fakecuda_used(0)}
else:
    # recovery: the cache holds 240 MiB of free segments; 600 MiB fits
    # only once they are given back
    tmp = [torch.empty(12 * MIB, device='cuda') for _ in range(20)]
    del tmp
    big = torch.empty(600 * MIB, device='cuda')
    res['recovered_ptr'] = big.data_ptr() != 0
    del big
    # the OOM: more than the device holds, even with the cache released
    try:
        y = torch.empty(2000 * MIB, device='cuda')
        res['oom'] = 'no OOM'
    except torch.cuda.OutOfMemoryError:
        res['oom'] = {'pair_at_raise': sorted(os.path.basename(p) for p in glob.glob(out + '/*.torch.jsonl')),
                      'dumps_at_raise': sorted(os.path.basename(p) for p in glob.glob(out + '/*.oom*.jsonl')
                                               if not p.endswith('.torch.jsonl')),
                      'driver_used': fake.fakecuda_used(0)}
f = torch._C._cuda_memoryStats(0)
res['end'] = {k: f[k]['all']['current'] for k in ('allocated_bytes', 'reserved_bytes')}
print(json.dumps(res))
