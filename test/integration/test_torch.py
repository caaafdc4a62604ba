"""An unmodified PyTorch CPU training script (MLP, DataLoader with 2 worker
processes, SGD, torch.save) under `memtally run` prints the same losses and
exits with the same code as without it, and every process -- the trainer
and its two DataLoader workers (forked, leaving through os._exit) --
writes its own file.  Then a 2-rank gloo job where rank 1 keeps every
step's loss with its graph, under `memtally run -- torchrun
--nproc_per_node 2`: a file per rank named by its rank, and `memtally ranks`
names rank 1 and only rank 1 (the job sampled, --sample 256K; MT_FULL=1
only: test_answers_torch's ddp case checks the same of the unsampled job,
and test_pictures_torch's page the sampled one)."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'torch_train.py')
try:
    subprocess.run(['/usr/bin/python3', '-c', mt.FIND_TORCH], check=True, capture_output=True)
except subprocess.CalledProcessError:
    print('  FAIL python3-torch is not installed (scripts/setup-deps.sh installs it)')
    sys.exit(1)
ck = os.path.join(OUT, 'ck.pt')
plain = subprocess.run(['/usr/bin/python3', script, 'noleak', ck], capture_output=True, text=True, timeout=300)
mt.eq(plain.returncode, 0, 'runs without memtally')
run = os.path.join(OUT, 'run')
r = subprocess.run([MT, 'run', '--out', run, '--interval', '0.5', '--', '/usr/bin/python3', script, 'noleak', ck],
                   capture_output=True, text=True, timeout=300)
mt.eq(r.returncode, plain.returncode, 'same exit code under memtally run')
mt.eq(r.stdout, plain.stdout, 'same losses, to the last digit')
fs = mt.files(run)
main = [f for f in fs if f.header['argv'][-2:] == ['noleak', ck] and f.header['ppid'] != fs[0].header['pid']]
pids = {f.header['pid'] for f in fs}
trainer = [f for f in fs if f.header['ppid'] not in pids][0]
workers = [f for f in fs if f.header['ppid'] == trainer.header['pid']]
mt.check(len(workers) >= 2, 'the DataLoader workers wrote their own files (%d)' % len(workers))
mt.check(all(w.snapshots for w in workers), 'each worker\'s file holds its snapshots (last: %s)'
         % [w.final()['reason'] for w in workers])
mt.check(trainer.final()['heap']['allocs'] > 100000, 'the trainer\'s allocations are tracked (%d)' %
         trainer.final()['heap']['allocs'])

if not mt.full():  # make test: test_answers_torch's ddp case runs the job unsampled, the
    mt.done()        # same checks of its files and ranks; test_pictures_torch's sampled
ddp = os.path.join(OUT, 'ddp')
script2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'torch_ddp.py')
# Debian's torchrun 1.13 under Python 3.11 fails before starting a rank with
# its default --redirects 0 --tee 0 ('NoneType' object has no attribute
# 'get': Std.from_str cannot find the 0-valued member of an IntFlag there);
# --redirects 1 --tee 1 works around it (stdout to a log file and the console).
r = subprocess.run([MT, 'run', '--out', ddp, '--interval', '0.2', '--sample', '256K', '--',
                    'torchrun', '--nproc_per_node', '2', '--redirects', '1', '--tee', '1',
                    '--master_port', str(mt.free_port()), script2, '1'],
                   capture_output=True, text=True, timeout=300)
mt.eq(r.returncode, 0, 'memtally run -- torchrun --nproc_per_node 2: exit code (%s)' % r.stderr[-300:])
mt.check('ddp done' in r.stdout, 'the job ran to its end')
mt.check(re.search(r'memtally: 3 new files in \S+; see: memtally report', r.stderr) is not None,
         'one line says where the files are and what shows them')
names = sorted(os.path.basename(f.path).split('.')[2] for f in mt.files(ddp))
mt.eq([n for n in names if n.startswith('r')], ['r0', 'r1'], 'each rank\'s file is named by its rank')
r = subprocess.run([MT, 'ranks', '--json', ddp], capture_output=True, text=True)
mt.eq(json.loads(r.stdout)['outliers'] if r.returncode == 0 else None, [1], 'ranks names the leaking rank 1, and only it')
mt.done()
