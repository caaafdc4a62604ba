"""MosaicML Composer Trainer on a small MLP, on the CPU.  leak: the dataset
caches every sample it makes (a cache with no bound); fixed: no cache.
Composer's own memory callbacks run beside memtally's where they run on
the CPU.  Usage: composer_run.py leak|fixed STEPS"""
import sys
import torch
from composer import Trainer
from composer.models import ComposerModel

mode, steps = sys.argv[1], int(sys.argv[2])


class Samples(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n
        self.cache = {}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.cache:
            return self.cache[i]
        g = torch.Generator().manual_seed(i)
        x = torch.randn(1024, generator=g)  # LEAK
        y = torch.randn(16, generator=g)
        if mode == 'leak':
            self.cache[i] = (x, y)  # KEEP
        return x, y


class Model(ComposerModel):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(1024, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))

    def forward(self, batch):
        return self.net(batch[0])

    def loss(self, outputs, batch):
        return torch.nn.functional.mse_loss(outputs, batch[1])


torch.manual_seed(0)
dl = torch.utils.data.DataLoader(Samples(steps * 16), batch_size=16)
callbacks = []
try:
    from composer.callbacks import MemoryMonitor
    callbacks.append(MemoryMonitor())
except ImportError:
    pass
trainer = Trainer(model=Model(), train_dataloader=dl, max_duration='%dba' % steps, device='cpu',
                  optimizers=None, callbacks=callbacks, progress_bar=False, log_to_console=False,
                  save_folder=None, seed=0)
trainer.fit()
print('composer %s: %d steps' % (mode, int(trainer.state.timestamp.batch)))
