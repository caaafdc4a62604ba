"""A PyTorch CPU trainer with three known truths for every view (test_answers):
 - leak A: every step's loss is kept with its graph (backward with
   retain_graph, then a list), which keeps line FORWARD's activations;
 - leak B: every step keeps a copy of its batch's features at line CACHE
   (256 KiB a step);
 - a spike: at step 30 a 32 MiB tensor is made at line SPIKE and dropped at
   once;
 - a DataLoader with 2 worker processes, SGD, 150 steps of 10 ms.
No memtally import: it runs unmodified."""
import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 150
torch.manual_seed(0)
torch.set_num_threads(2)
data = TensorDataset(torch.randn(steps * 16, 4096), torch.randint(0, 4, (steps * 16,)))
loader = DataLoader(data, batch_size=16, num_workers=2)
model = torch.nn.Sequential(torch.nn.Linear(4096, 512), torch.nn.ReLU(), torch.nn.Linear(512, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_history, batch_cache = [], {}
for step, (x, y) in enumerate(loader):
    if step == 30:
        spike = torch.ones(8 * 1024 * 1024)  # SPIKE: 32 MiB, dropped at once
        del spike
    opt.zero_grad()
    out = model(x)  # FORWARD
    loss = torch.nn.functional.cross_entropy(out, y)
    loss.backward(retain_graph=True)
    opt.step()
    loss_history.append(loss)  # leak A: keeps FORWARD's activations
    batch_cache[step] = x.clone()  # CACHE: leak B, 256 KiB a step
    time.sleep(0.01)
print('truths: %d steps done' % (step + 1))
