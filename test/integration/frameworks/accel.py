"""Accelerate with 2 CPU processes (gloo), a small MLP.  leak: rank 1 alone
keeps each step's output with its graph; fixed: it keeps a float.
Usage: accelerate launch --cpu --num_processes 2 accel.py leak|fixed STEPS"""
import sys
import torch
from accelerate import Accelerator

mode, steps = sys.argv[1], int(sys.argv[2])
acc = Accelerator(cpu=True)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(steps * 128, 64), torch.randn(steps * 128, 256))
dl = torch.utils.data.DataLoader(data, batch_size=64)
net, opt, dl = acc.prepare(net, opt, dl)
kept = []
for x, y in dl:
    out = net(x)  # LEAK
    loss = torch.nn.functional.mse_loss(out, y)
    opt.zero_grad()
    acc.backward(loss)
    opt.step()
    if acc.process_index == 1:
        kept.append(out if mode == 'leak' else float(out.detach().mean()))  # KEEP
acc.wait_for_everyone()
if acc.is_main_process:
    print('accelerate %s: %d processes, %d steps' % (mode, acc.num_processes, len(dl)))
