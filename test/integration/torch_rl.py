"""An RL-shaped trainer for test_phases (issue 56): each step a DataLoader
hands over a batch of prompts whose length varies and grows (a
curriculum), a rollout makes logits of that length (alive at the step
mark, freed the next step: no leak), a backward and an optimizer step,
a weight sync to a rollout copy every 5 steps (state_dict ->
load_state_dict), evaluation every 20 steps (model.eval() ... train()) and
a checkpoint (torch.save of the model and 4 MiB of buffers) every 50.
argv: STEPS [leak] [meta]; leak: keep 96 KiB a step in a list (a real
leak on top of the growing workload); meta: also
memtally.mark("step", n, meta={"seq": ...})."""
import io, sys
import torch
from torch.utils.data import DataLoader, Dataset

steps = int(sys.argv[1])
leak = 'leak' in sys.argv[2:]
meta = 'meta' in sys.argv[2:]
torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, DIM = 512, 32


def seqlen(i):  # grows 4 tokens a step, and varies (not monotone)
    return 16 + 4 * i + (37 * i) % 48


class Prompts(Dataset):
    def __len__(self):
        return steps

    def __getitem__(self, i):
        return torch.randint(0, VOCAB, (4, seqlen(i)))


emb = torch.nn.Embedding(VOCAB, DIM)
head = torch.nn.Linear(DIM, VOCAB)
model = torch.nn.Sequential(emb, head)
rollout_copy = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, VOCAB))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Prompts(), batch_size=None, shuffle=False)
history = []
logits = None
for step, ids in enumerate(loader, 1):
    logits = None
    logits = model(ids)                       # [4, L, VOCAB]: follows the workload
    loss = logits.float().logsumexp(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if leak:
        history.append(torch.ones(96 * 256))  # 96 KiB a step, never freed
    if step % 5 == 0:
        rollout_copy.load_state_dict(model.state_dict())
    if step % 20 == 0:
        model.eval()
        with torch.no_grad():
            for _ in range(2):
                model(torch.randint(0, VOCAB, (2, 64)))
        model.train()
    if step % 50 == 0:
        buf = io.BytesIO()
        torch.save({'model': model.state_dict(), 'extra': torch.zeros(1 << 20)}, buf)
    if meta:
        import memtally
        memtally.mark('step', step, meta={'seq': ids.shape[1], 'rollouts': 4})
print('done', steps, len(history))
