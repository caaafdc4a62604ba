#!/usr/bin/env bash
# test/run.sh — runs every test and ends with "N passed, N failed".
#   MEMTALLY_TEST=name        run only tests whose name contains this
#   MEMTALLY_TEST=name:case   ... and within them only that case (a test
#                             that has cases reads MEMTALLY_CASE: mt.case())
#   MEMTALLY_TEST_PREFIX=...  wrap C test binaries (e.g. "gdb --args")
# A test is test/unit/test_*.c (built, run), test/integration/test_*.py
# (run with Debian's /usr/bin/python3) or test/integration/test_*.sh.
# Each runs under a watchdog (MEMTALLY_TEST_TIMEOUT, default 300 s).
set -u
cd "$(dirname "$0")/.."
export MT_BUILD=$PWD/build PY=/usr/bin/python3
make -s tests >/dev/null || { echo "building the tests failed"; echo "0 passed, 1 failed"; exit 1; }
filter=${MEMTALLY_TEST:-}
case "$filter" in *:*) export MEMTALLY_CASE=${filter#*:}; filter=${filter%%:*} ;; esac
pass=0 fail=0 failed=()
run_one() { # name cmd...
	local name=$1; shift
	case "$name" in *"$filter"*) ;; *) return ;; esac
	export MT_OUT=$PWD/test/out/$name
	rm -rf "$MT_OUT"; mkdir -p "$MT_OUT"
	local t0=$SECONDS log=$MT_OUT/log
	timeout -k 5 "${MEMTALLY_TEST_TIMEOUT:-300}" "$@" >"$log" 2>&1
	local rc=$?
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf 'ok   %-28s %3ds\n' "$name" $((SECONDS - t0))
	else
		fail=$((fail + 1)); failed+=("$name")
		[ $rc -eq 124 ] && echo "  (timed out: watchdog)" >>"$log"
		printf 'FAIL %-28s %3ds\n' "$name" $((SECONDS - t0)); sed 's/^/    /' "$log" | tail -40
	fi
}
for t in build/test/unit_*; do
	[ -x "$t" ] && run_one "${t##*/}" ${MEMTALLY_TEST_PREFIX:-} "$t"
done
for t in test/integration/test_*.py; do
	n=${t##*/}; run_one "${n%.py}" "$PY" "$t"
done
for t in test/integration/test_*.sh; do
	[ -e "$t" ] || continue
	n=${t##*/}; run_one "${n%.sh}" bash "$t"
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
