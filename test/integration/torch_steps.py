"""A PyTorch CPU trainer that knows nothing of memtally (run by
test_torch_steps.py): an MLP on a DataLoader, argv[1] steps, and each step
keeps one 256 KiB tensor (the leak whose rate per step the test checks).
argv[2], the mode:
  one     one SGD optimizer, DataLoader workers forked (the default)
  two     two optimizers (the two layers), each stepped once an iteration
  nested  an optimizer class whose step calls super().step(), beside a
          plain one of the parent class (both classes' steps are hooked)
  spawn   DataLoader workers started by multiprocessing's spawn
In every mode, each DataLoader worker prints "worker PID HOOKED" where
HOOKED says whether memtally's start-up hook is in the worker (the test
reads it; the training itself never looks).  Prints "steps N" at the end."""
import os, sys, torch
from torch.utils.data import DataLoader, TensorDataset

LEAK = 65536  # float32 elements: 256 KiB a step


def worker_init(i):
    site = sys.modules.get('sitecustomize')
    hooked = bool(getattr(site, '_memtally_state', {}).get('started'))
    # one write(2): two workers' lines must not interleave (print writes
    # the text and its newline apart)
    os.write(1, ('worker %d %s\n' % (os.getpid(), hooked)).encode())


class Outer(torch.optim.SGD):
    def step(self, closure=None):
        return super().step(closure)


def main():
    steps, mode = int(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    n = steps * 16
    X, Y = torch.randn(n, 32), torch.randint(0, 4, (n,))
    loader = DataLoader(TensorDataset(X, Y), batch_size=16, num_workers=2, worker_init_fn=worker_init,
                        multiprocessing_context='spawn' if mode == 'spawn' else None)
    l1, l2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 4)
    model = torch.nn.Sequential(l1, torch.nn.ReLU(), l2)
    if mode == 'two':
        opts = [torch.optim.SGD(l1.parameters(), lr=0.05), torch.optim.Adam(l2.parameters(), lr=0.01)]
    elif mode == 'nested':
        torch.optim.SGD(l2.parameters(), lr=0.05)  # hooks SGD's own step too
        opts = [Outer(model.parameters(), lr=0.05)]
    else:
        opts = [torch.optim.SGD(model.parameters(), lr=0.05)]
    kept = []
    taken = 0
    for x, y in loader:
        for o in opts:
            o.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for o in opts:
            o.step()
        taken += 1
        kept.append(torch.ones(LEAK))  # the leak: 256 KiB a step
    print('steps %d loss %.6f' % (taken, loss.item()))


if __name__ == '__main__':
    main()
