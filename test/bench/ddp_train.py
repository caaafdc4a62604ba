"""A 2-rank gloo DDP trainer on CPU for `make bench`'s rank files (gen_ranks.sh):
run under `memtally run -- torchrun --nproc_per_node 2 ddp_train.py STEPS`.
Rank 1 keeps a copy of each step's loss tensor and 64 KiB more (a leak
like a history list); rank 0 does not."""
import os, sys
import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
dist.init_process_group('gloo')
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for i in range(steps):
    x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if rank == 1:
        kept.append((loss.detach().clone(), bytearray(64 << 10)))
dist.barrier()
dist.destroy_process_group()
print('rank %d done %d steps' % (rank, steps))
