#!/usr/bin/env bash
# demo.sh — `make demo`: the bundled example trainer under the shim (a host
# leak), then a GPU out-of-memory: on the real driver when a GPU is there,
# else on the test suite's fake libcuda.so.1; then what memtally makes of
# both: report, leaks, oom, and the HTML page and flame graph; then a
# Python training loop (scripts/demo_train.py) under memtally run with no
# options: the peak, the leak and the script's own lines.
set -eu
cd "$(dirname "$0")/.."
out=demo-out
rm -rf "$out"
echo "== memtally run --every 100 -- build/demo_trainer 300   (snapshots by count: the same on every machine)"
build/memtally run --out "$out" --every 100 -- build/demo_trainer 300
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
	echo "== a GPU is here: the OOM example needs PyTorch (test/gpu/check.sh); skipped in the demo"
else
	echo
	echo "== no GPU here: a CUDA program that runs out of device memory, on the fake driver (test/fakecuda)"
	LD_LIBRARY_PATH=$PWD/build/test/fakecuda FAKE_CUDA_MEM=1073741824 \
		build/memtally run --append --out "$out" -- build/test/cuda_prog rt oom "$out" >/dev/null
fi
echo
echo "== memtally report $out"
build/memtally report --top 6 "$out"
echo "== memtally leaks $out"
build/memtally leaks "$out"
if ls "$out"/*.oom*.jsonl >/dev/null 2>&1; then
	echo "== memtally oom $out"
	build/memtally oom --top 5 "$out"
fi
build/memtally html "$out" -o "$out/report.html"
build/memtally flame "$out" -o "$out/flame.svg"
echo
echo "== a Python training loop with no options: memtally run -- python3 scripts/demo_train.py"
build/memtally run --out "$out/python" -- /usr/bin/python3 scripts/demo_train.py
echo "== memtally report $out/python   (the peak, with the script's lines)"
build/memtally report --top 3 "$out/python"
echo "== memtally leaks $out/python"
build/memtally leaks "$out/python"
echo "HTML page:   $out/report.html"
echo "flame graph: $out/flame.svg"
echo "files:       $(ls "$out"/*.jsonl* | tr '\n' ' ')"
