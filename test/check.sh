#!/usr/bin/env bash
# test/check.sh — `make check`: the stricter gate CI runs after `make test`.
# Each stage counts once; the last line is "N passed, N failed".
#   1. the strict build (-Werror, -Wmissing-prototypes, -Wshadow, ...)
#   2. on that build, the tests that have a slow matrix, whole (MT_FULL=1:
#      `make test` runs a fast subset of each; the trainer shapes of
#      test_trainers, the random deaths of test_death_random among them),
#      and those only this gate runs (test_bench_smoke).  The rest of the
#      suite is `make test`'s, which CI runs first: the strict build
#      changes warnings, not code, so a second run of it found nothing new
#      and took 15 minutes
#   3. the analysis, bad-input, MPI, CUDA, OOM, Python-frames, golden and formats
#      tests with the command built with ASan and UBSan
#   4. every analysis command under valgrind memcheck
#   5. the shim's tables from 4 threads under ThreadSanitizer
#   6. libFuzzer on the command's reader and writers (FUZZ_SECONDS each)
#   7. the HTML page's script parses (node --check), where node exists
set -u
cd "$(dirname "$0")/.."
STRICT=${STRICT:-"-Werror -Wmissing-prototypes -Wstrict-prototypes -Wshadow"}
pass=0 fail=0 failed=()
stage() { # name cmd...
	local name=$1; shift
	local t0=$SECONDS
	echo "== check: $name"
	if "$@"; then
		pass=$((pass + 1)); printf 'ok   check %-22s %4ds\n' "$name" $((SECONDS - t0))
	else
		fail=$((fail + 1)); failed+=("$name"); printf 'FAIL check %-22s %4ds\n' "$name" $((SECONDS - t0))
	fi
}
strict_build() { make -s clean && make -s all CFLAGS="-O2 -g $STRICT"; }
asan_tests() {
	make -s build/asan/memtally || return 1
	local t rc=0
	for t in analysis badinput mpi cuda oom pyframes golden formats; do
		MT_MEMTALLY=$PWD/build/asan/memtally MEMTALLY_LIB=$PWD/build/libmemtally.so \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		MEMTALLY_TEST=$t bash test/run.sh || rc=1
	done
	return $rc
}
tsan() { make -s build/test/tsan_test_tables && build/test/tsan_test_tables; }
js() {
	if ! command -v node >/dev/null; then echo "node not installed: skipped"; return 0; fi
	node --check analysis/export/page/report.js
}
stage strict-build strict_build
# the tests that read mt.full(), and run.sh's full_only ones
full_tests() {
	local t n
	for t in test/integration/test_*.py; do
		grep -q 'mt\.full()' "$t" && { n=${t##*/}; printf '%s ' "${n%.py}"; }
	done
	echo test_bench_smoke
}
stage suite env MT_FULL=1 MT_TESTS="$(full_tests)" bash test/run.sh
stage asan-ubsan asan_tests
stage valgrind bash test/valgrind.sh
stage tsan tsan
stage fuzz bash test/fuzz/run.sh
stage page-script js
[ ${#failed[@]} -gt 0 ] && echo "check failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
