"""A small PyTorch loop that does use memtally (run by test_torch_steps.py):
8 iterations of SGD; it registers memtally.on_step(fn), and from
iteration 4 on marks "step" itself with its own counter (100 + i), which
must win over the start-up hook's marks.  Prints what the callback saw
("seen [...]") and the hook's own count ("hook N")."""
import torch
import memtally
import memtally_torch

seen = []
memtally.on_step(seen.append)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(1, 9):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    if i >= 4:
        memtally.mark('step', 100 + i)
print('seen %s' % seen)
print('hook %d' % memtally_torch.state()['steps'])
