"""A trainer whose leak is in its 2 DataLoader workers only (each keeps a
16 KiB tensor of every item it makes, line LEAK); the trainer itself
holds steady.  argv[1] "fixed": the workers keep nothing."""
import sys
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
torch.manual_seed(0)
torch.set_num_threads(1)
seen = []


class Data(Dataset):
    def __len__(self):
        return 4800

    def __getitem__(self, i):
        x = torch.randn(64)
        if sys.argv[1:] != ["fixed"]:
            seen.append(torch.randn(4096))  # LEAK
        return x, i % 10


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if __name__ == '__main__':
    for x, y in DataLoader(Data(), batch_size=16, num_workers=2):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print('done')
