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
done
exit $status
