#!/usr/bin/env bash
# test_fields — record field names are defined once (shim/format.h: MT_R_*
# record types, MT_F_* fields, MT_KEY for the writer), and both sides use
# them: no JSON key is written as a literal in the shim's writers, and no
# field is looked up by a literal in the command's reader.  A rename is
# then one line, and writer and reader cannot differ (issue 34).
set -u
cd "$(dirname "$0")/../.."
fail=0
# the writer: a key written as \"name\": inside a C string
w=$(grep -rnE '\\"[a-z_0-9]+\\":' shim --include=*.c)
if [ -n "$w" ]; then
	echo "FAIL: JSON keys written as literals in the shim (use MT_KEY(MT_F_...)):"
	echo "$w"
	fail=1
else
	echo "ok   the shim writes no JSON key as a literal"
fi
# the reader: a field looked up by a literal name (torchsnap.c reads
# PyTorch's own snapshot, torch.cuda.memory._snapshot()'s keys as torch
# names them, passed through by scripts/python/memtally_cuda.py: not the
# shim's names)
r=$(grep -nE '(json_get|json_int|json_str|json_num|opt_count|opt_i64|opt_str|str_field|need_int|need_count|need_hex|flag)\([^;]*, *"[a-z_0-9]+"' $(ls analysis/read/*.c | grep -v '/torchsnap\.c$'))
if [ -n "$r" ]; then
	echo "FAIL: fields read by a literal name (use MT_F_...):"
	echo "$r"
	fail=1
else
	echo "ok   the reader looks up no field by a literal name"
fi
# and the names the two share are the ones the format documents
missing=$(sed -n 's/^#define MT_[FR]_[A-Z0-9_]* "\([a-z_0-9]*\)".*/\1/p' shim/format.h | sort -u |
	while read -r k; do grep -q "\b$k\b" doc/FORMAT.md || echo "$k"; done)
if [ -n "$missing" ]; then
	echo "FAIL: names in shim/format.h that doc/FORMAT.md does not mention: $missing"
	fail=1
else
	echo "ok   every name in shim/format.h is in doc/FORMAT.md"
fi
exit $fail
