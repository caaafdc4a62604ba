"""A PyTorch CPU training loop for `make bench`: reports the time of
`import torch` and of each training step separately (start-up allocates
about a million times; a steady step some hundreds).

`torch_train.py STEPS` is the loop of the PyTorch table.  `torch_train.py
STEPS leak` is the small-step trainer of the peers' table (peers.py, issue
52): one thread, and after each step a validation loss computed with
autograd on and kept in a list, so each step's graph (its activations)
stays alive: the classic `val_losses.append(loss)` leak."""
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
leak = 'leak' in sys.argv[2:]
if leak:
    torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
xv, yv = torch.randn(64, 256), torch.randint(0, 10, (64,))
val_losses = []
times = []
for i in range(steps):
    s = time.perf_counter()
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if leak:
        val_losses.append(torch.nn.functional.cross_entropy(model(xv), yv))  # the leak: graph kept
    times.append(time.perf_counter() - s)
times.sort()
print('import_s %.4f step_median_ms %.3f loss %.4f' % (t1 - t0, 1000 * times[len(times) // 2], loss.item()))
