#!/usr/bin/env bash
# venv.sh — the peers' venv of `make bench` (test/bench/peers.py): memray
# and pytest-memray from PyPI in a venv outside the repository, made with
# Debian's /usr/bin/python3 and --system-site-packages so Debian's torch is
# the one every tool's Python workload imports.  Reused when memray imports
# there already.  MEMTALLY_BENCH_VENV names it (default
# ~/.cache/memtally/venv-bench).  Benchmark tooling only: memtally itself
# never uses this venv.  A failure (no network) is a warning: the peers'
# table then says memray is not installed.
set -u
venv=${MEMTALLY_BENCH_VENV:-$HOME/.cache/memtally/venv-bench}
if "$venv/bin/python3" -c 'import memray, pytest_memray' 2>/dev/null; then
	exit 0
fi
echo "bench: installing memray and pytest-memray into $venv"
mkdir -p "$(dirname "$venv")"
if ! { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
	"$venv/bin/pip" install -q memray pytest-memray; }; then
	echo "bench: warning: could not install memray into $venv; the peers' table will lack it" >&2
fi
exit 0
