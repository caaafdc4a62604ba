#!/usr/bin/env bash
# setup-torch2.sh — the PyTorch 2.x virtual environment the framework
# matrix (test/integration/test_frameworks.py) runs in: Debian's
# /usr/bin/python3 with torch 2.x (PyPI's build, CUDA libraries included;
# it runs on the CPU), transformers, accelerate, lightning and mosaicml at
# the versions test/integration/frameworks/requirements.txt pins.  Outside
# the repository, kept between runs: $MT_TORCH2_VENV, default
# ~/.cache/memtally/venv-torch2.  A no-op when the venv holds those pins
# already; otherwise it is built afresh in place, and its marker
# (.memtally-requirements, which the test compares with the pins) is
# written last: a venv left half built is never used, and is built again.
# (Not built aside and moved: pip writes the venv's own path into its
# commands' first lines, and a moved venv's torchrun named a python that
# was gone.)  The product never uses it.  A failure (no network,
# no disk) is said on stderr and in VENV.failed, which the test prints as
# its reason to skip; it never fails the build (exit 0).
# MT_TORCH2_PYTHON: another interpreter to build it from (with
# MT_TORCH2_VENV, the matrix on Python 3.12: doc/python.md).
set -u
cd "$(dirname "$0")/.."
V=${MT_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/memtally/venv-torch2}
req=$PWD/test/integration/frameworks/requirements.txt
cmp -s "$req" "$V/.memtally-requirements" && [ -x "$V/bin/python" ] && exit 0
mkdir -p "$(dirname "$V")" || exit 0
echo "setup-torch2: building $V (torch 2.x and the frameworks from PyPI: about 5 GB, minutes)"
start=$EPOCHSECONDS
rm -rf "$V" "$V.new" "$V.failed"
log=$(mktemp)
if "${MT_TORCH2_PYTHON:-/usr/bin/python3}" -m venv "$V" >"$log" 2>&1 &&
	PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$V/bin/pip" install -q --progress-bar off \
		--no-input -r "$req" >>"$log" 2>&1; then
	cp "$req" "$V/.memtally-requirements"
	echo "setup-torch2: done in $((EPOCHSECONDS - start)) s, $(du -sh "$V" | cut -f1)"
else
	{ echo "setup-torch2: could not build $V:"; tail -5 "$log"; } | tee "$V.failed" >&2
	rm -rf "$V"
fi
rm -f "$log"
exit 0
