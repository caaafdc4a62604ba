"""Real frameworks on real PyTorch 2.x (issue 54), in the venv
scripts/setup-torch2.sh builds (torch 2.x, transformers, accelerate,
lightning, mosaicml from PyPI at test/integration/frameworks/
requirements.txt's pins; `make test`'s deps build it once, outside the
repository).  Each entry is a small CPU model built from a config (no
download: HF_HUB_OFFLINE=1) with a leak on a known line of the program's
own code (test/integration/frameworks/*.py, marked `# LEAK`: the line
that allocates; `# KEEP`: where it is kept) and its fixed twin, run
unchanged, bare and under `memtally run`:

  hf          Hugging Face Trainer, tiny GPT-2: a Trainer subclass keeps
              each step's logits with their graph
  lightning   Lightning Trainer: a LightningModule keeps each step's output
  composer    MosaicML Composer Trainer (its MemoryMonitor callback beside
              memtally's): a dataset caches every sample
  compile     a plain loop under torch.compile keeps each step's output
  accelerate  Accelerate, 2 CPU processes under torchrun (gloo): rank 1 alone
              keeps them

For each (leak and fixed): exit status and stdout equal the bare run's;
steps are marked by the hook (torch 2.x's optimizer step post-hook: the
last snapshot's step mark is the run's steps); leak: row 1 of `memtally
leaks` is the `# LEAK` line, its "kept alive by" names the program's
object; fixed: no row of `leaks` is led by a line of the program's;
accelerate: `memtally ranks` names rank 1.  Python stacks are taken 64
deep (MEMTALLY_PYDEPTH=64): 16 cut the program's line off behind the
frameworks' frames.  `api`: what the hook calls of torch 2.x's API exists
on the real module with the arguments it passes (CUDA's caching allocator
cannot run on the CPU: test_cuda's double stays), and `memtally torch`'s
pickle loads in 2.x's torch.cuda._memory_viz.

`make test` runs api and lightning's leak, `make check` every entry, leak
and fixed; MT_FRAMEWORKS=all (or the entry named:
MEMTALLY_TEST=test_frameworks:hf) runs them outside it.  When the venv
could not be built the test says why and passes."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))
FW = os.path.join(HERE, 'frameworks')
VENV = os.environ.get('MT_TORCH2_VENV') or os.path.join(
    os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'memtally', 'venv-torch2')
PY = os.path.join(VENV, 'bin', 'python')
REQ = os.path.join(FW, 'requirements.txt')

if not (os.path.exists(PY) and open(REQ).read() == (open(os.path.join(VENV, '.memtally-requirements')).read()
                                                    if os.path.exists(os.path.join(VENV, '.memtally-requirements')) else None)):
    why = open(VENV + '.failed').read().strip() if os.path.exists(VENV + '.failed') else \
        'not built (`bash scripts/setup-torch2.sh` builds it; make test\'s deps run it)'
    print('  skip: the PyTorch 2.x venv %s: %s' % (VENV, why))
    mt.done()

ENV = dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', HF_DATASETS_OFFLINE='1',
           TRANSFORMERS_VERBOSITY='error', TOKENIZERS_PARALLELISM='false', PYTHONHASHSEED='0',
           TORCHINDUCTOR_CACHE_DIR=os.path.join(OUT, 'inductor'), TRITON_CACHE_DIR=os.path.join(OUT, 'triton'),
           HF_HOME=os.path.join(OUT, 'hf'), OMP_NUM_THREADS='1', MKL_NUM_THREADS='1',
           WANDB_MODE='disabled', DISABLE_MLFLOW_INTEGRATION='TRUE')
for k in [k for k in ENV if k.startswith('MEMTALLY_') and k != 'MEMTALLY_CASE']:
    del ENV[k]
RUN_ENV = dict(ENV, MEMTALLY_PYDEPTH='64')

# name: (script, steps, the name "kept alive by" gives, launcher)
ENTRIES = {
    'lightning': ('lightning_module.py', 40, 'outputs', None),
    'compile': ('compiled.py', 40, 'kept', None),
    'hf': ('hf_trainer.py', 40, 'seen', None),
    'composer': ('composer_run.py', 40, 'cache', None),
    'accelerate': ('accel.py', 40, 'kept', 'torchrun'),
}
FAST = ('lightning',)
# The entries make check runs, leak and fixed: every one has passed whole
# through test/run.sh (MT_FRAMEWORKS=all runs them outside make check;
# ~510 s of CPU here, compile 174 of it)
PASSED = tuple(ENTRIES)


def sh(args, env=ENV, timeout=None, **kw):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          timeout=timeout or mt.slack(600), **kw)


def line_of(script, tag):
    return [i + 1 for i, l in enumerate(open(os.path.join(FW, script))) if l.rstrip().endswith('# ' + tag)][0]


def argv(name, mode, d):
    script, steps, _, launcher = ENTRIES[name]
    a = [os.path.join(FW, script), mode, str(steps), os.path.join(d, 'work')]
    if launcher == 'torchrun':
        # (`accelerate launch --cpu --num_processes 2` starts one process:
        # Accelerate's multi-CPU launch wants MPI; under torchrun the
        # Accelerator takes its ranks from the environment, gloo)
        return [os.path.join(VENV, 'bin', 'torchrun'), '--nproc_per_node', '2',
                '--master_port', str(mt.free_port())] + a
    return [PY] + a


def stable(text):
    """What of stdout is the program's: the same bare and under memtally
    (the paths of this run's own folders are the only difference)."""
    text = re.sub(r"'(train_runtime|train_samples_per_second|train_steps_per_second)': '[^']*'",
                  r"'\1': T", text)  # the Trainer's own timings
    return text.replace(OUT, 'OUT')


def one(name, mode):
    script, steps, keeper, launcher = ENTRIES[name]
    d = os.path.join(OUT, name, mode)
    os.makedirs(os.path.join(d, 'work'), exist_ok=True)
    bare = sh(argv(name, mode, d))
    mem = sh([MT, 'run', '--out', os.path.join(d, 'mt'), '--'] + argv(name, mode, d), env=RUN_ENV)
    if bare.returncode:
        print('    bare run: %s' % bare.stderr[-2000:])
    if mem.returncode != bare.returncode:
        print('    under memtally: %s' % mem.stderr[-2000:])
    mt.eq((mem.returncode, stable(mem.stdout)), (bare.returncode, stable(bare.stdout)),
          '%s %s: exit status and stdout under memtally run = the bare run\'s' % (name, mode))
    fs = [f for f in mt.files(os.path.join(d, 'mt')) if f.snapshots]
    stepped = [f for f in fs if f.final().get('marks', {}).get('step')]
    mt.check(stepped and all(f.final()['marks']['step'] == steps for f in stepped) and
             len(stepped) == (2 if launcher else 1),
             '%s %s: steps marked with no code change, %d in each training process (%s)'
             % (name, mode, steps, [(os.path.basename(f.path), f.final().get('marks')) for f in fs]))
    r = sh([MT, 'leaks', '--json', '--top', '20', os.path.join(d, 'mt')])
    procs = json.loads(r.stdout)['processes'] if r.returncode == 0 else []
    leak_line = line_of(script, 'LEAK')
    want = '%s:%d' % (script, leak_line)
    mine = {}
    for p in procs:
        rows = [s for s in p['suspects'] if re.match(r'\S*\b%s:\d+' % re.escape(script), s['where'])]
        # the rank, else the pid: torch.compile's worker processes have
        # no rank ("rank": null), and keyed by it the last one hid the
        # trainer's row
        who = p['rank'] if p.get('rank') is not None else 'pid %s' % p.get('pid')
        if rows or p['suspects']:
            mine[who] = (p, rows)
        print('    %s %s: process %s: %s' % (name, mode, who, [s['where'][:90] for s in p['suspects'][:3]]))
    if mode == 'fixed':
        bad = {k: [s['where'] for s in rows] for k, (p, rows) in mine.items() if rows}
        mt.check(r.returncode == 0 and not bad, '%s fixed: no row of leaks is led by a line of %s (%s)'
                 % (name, script, bad))
        return
    leaking = [(k, p) for k, (p, rows) in mine.items() if p['suspects'] and want in p['suspects'][0]['where']]
    mt.check(len(leaking) == 1, '%s leak: row 1 of leaks is %s, the program\'s leaking line, in %s process '
             '(%s)' % (name, want, 'one' if not launcher else 'rank 1\'s', [k for k, _ in leaking]))
    if leaking:
        top = leaking[0][1]['suspects'][0]
        kept = json.dumps(top.get('kept_by'))
        mt.check(re.search(r'\b%s\b' % keeper, kept) is not None,
                 '%s leak: "kept alive by" names the program\'s %s (%s)' % (name, keeper, kept[:300]))
    if launcher:
        mt.check([k for k, _ in leaking] == [1], '%s leak: the leaking process is rank 1' % name)
        r = sh([MT, 'ranks', '--json', os.path.join(d, 'mt')])
        print('    ranks: %s' % r.stdout[:1500])
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        mt.eq(j.get('outliers'), [1], '%s leak: memtally ranks names rank 1, and only it, as the outlier' % name)


# --- what the hook calls of torch 2.x, on the real module ---
if mt.case('api'):
    d = os.path.join(OUT, 'api')
    os.makedirs(d, exist_ok=True)
    probe = os.path.join(d, 'probe.py')
    with open(probe, 'w') as fh:
        fh.write("""import inspect, json, sys, torch
import torch.cuda._memory_viz
st = sys.modules['_memtally.steps'].state()
cuda = torch.cuda
got = {
    'version': torch.__version__,
    'method': st['method'],
    # cuda.py's calls, with the arguments it passes (bound, not called:
    # the CPU has no caching allocator)
    'history': str(inspect.signature(cuda.memory._record_memory_history).bind(
        'all', context='alloc', stacks='python', max_entries=100000)),
    'has': [hasattr(o, n) for o, n in ((cuda, '_lazy_call'), (cuda, 'is_initialized'),
            (cuda, 'get_allocator_backend'), (cuda, 'device_count'), (cuda.memory, '_snapshot'),
            (torch._C, '_cuda_attach_out_of_memory_observer'), (torch._C, '_cuda_memoryStats'))],
    'initialized': cuda.is_initialized(),
}
net = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW(net.parameters())
for i in range(3):
    net(torch.randn(2, 4)).sum().backward()
    opt.step()
got['steps'] = sys.modules['_memtally.steps'].state()['steps']
print(json.dumps(got))
""")
    r = sh([MT, 'run', '--out', os.path.join(d, 'mt'), '--', PY, probe])
    got = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else {}
    fs = mt.files(os.path.join(d, 'mt'))
    warns = [w for f in fs for w in f.warnings]
    print('    %s' % got)
    mt.check(got.get('method') == 'post-hook' and got.get('steps') == 3 and all(got.get('has', [False])) and
             got.get('history') and got.get('initialized') is False and not warns,
             'api: torch %s: steps through register_optimizer_step_post_hook (3 marked), every torch.cuda '
             'function cuda.py calls exists, _record_memory_history takes its arguments, CUDA left '
             'uninitialised, no warning of the hook\'s (%s)' % (got.get('version'), warns))
    # the pickle `memtally torch` writes of the fake driver's OOM dump loads
    # in 2.x's own viewer (its functions that need no download)
    cudadir = os.path.join(d, 'cuda')
    env = dict(ENV, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'), FAKE_CUDA_MEM=str(64 << 20),
               MEMTALLY_OUT=cudadir, LD_PRELOAD=os.path.join(B, 'libmemtally.so'))
    sh([os.path.join(B, 'test', 'cuda_prog'), 'rt', 'oom', cudadir], env=env)
    dumps = sorted(p for p in os.listdir(cudadir) if '.oom' in p) if os.path.isdir(cudadir) else []
    pk = os.path.join(d, 'dump.pickle')
    r = sh([MT, 'torch', os.path.join(cudadir, dumps[0]), '-o', pk]) if dumps else None
    v = sh([PY, '-c', 'import pickle, sys; from torch.cuda import _memory_viz as v; '
            'd = pickle.load(open(sys.argv[1], "rb")); s = v.segsum(d); '
            'lines = v.memory(d, format_flamegraph=lambda x: x).splitlines(); '
            'h = v.trace_plot(d) + v.segment_plot(d); '
            'print(len(d["segments"]), sum(int(l.rsplit(" ", 1)[1]) for l in lines if l.strip()), '
            'len(s) > 0, "<html" in h.lower() or "<!doctype" in h.lower())', pk]) if r and r.returncode == 0 else None
    print('    _memory_viz: %s %s' % (v.stdout.strip() if v else None, v.stderr.strip()[-500:] if v else ''))
    mt.check(v is not None and v.returncode == 0 and v.stdout.split()[-1:] == ['True'] and int(v.stdout.split()[0]) > 0,
             'api: memtally torch\'s pickle of an OOM dump loads in torch %s\'s _memory_viz (segsum, memory, '
             'trace_plot, segment_plot)' % got.get('version'))

ALL = os.environ.get('MT_FRAMEWORKS') == 'all' or os.environ.get('MEMTALLY_CASE') in ENTRIES
for name in ENTRIES:
    if (ALL or (mt.full() and name in PASSED) or name in FAST) and mt.case(name):
        # make test: the leak (bare and under memtally); the fixed twin
        # (no false suspect on the framework's own lines) in make check
        for mode in ('leak', 'fixed') if ALL or mt.full() else ('leak',):
            one(name, mode)

mt.done()
