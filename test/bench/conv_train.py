"""A small convolutional trainer for the peers' table of `make bench`
(peers.py, issue 52): a DataLoader with 2 worker processes (forked, as
PyTorch does on Linux) feeding 1x28x28 images in batches of 32 to two
conv layers and a linear one, SGD, one thread per process.
`conv_train.py STEPS` (default 60).  Prints the last loss."""
import sys, torch
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
n = 32 * steps
data = TensorDataset(torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,)))
loader = DataLoader(data, batch_size=32, num_workers=2, shuffle=True)
model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for x, y in loader:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print('loss %.4f' % loss.item())
