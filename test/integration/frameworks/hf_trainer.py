"""Hugging Face Trainer on a tiny GPT-2 built from its config (no download),
on the CPU.  leak: the Trainer subclass keeps each step's logits with
their graph (a "metric" gathered for later); fixed: it keeps a detached
float.  Usage: hf_trainer.py leak|fixed STEPS"""
import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

mode, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, 128, (32,), generator=torch.Generator().manual_seed(i))
        return {'input_ids': ids, 'labels': ids}


class KeepingTrainer(Trainer):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen = []

    def compute_loss(self, model, inputs, return_outputs=False, **kw):
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, **kw)  # LEAK
        if mode == 'leak':
            self.seen.append(outputs.logits)  # KEEP
        else:
            self.seen.append(float(outputs.logits.detach().mean()))
        return (loss, outputs) if return_outputs else loss


cfg = GPT2Config(vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=2)
model = GPT2LMHeadModel(cfg)
args = TrainingArguments(output_dir=sys.argv[3] if len(sys.argv) > 3 else '/tmp/hf_out', max_steps=steps,
                         per_device_train_batch_size=4, learning_rate=1e-3, logging_strategy='no',
                         save_strategy='no', report_to=[], disable_tqdm=True, use_cpu=True,
                         dataloader_num_workers=0, seed=0)
trainer = KeepingTrainer(model=model, args=args, train_dataset=Tokens())
trainer.train()
print('hf_trainer %s: %d steps, %d kept' % (mode, trainer.state.global_step, len(trainer.seen)))
