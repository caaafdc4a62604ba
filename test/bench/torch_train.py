"""A PyTorch CPU training loop for `make bench`: reports the time of
`import torch` and of each training step separately (start-up allocates
about a million times; a steady step some hundreds)."""
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
times = []
for i in range(steps):
    s = time.perf_counter()
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - s)
times.sort()
print('import_s %.4f step_median_ms %.3f loss %.4f' % (t1 - t0, 1000 * times[len(times) // 2], loss.item()))
