"""An unmodified PyTorch CPU training script (run by test_torch.py): an MLP,
a DataLoader with 2 worker processes, SGD, a torch.save checkpoint.
argv[1] == "leak" keeps each step's loss with its graph (the classic
`losses.append(loss)` leak).  Prints the losses."""
import sys, torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
leak = len(sys.argv) > 1 and sys.argv[1] == 'leak'
n = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
X, Y = torch.randn(n, 64), torch.randint(0, 4, (n,))
loader = DataLoader(TensorDataset(X, Y), batch_size=32, num_workers=2, shuffle=False)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
kept = []
for step, (x, y) in enumerate(loader):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward(retain_graph=leak)  # with the leak the graph's saved tensors stay
    opt.step()
    if leak:
        kept.append(loss)  # keeps the graph and its activations alive
    if step % 16 == 0:
        print('step %d loss %.6f' % (step, loss.item()))
torch.save(model.state_dict(), sys.argv[2] if len(sys.argv) > 2 else '/dev/null')
print('done')
