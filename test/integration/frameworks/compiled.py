"""A plain loop under torch.compile, on the CPU.  leak: the loop keeps each
step's output with its graph; fixed: it keeps the detached value.
Usage: compiled.py leak|fixed STEPS [eager]"""
import sys
import torch

mode, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
model = net if 'eager' in sys.argv[3:] else torch.compile(net)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
kept = []
for i in range(steps):
    x = torch.randn(64, 64)
    out = model(x)  # LEAK
    loss = out.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    kept.append(out if mode == 'leak' else out.detach().sum().item())  # KEEP
print('compiled %s: %d steps, %d kept' % (mode, steps, len(kept)))
