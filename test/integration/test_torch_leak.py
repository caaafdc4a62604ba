"""The classic PyTorch leak, found from Python lines (issues 8 and 10): an
unmodified CPU trainer (torch_train.py: MLP, DataLoader with 2 workers,
SGD; 1024 steps) that keeps every step's loss with its graph, under
`memtally run` (`leaks --warmup 0.4`: `import torch` takes the first 40%):
 - `memtally leaks` names a suspect whose hybrid stack runs from libtorch's
   CPU allocator (c10::alloc_cpu) through torch.nn's Python code to the
   trainer's forward-pass line;
 - the suspects explain the tracked growth (within 25%), and the tracked
   figures explain RSS (the allocator's own footprint plus mappings,
   within 25%: glibc's arena fragments, so RSS grows faster than live bytes);
 - the same trainer without the leak: no suspect at all."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'torch_train.py')
fwd = [i + 1 for i, l in enumerate(open(script)) if 'model(x)' in l][0]
try:
    subprocess.run(['/usr/bin/python3', '-c', mt.FIND_TORCH], check=True, capture_output=True)
except subprocess.CalledProcessError:
    print('  FAIL python3-torch is not installed (scripts/setup-deps.sh installs it)')
    sys.exit(1)

def trainer_leaks(mode):
    d = os.path.join(OUT, mode)
    r = subprocess.run([MT, 'run', '--out', d, '--interval', '0.5', '--', '/usr/bin/python3', script, mode,
                        '/dev/null', '32768'], capture_output=True, text=True, timeout=300)
    mt.eq(r.returncode, 0, '%s: trainer exit code' % mode)
    r = subprocess.run([MT, 'leaks', '--json', '--top', '1000', '--warmup', '0.4', d], capture_output=True, text=True)
    mt.eq(r.returncode, 0, '%s: leaks exit code' % mode)
    ps = json.loads(r.stdout)['processes']
    return max(ps, key=lambda p: p['rows_examined'])  # the trainer, not its 2 workers

p = trainer_leaks('leak')
sus = p['suspects']
mt.check(len(sus) > 0, 'leak: %d suspects' % len(sus))
top = sus[0] if sus else {'frames': [], 'where': ''}
print('  top suspect: %s, %.1f MiB/h' % (top['where'], top.get('bytes_per_hour', 0) / 2**20))
fr = top['frames']
py = [(f['function'], os.path.basename(f['file'] or ''), f['line']) for f in fr if f.get('python')]
mt.check(any(f[1] == 'torch_train.py' and f[2] == fwd for f in py),
         'the top suspect runs through the forward pass, torch_train.py:%d (%s)' % (fwd, py))
mt.check(any(f[0] in ('relu', 'Linear.forward') for f in py), 'and through torch.nn\'s own Python code')
# the row is the line (its native variants one row); --stacks keeps each
# call site apart, with its whole stack: the top one's native cause
r = subprocess.run([MT, 'leaks', '--json', '--stacks', '--top', '5', '--warmup', '0.4', p['file']],
                   capture_output=True, text=True)
st = json.loads(r.stdout)['processes'][0]['suspects'] if r.returncode == 0 else []
fr = st[0]['frames'] if st else []
mt.check(any((f['function'] or '').startswith('c10::alloc_cpu') for f in fr if not f.get('python')) and
         any(f.get('python') and f['line'] == fwd for f in fr),
         'leaks --stacks: the top call site runs from libtorch\'s CPU allocation path (c10::alloc_cpu) '
         'to torch_train.py:%d' % fwd)
s_h, t_h, h_h = p['suspects_bytes_per_hour'], p['tracked_bytes_per_hour'], p['heap_bytes_per_hour']
rss_h, al_h = p['rss_bytes_per_hour'], p['allocator_bytes_per_hour']
print('  over %.1f s: suspects %.0f MiB/h, tracked %.0f MiB/h (heap %.0f), allocator footprint %.0f MiB/h, '
      'RSS %.0f MiB/h' % (p['window_ms'] / 1e3, s_h / 2**20, t_h / 2**20, h_h / 2**20, al_h / 2**20, rss_h / 2**20))
mt.check(abs(s_h - t_h) <= 0.25 * t_h, 'the suspects explain the tracked growth within 25%% (%.2f)' % (s_h / t_h))
explained = al_h + (t_h - h_h)  # the heap as the allocator holds it, plus mappings
mt.check(abs(explained - rss_h) <= 0.25 * rss_h,
         'RSS growth within 25%% of the allocator footprint plus mappings (%.2f; live heap alone: %.2f)'
         % (explained / rss_h, t_h / rss_h))

p = trainer_leaks('noleak')
mt.eq([s['where'] for s in p['suspects']], [], 'without the leak: no suspect')
mt.done()
