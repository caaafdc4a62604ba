#!/usr/bin/env bash
# test_bundle — `make bundle` gives a folder that runs alone: the GPU
# machine has no libunwind or libdw.  In a private mount namespace the
# Debian libraries the build uses (libunwind, libdw, libelf) are covered by
# /dev/null and LD_LIBRARY_PATH is empty; the bundle's shim and command must
# still load, record a Python process (with the bundle's Python hook) and
# report it.  Needs root (unshare).
set -u
cd "$(dirname "$0")/../.."
fail=0
check() { if eval "$2"; then echo "  ok   $1"; else echo "  FAIL $1"; fail=1; fi; }
make -s bundle >/dev/null || { echo "  FAIL make bundle"; exit 1; }
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
	echo "  skip: needs root and unshare -m to hide the system libraries"; exit 0
fi
out=$MT_OUT/run
unshare -m bash -s "$PWD/build" "$out" >"$MT_OUT/hidden.log" 2>&1 <<'INNER'
b=$1 out=$2
for n in libunwind.so.8 libunwind-x86_64.so.8 libdw.so.1 libelf.so.1; do
	for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu; do
		[ -e "$d/$n" ] && mount --bind /dev/null "$d/$n"
	done
done
export LD_LIBRARY_PATH=
echo "plain shim: $(LD_PRELOAD=$b/libmemtally.so /bin/true 2>&1 | head -1)"
ldd "$b/bundle/libmemtally.so" "$b/bundle/memtally" | grep -E 'libunwind|libdw|libelf'
cd /tmp && "$b/bundle/memtally" run --out "$out" -- /usr/bin/python3 -c \
	'import sys; x = [bytes(1000) for i in range(5000)]; print("python ran")
print("hook", sys.modules["sitecustomize"].__file__)'
echo "rc=$?"
"$b/bundle/memtally" report "$out"
INNER
log=$MT_OUT/hidden.log
cat "$log"
check "the system's libunwind is hidden (the plain build cannot load)" "grep -q 'plain shim:.*libunwind.so.8: file too short' '$log'"
check "the bundle's libraries come from its own lib/" "[ \$(grep -cE '=> $PWD/build/bundle/lib/' '$log') -ge 3 ]"
check "the program ran under the bundle's shim" "grep -q '^python ran' '$log' && grep -q '^rc=0' '$log'"
check "the bundle carries the Python hook, and its memtally run uses it" "grep -q '^hook $PWD/build/bundle/python/sitecustomize.py' '$log'"
check "the bundle's command reports the file" "grep -q 'heap' '$log' && ls $out/memtally.*.jsonl* >/dev/null"
exit $fail
