"""py_deaths.py HOW THREADS [torch]: a Python process that dies at a
moment test_deaths chooses while its threads allocate (issue 51's
random-death property test).  HOW: wait (killed from outside once it
printed "ready"), abort (os.abort() after a moment), fault (a read through
NULL with ctypes).  THREADS threads build and drop lists, dicts and
bytearrays and print to /dev/null; with "torch", the main thread trains a
small MLP meanwhile (its optimizer steps are the hook's step marks)."""
import os, sys, threading, time

how, threads = sys.argv[1], int(sys.argv[2])
use_torch = len(sys.argv) > 3 and sys.argv[3] == 'torch'


def busy(k):
    keep = []
    out = open(os.devnull, 'w')
    n = 0
    while True:
        n += 1
        keep.append(bytearray(100 + (n * 37 + k) % 5000))
        keep.append({'n': n, 's': 'x' * (n % 300)})
        if len(keep) > 400:
            del keep[:200]
        if n % 16 == 0:
            print('round', n, file=out)


for k in range(threads):
    threading.Thread(target=busy, args=(k,), daemon=True).start()

held = [bytearray(10000) for _ in range(64)]
step = None
if use_torch:
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        x = torch.randn(32, 64)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    step()
print('ready', flush=True)
t0 = time.monotonic()
while True:
    if step:
        step()
    else:
        time.sleep(0.001)
    if how != 'wait' and time.monotonic() - t0 > 0.05:
        if how == 'abort':
            os.abort()
        if how == 'fault':
            import ctypes
            ctypes.string_at(0)
