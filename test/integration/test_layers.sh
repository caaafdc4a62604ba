#!/usr/bin/env bash
# test_layers — the shim's objects call only lower layers (scripts/layers.py
# reads `nm` of build/shim/**/*.o; README "Layout" describes the layers).
set -u
cd "$(dirname "$0")/../.."
/usr/bin/python3 scripts/layers.py "$MT_BUILD"
