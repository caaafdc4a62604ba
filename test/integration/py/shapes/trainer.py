"""Writes a PyTorch CPU trainer of one shape (test_trainers.py).

    trainer.py OUT.py STEPS LOOP LEAK END [LEAK_FROM]

LOOP  module   the loop at module level
      function the loop in train(), called from main; what it keeps is a
               local of train() (dies when it returns)
      pool     train() in 2 spawn Pool workers; the pool's terminate()
               ends them with SIGTERM (what they keep is a global of theirs)
      workers  the loop at module level, fed by a DataLoader with 2 workers
      ddp      2-rank gloo DistributedDataParallel (torchrun); rank 1 leaks
LEAK  graph    each step keeps a forward's output with its autograd graph
      cache    each step keeps a copy of its batch in a dict
      none     the fixed variant: nothing is kept
END   exit     falls off the end
      more     more work after the loop (allocations that are freed)
      term     the process sends itself SIGTERM after the loop
LEAK_FROM      the step the leak starts at (default 0)

The leaking line is the one that ends with "# LEAK"; the test reads its
number from the file it wrote."""
import sys

HEAD = '''import os, signal, sys, time
import torch
import torch.nn as nn
torch.manual_seed(0)
torch.set_num_threads(1)
STEPS, LEAK_FROM = %(steps)d, %(leak_from)d


def make_model():
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 64))


def churn():
    for _ in range(50):
        junk = [bytearray(4096) for _ in range(16)]
        del junk
'''

STEP = {
    'graph': '''        if i >= LEAK_FROM and LEAKS:
            kept.append(model(xv).sum())  # LEAK
''',
    'cache': '''        if i >= LEAK_FROM and LEAKS:
            kept[i] = x * 1.5  # LEAK
''',
    'none': '''        if i >= LEAK_FROM and LEAKS:
            kept.append(float(model(xv).sum()))
''',
}

TRAIN = '''

def train(model, batches, kept):
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    xv = torch.randn(128, 256)
    for i, x in enumerate(batches):
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
%(step)s
'''

def batches_plain():
    return '''
def batches(n):
    for _ in range(n):
        yield torch.randn(128, 256)
'''

WORKERS = '''
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return STEPS * 128

    def __getitem__(self, k):
        return torch.randn(256)


def batches(n):
    return torch.utils.data.DataLoader(Data(), batch_size=128, num_workers=2)
'''

END = {
    'exit': '',
    'more': '    churn()\n    time.sleep(0.3)\n    churn()\n',
    'term': '    os.kill(os.getpid(), signal.SIGTERM)\n    time.sleep(5)\n',
}


def main_for(loop, leak, end):
    kept = '{}' if leak == 'cache' else '[]'
    if loop in ('module', 'workers'):
        return '''
LEAKS = True
kept = %s
model = make_model()
train(model, batches(STEPS), kept)
''' % kept + (END[end].replace('    ', '', 1).replace('\n    ', '\n') if END[end] else '')
    if loop == 'function':
        return '''
LEAKS = True


def run():
    kept = %s
    train(make_model(), batches(STEPS), kept)
    return len(kept)


if __name__ == '__main__':
    print(run())
''' % kept + ''.join('    ' + l + '\n' for l in END[end].replace('    ', '').splitlines())
    if loop == 'pool':
        return '''
LEAKS = True
kept = %s


def work(_):
    train(make_model(), batches(STEPS), kept)
    return len(kept)


if __name__ == '__main__':
    import multiprocessing as mp
    pool = mp.get_context('spawn').Pool(2)
    print(pool.map(work, [0, 1], chunksize=1))
    time.sleep(0.5)
    pool.terminate()
    pool.join()
''' % kept + ''.join('    ' + l + '\n' for l in END[end].replace('    ', '').splitlines())
    if loop == 'ddp':
        return '''
import torch.distributed as dist
dist.init_process_group('gloo')
LEAKS = dist.get_rank() == 1
kept = %s
model = nn.parallel.DistributedDataParallel(make_model())
train(model, batches(STEPS), kept)
dist.destroy_process_group()
''' % kept + (END[end].replace('    ', '', 1).replace('\n    ', '\n') if END[end] else '')
    raise SystemExit('unknown loop ' + loop)


def write(path, steps, loop, leak, end, leak_from=0):
    src = HEAD % {'steps': steps, 'leak_from': leak_from}
    src += WORKERS if loop == 'workers' else batches_plain()
    src += TRAIN % {'step': STEP[leak]}
    src += main_for(loop, leak, end)
    with open(path, 'w') as f:
        f.write(src)
    lines = src.splitlines()
    return next((k + 1 for k, l in enumerate(lines) if l.endswith('# LEAK')), None)


if __name__ == '__main__':
    a = sys.argv[1:]
    print(write(a[0], int(a[1]), a[2], a[3], a[4], int(a[5]) if len(a) > 5 else 0))
