#!/usr/bin/env bash
# check.sh — memtally on a real GPU and driver (run on a GPU machine when one
# is lent; CI never runs it).  Builds nothing: it takes the folder `make
# bundle` made here (the shim and command with their libraries; the GPU
# machine has no libunwind or libdw and no package registry), runs test/gpu/
# torch_check.py under the shim with the plain and the expandable-segments
# allocator, and prints a table: memtally's live device bytes beside
# torch.cuda.memory_reserved() and the driver's used bytes (cuMemGetInfo),
# per step, whether the OOM dump existed before PyTorch raised, and whether
# the tensors' device memory is charged to the Python line that made them.
# Then PyTorch's view joined with the driver's (test/gpu/torch_oom.py, torch
# >= 2.0 with scripts/python/_memtally/cuda.py): a trainer's real OOM; the
# pair (dump + <dump>.torch.jsonl) on disk before OutOfMemoryError reached
# Python, the recovery and raised outcomes, the joined totals reconciling to
# the byte and against the driver's used memory, NCCL or cuBLAS memory
# outside torch, PyTorch's own _memory_viz opening `memtally torch`'s
# pickle, and what memory history costs per allocation and at the OOM.
#   here:  make bundle      (then carry build/bundle to the GPU machine)
#   there: bash test/gpu/check.sh build/bundle [OUTDIR]     (~2 min)
set -u
cd "$(dirname "$0")/../.."
bundle=$(cd "${1:-build/bundle}" 2>/dev/null && pwd) || { echo "usage: check.sh BUNDLE_DIR [OUTDIR] (make bundle)"; exit 2; }
[ -f "$bundle/libmemtally.so" ] || { echo "$bundle: no libmemtally.so: run make bundle here and carry the folder"; exit 2; }
out=${2:-${OUT:-/tmp}/memtally-gpu}
PY=${PYTHON:-python3}
PYTHONDONTWRITEBYTECODE=1; export PYTHONDONTWRITEBYTECODE
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || exit 1
status=0
for conf in "" "expandable_segments:True"; do
	d=$out/${conf:-plain}; rm -rf "$d"; mkdir -p "$d"
	res=$(PYTORCH_CUDA_ALLOC_CONF=$conf LD_PRELOAD=$bundle/libmemtally.so MEMTALLY_OUT=$d \
		timeout 300 $PY test/gpu/torch_check.py 2>"$d/stderr") || { echo "run failed ($conf)"; tail -5 "$d/stderr"; status=1; continue; }
	echo "$res" >"$d/result.json"
	$PY - "$d" "$bundle" <<'PYEOF' || status=1
import glob, json, os, subprocess, sys
d = sys.argv[1]
res = json.load(open(os.path.join(d, 'result.json')))
f = [p for p in glob.glob(os.path.join(d, 'memtally.*.jsonl*')) if '.oom' not in p][0]
snaps, frames, pystacks, stack_py = {}, {}, {}, {}
# the bundle's own reader: that machine has no zstd command
for line in subprocess.run([os.path.join(sys.argv[2], 'memtally'), 'cat', f], capture_output=True,
                           text=True, check=True).stdout.splitlines():
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get('type') == 'snapshot' and r.get('label'):
        snaps[r['label']] = r
    elif r.get('type') == 'pyframe':
        frames[r['id']] = (os.path.basename(r['file']), r['line'])
    elif r.get('type') == 'pystack':
        pystacks[r['id']] = [frames[i] for i in r['frames']]
    elif r.get('type') == 'stack':
        stack_py[r['id']] = r.get('py', 0)
print('allocator conf: %r  device: %s  torch %s' % (res['alloc_conf'], res['device'], res['torch']))
print('%-10s %14s %14s %14s %14s' % ('step', 'memtally dev', 'torch reserved', 'driver used', 'mt - reserved'))
ok = True
for step in ('start', 'plain', 'cublas', 'emptied', 'after_oom'):
    s = snaps.get(step, {})
    live = sum(x['live_bytes'] for x in s.get('devices', []) if x['device'] == 0)
    t = res[step]
    print('%-10s %14d %14d %14d %14d' % (step, live, t['reserved'], t['driver_used'], live - t['reserved']))
    # every byte PyTorch reserved went through the driver calls we wrap
    ok &= live >= t['reserved']
# Python frames: the 8 x 64 MiB tensors' device memory is charged to the
# line that made them, through PyTorch's caching allocator
line = [i + 1 for i, l in enumerate(open('test/gpu/torch_check.py')) if 'x = [torch.empty' in l][0]
at_line = sum(c['live_bytes'] for c in snaps.get('plain', {}).get('callsites', [])
              if c['kind'].startswith('cuda') and ('torch_check.py', line) in pystacks.get(stack_py.get(c['stack'], 0), []))
