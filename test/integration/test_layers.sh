#!/usr/bin/env bash
# test_layers — the shim's and the command's objects call only what their
# layers allow (scripts/layers.py states the layers and reads `nm` of
# build/shim/**/*.o and build/analysis/**/*.o); both halves run, and any
# call sideways or up fails the test.
set -u
cd "$(dirname "$0")/../.."
/usr/bin/python3 scripts/layers.py "$MT_BUILD" shim analysis
