"""A 2-rank gloo job for torchrun (run by test_torch.py and
test_prometheus.py): every rank trains a small model with all-reduced
gradients; rank argv[1] also keeps each step's loss with its graph (the
leak).  argv[2]: the steps (400), argv[3]: seconds slept after each (0)."""
import os, sys, time, torch
import torch.distributed as dist

dist.init_process_group('gloo')
rank = dist.get_rank()
leaker = int(sys.argv[1]) if len(sys.argv) > 1 else -1
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0
for step in range(steps):
    x, y = torch.randn(64, 64), torch.randint(0, 4, (64,))
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    # the leaking rank keeps each loss with its whole graph (saved
    # activations included): backward(retain_graph=True) + a list
    loss.backward(retain_graph=rank == leaker)
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    if rank == leaker:
        kept.append(loss)
    if pause:
        time.sleep(pause)
dist.barrier()
if rank == 0:
    print('ddp done')
dist.destroy_process_group()
