"""demo_train.py -- a Python training loop in miniature for `make demo` and
README's Quick start: 200 steps; each keeps 256 KiB it never frees (the
leak, line 13), and steps 10-15 hold a 64 MiB evaluation buffer (the
spike, line 16).  Run it under `memtally run` with no options."""
import time
history = []

def load_batch(step):
    return [bytearray(4096) for _ in range(64)]

def train_step(step):
    batch = load_batch(step)
    history.append(bytes(256 * 1024))   # the leak: kept forever
    if step == 10:
        global cache
        cache = bytearray(64 << 20)      # a spike: an evaluation buffer...
    if step == 15:
        del cache                        # ...freed soon after
    time.sleep(0.02)

for step in range(200):
    train_step(step)
