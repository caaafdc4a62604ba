#!/usr/bin/env bash
# demo.sh — `make demo`: run the bundled example trainer under the shim,
# then show what memtally makes of it.
set -eu
cd "$(dirname "$0")/.."
out=demo-out
rm -rf "$out"
echo "== memtally run --interval 0.05 -- build/demo_trainer 300"
build/memtally run --out "$out" --interval 0.05 -- build/demo_trainer 300
echo
echo "== memtally report $out"
build/memtally report --top 6 "$out"
echo "== memtally leaks $out"
build/memtally leaks "$out"
echo "files: $(ls "$out"/*.jsonl)"