print('device bytes charged to torch_check.py:%d at "plain": %d (want >= %d)' % (line, at_line, 8 * (64 << 20)))
ok &= at_line >= 8 * (64 << 20)
oom = res['oom']
dumps = glob.glob(os.path.join(d, '*.oom*.jsonl'))
print('OOM: %s; dumps now: %d' % (oom, len(dumps)))
ok &= isinstance(oom, dict) and oom['dumps_at_raise'] >= 1
dev = snaps.get('after_oom', {}).get('devices', [{}])[0]
print('after OOM: ooms=%s recovered=%s' % (dev.get('ooms'), dev.get('oom_recovered')))
print('RESULT:', 'ok' if ok else 'MISMATCH')
sys.exit(0 if ok else 1)
PYEOF
	# --- PyTorch's view at a real OOM, joined with the driver's ---
	j=$d/join; mkdir -p "$j"
	res=$(PYTORCH_CUDA_ALLOC_CONF=$conf LD_PRELOAD=$bundle/libmemtally.so MEMTALLY_OUT=$j \
		PYTHONPATH=$PWD/scripts/python${PYTHONPATH:+:$PYTHONPATH} \
		timeout 300 $PY test/gpu/torch_oom.py 2>"$j/stderr") || { echo "torch_oom failed ($conf)"; tail -5 "$j/stderr"; status=1; continue; }
	echo "$res" >"$j/result.json"
	"$bundle/memtally" oom "$j" >"$j/oom.txt" 2>&1
	"$bundle/memtally" oom --json --top 100000 "$j" >"$j/oom.json" 2>"$j/oom.err"
	$PY - "$j" "$bundle" <<'PYEOF' || status=1
import glob, json, os, subprocess, sys
j, bundle = sys.argv[1], sys.argv[2]
res = json.load(open(os.path.join(j, 'result.json')))
ok = True
def check(c, what):
    global ok
    ok &= bool(c)
    print('  %s %s' % ('ok  ' if c else 'FAIL', what))
print('torch %s CUDA %s, allocator conf %r, NCCL: %s' % (res['torch'], res['cuda'], res['alloc_conf'], res['nccl']))
oom = res['oom']
check(isinstance(oom, dict) and oom['pair_at_raise'], 'a real OOM (batch %s); torch snapshot on disk before the raise: %s'
      % (oom.get('batch') if isinstance(oom, dict) else '-', oom.get('pair_at_raise') if isinstance(oom, dict) else oom))
dumps = json.load(open(os.path.join(j, 'oom.json')))['dumps']
for d in dumps:
    print('  %s: %s(%d) outcome %s' % (os.path.basename(d['file']), d['api'], d['requested_bytes'],
                                     d['outcome']['outcome'] if d['outcome'] else None))
paired = [d for d in dumps if d.get('torch')]
check(len(paired) == 1 and paired[0]['outcome']['outcome'] == 'raised', 'the paired dump is the one torch raised')
if paired:
    t = paired[0]['torch']
    print('  device %d: driver live %d = torch allocated %d + torch cached %d + outside torch %d'
          % (t['device'], t['driver_live_bytes'], t['torch_allocated_bytes'], t['torch_cached_bytes'], t['outside_bytes']))
    check(t['reconciles'] and t['torch_allocated_bytes'] + t['torch_cached_bytes'] + t['outside_bytes'] == t['driver_live_bytes'],
          'the totals reconcile to the byte (mismatch %d, unmapped handles %d)' % (t['mismatch_bytes'], t['unmapped_bytes']))
    used = paired[0]['driver_total_bytes'] - paired[0]['driver_free_bytes']
    check(0 <= used - t['driver_live_bytes'] < 2 << 30,
          'the driver used %d at the dump: memtally live %d + %d not allocated through the API (context, modules)'
          % (used, t['driver_live_bytes'], used - t['driver_live_bytes']))
    owners = {}
    for o in t['outside']:
        owners[o['owner']] = owners.get(o['owner'], 0) + o['size']
    print('  outside torch by owner: %s' % owners)
    check(owners.get('NCCL', 0) > 0 or owners.get('cuBLAS', 0) > 0, 'NCCL or cuBLAS memory shown outside torch')
    if 'expandable' in res['alloc_conf']:
        check(any(s['expandable'] for s in t['segments']), 'expandable segments, backed by VMM mappings')
    dump = paired[0]['file']
    pk = os.path.join(j, 'joined.pickle')
    r = subprocess.run([os.path.join(bundle, 'memtally'), 'torch', dump, '-o', pk], capture_output=True, text=True)
    viz = subprocess.run([sys.executable, '-c', '''if 1:
        import pickle, sys
        from torch.cuda import _memory_viz as v
        d = pickle.load(open(sys.argv[1], "rb"))
        html = v.trace_plot(d) if hasattr(v, "trace_plot") else ""
        seg = v.segment_plot(d) if hasattr(v, "segment_plot") else ""
        print(len(d["segments"]), sum(s["total_size"] for s in d["segments"]), len(html) + len(seg))''', pk],
        capture_output=True, text=True)
    print('  memtally torch -> _memory_viz: %s %s' % (viz.stdout.strip(), viz.stderr.strip()[-300:]))
    check(r.returncode == 0 and viz.returncode == 0, 'PyTorch\'s _memory_viz opens the joined pickle (trace_plot, segment_plot)')
print('  history cost (us per empty+del, off -> on): %s; _snapshot() %s s and conversion %s s for %s entries'
      % (res.get('history_us_per_alloc_free'), res.get('snapshot_s'), res.get('convert_s'), res.get('trace_entries')))
print('RESULT (join):', 'ok' if ok else 'MISMATCH')
sys.exit(0 if ok else 1)
PYEOF
done
exit $status
