#!/usr/bin/env bash
# run.sh — `make bench`: memtally beside memray, heaptrack, jemalloc prof
# and gperftools, in one run; writes test/bench/RESULTS.md (bench.py), then
# the snapshot cadence's cost and file size (cadence.py: RESULTS-cadence.md),
# and the .prom file's (prom.py: RESULTS-prometheus.md).
set -eu
cd "$(dirname "$0")/../.."
MEMTALLY_DEPS_EXTRA="heaptrack google-perftools libjemalloc2 hyperfine valgrind" bash scripts/setup-deps.sh
make -s tests
bash test/bench/venv.sh   # memray for the peers' table, in a venv outside the tree
/usr/bin/python3 test/bench/bench.py
/usr/bin/python3 test/bench/cadence.py
/usr/bin/python3 test/bench/prom.py
