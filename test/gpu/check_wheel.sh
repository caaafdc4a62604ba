#!/usr/bin/env bash
# check_wheel.sh — the wheel's pytest plugin on a real GPU and driver (run on
# a GPU machine when one is lent; CI never runs it; test_wheel does the same
# on the fake driver).  Installs the wheel offline into a venv that sees the
# machine's torch and pytest, and runs `pytest --memtally` on device limits:
# a tensor of 200 MB against cuda="64 MB" fails naming its line, one of
# 32 MB passes, 4 MB kept per call against max_per_call="1 MB" fails naming
# its line; the session report ranks the device peaks.
#   here:  make wheel      (then carry dist/ to the GPU machine)
#   there: bash test/gpu/check_wheel.sh dist/memtally-*.whl [OUTDIR]   (~1 min)
set -u
whl=$(realpath "${1:-}" 2>/dev/null) && [ -f "$whl" ] || { echo "usage: check_wheel.sh WHEEL [OUTDIR] (make wheel)"; exit 2; }
out=${2:-${OUT:-/tmp}/memtally-gpu-wheel}
PY=${PYTHON:-python3}
rm -rf "$out" && mkdir -p "$out" && cd "$out" || exit 1
$PY -m venv --system-site-packages venv || exit 1
venv/bin/python -m pip install -q --no-index --no-deps "$whl" || exit 1
venv/bin/python -c 'import pytest, torch; assert torch.cuda.is_available()' ||
	{ echo "needs pytest and torch with CUDA beside $PY"; exit 1; }
cat >test_gpu_limits.py <<'PYEOF'
import pytest, torch

kept = []


@pytest.mark.memtally_limit(cuda="64 MB")
def test_cuda_over():
    x = torch.empty(200 << 20, dtype=torch.uint8, device='cuda')  # names: over
    del x
    torch.cuda.empty_cache()


@pytest.mark.memtally_limit(cuda="64 MB")
def test_cuda_ok():
    x = torch.empty(32 << 20, dtype=torch.uint8, device='cuda')
    del x
    torch.cuda.empty_cache()


@pytest.mark.memtally_leaks(max_per_call="1 MB", warmups=1)
def test_cuda_leaks():
    kept.append(torch.empty(4 << 20, dtype=torch.uint8, device='cuda'))  # names: leaks
PYEOF
venv/bin/python -m pytest -p no:cacheprovider -rA --memtally --memtally-out files test_gpu_limits.py >log 2>&1
cat log
line() { grep -n "# names: $1" test_gpu_limits.py | cut -d: -f1; }
status=0
check() { if eval "$2"; then echo "  ok   $1"; else echo "  FAIL $1"; status=1; fi; }
check "the 200 MB tensor fails its 64 MB limit" "grep -q '^FAILED test_gpu_limits.py::test_cuda_over' log"
check "the failure names its line" "grep -q '^  test_gpu_limits.py:$(line over) ' log"
check "the 32 MB tensor passes" "grep -q '^PASSED test_gpu_limits.py::test_cuda_ok' log"
check "4 MB kept per call fails max_per_call 1 MB" "grep -q '^FAILED test_gpu_limits.py::test_cuda_leaks' log"
check "the leak names its line" "grep -q '^  test_gpu_limits.py:$(line leaks) ' log"
check "the session report ranks the device peaks" "grep -A1 '^device (CUDA):' log | grep -q 'test_cuda_over'"
exit $status
