"""Lightning Trainer on a small MLP, on the CPU.  leak: the LightningModule
keeps each step's output (with its graph) in a list for the epoch's end,
as the classic training_step_outputs pattern does; fixed: it keeps a float.  Usage: lightning_module.py leak|fixed STEPS"""
import sys
import torch
import lightning as L

mode, steps = sys.argv[1], int(sys.argv[2])


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
        self.outputs = []

    def training_step(self, batch, i):
        x, y = batch
        out = self.net(x)  # LEAK
        loss = torch.nn.functional.mse_loss(out, y)
        self.outputs.append(out if mode == 'leak' else float(out.detach().mean()))  # KEEP
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(steps * 64, 64), torch.randn(steps * 64, 256))
dl = torch.utils.data.DataLoader(data, batch_size=64)
trainer = L.Trainer(max_steps=steps, accelerator='cpu', devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, default_root_dir=sys.argv[3] if len(sys.argv) > 3 else None)
net = Net()
trainer.fit(net, dl)
print('lightning %s: %d steps, %d kept' % (mode, trainer.global_step, len(net.outputs)))
