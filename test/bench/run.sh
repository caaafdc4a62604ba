#!/usr/bin/env bash
# run.sh — `make bench`: memtally beside memray, heaptrack, jemalloc prof
# and gperftools, in one run; writes test/bench/RESULTS.md (bench.py), then
# the snapshot cadence's cost and file size (cadence.py: RESULTS-cadence.md),
# the .prom file's (prom.py: RESULTS-prometheus.md), a snapshot's time
# against call sites, the page against `leaks`, and the phases' marks
# (snapcost.sh, html.sh, phases.py: RESULTS-more.md).
set -eu
cd "$(dirname "$0")/../.."
MEMTALLY_DEPS_EXTRA="heaptrack google-perftools libjemalloc2 hyperfine valgrind" bash scripts/setup-deps.sh
make -s tests
bash test/bench/venv.sh   # memray for the peers' table, in a venv outside the tree
/usr/bin/python3 test/bench/bench.py
/usr/bin/python3 test/bench/cadence.py
/usr/bin/python3 test/bench/prom.py
{
	echo "# Snapshots, the page, phases ($(date -u +%F), $(nproc) cores)"
	echo
	echo "## A snapshot's time against call sites (test/bench/snapcost.sh)"
	echo
	bash test/bench/snapcost.sh
	echo
	echo "## The HTML page against leaks, CPU seconds (test/bench/html.sh)"
	echo
	bash test/bench/html.sh
	echo
	echo "## Phases (test/bench/phases.py)"
	echo
	/usr/bin/python3 test/bench/phases.py
} >test/bench/RESULTS-more.md
