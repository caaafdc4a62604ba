"""A small PyTorch loop that does use memtally (run by test_torch_steps.py):
8 iterations of SGD; it registers memtally.on_step(fn), and from
iteration 4 on marks "step" itself with its own counter (100 + i), which
must win over the start-up hook's marks, and a callback that fails at
every step (reported once).  Prints what the callback saw ("seen [...]")
and the hook's own count ("hook N"), and which memtally_cuda and
memtally_torch an import finds ("mine" when the test put its own on
PYTHONPATH)."""
import sys
import torch
import memtally

seen = []
memtally.on_step(seen.append)
memtally.on_step(lambda step: 1 / 0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(1, 9):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    if i >= 4:
        memtally.mark('step', 100 + i)
print('seen %s' % seen)
print('hook %d' % sys.modules['_memtally.steps'].state()['steps'])
for name in ('memtally_cuda', 'memtally_torch'):
    try:
        print('%s %s' % (name, getattr(__import__(name), 'WHO', '?')))
    except ImportError:
        print('%s none' % name)
