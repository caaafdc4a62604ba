#!/usr/bin/env bash
# valgrind.sh — `make check`: memcheck on every analysis command over the
# test suite's own output (run after test/run.sh).  Any error fails.
set -u
cd "$(dirname "$0")/.."
o=test/out
vg="valgrind -q --error-exitcode=9 --leak-check=no"
fail=0 n=0
run() {
	n=$((n + 1))
	if ! $vg build/memtally "$@" >/dev/null 2>/tmp/vg.$$; then
		fail=$((fail + 1)); echo "FAIL memtally $*"; tail -20 /tmp/vg.$$
	fi
}
d=$(mktemp -d)
run report $o/test_analysis/known
run leaks $o/test_analysis/leak
run diff $o/test_analysis/noleak $o/test_analysis/leak
run ranks $o/test_mpi
run oom $o/test_cuda/oom
run flame $o/test_analysis/leak -o $d/f.svg
run html $o/test_pictures/run -o $d/r.html
run torch $o/test_cuda/oom -o $d/d.pickle
run torch --format 1.13 $o/test_cuda/oom -o $d/d113.pickle
run pprof --merge $o/test_mpi -o $d/m.pb.gz
run pprof $o/test_pyframes/sites-debian-3.11 -o $d/p.pb.gz
run flame --folded $o/test_analysis/leak -o $d/f.folded
run report --stacks $o/test_pyframes/sites-debian-3.11
run flame $o/test_pyframes/stale-debian-3.11 -o $d/p.svg
rm -rf "$d" /tmp/vg.$$
echo "valgrind: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
