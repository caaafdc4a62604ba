#!/usr/bin/env bash
# test/run.sh — runs every test and ends with "N passed, N failed".
#   MEMTALLY_TEST=name        run only tests whose name contains this
#   MEMTALLY_TEST=name:case   ... and within them only that case (a test
#                             that has cases reads MEMTALLY_CASE: mt.case())
#   MT_TESTS="a b"            run only the tests named, whole names
#                             (make check: those with a full matrix)
#   MEMTALLY_TEST_PREFIX=...  wrap C test binaries (e.g. "gdb --args"; runs
#                             the tests one at a time)
#   MT_JOBS=n                 tests run at once (default 2 where there are
#                             2 CPUs or more; 1: one after the other)
#   MT_FULL=1                 the slow matrices whole (`make check` sets it;
#                             a test reads it through mt.full())
# A test is test/unit/test_*.c (built, run), test/integration/test_*.py
# (run with Debian's /usr/bin/python3) or test/integration/test_*.sh.
# Each runs in its own session (setsid), its output in test/out/NAME/log,
# printed when it ends (the tail of it when it fails), in the order the
# tests end; the longest start first (test/out/.times keeps the last
# run's seconds).  Two tests never share a directory: each writes under
# its own MT_OUT; tests that rebuild the same part of build/ (GROUP
# below) never run at the same time.
# Watchdog: MEMTALLY_TEST_TIMEOUT seconds (default 300; 1200 with MT_FULL=1) of a test's own
# share of the machine: each second counts min(1, CPUs / load), so on a
# machine whose cores are all busy a test gets proportionally longer, up
# to 4 times the limit in wall time; then its session is killed (TERM,
# then KILL 5 s later) and it fails "(timed out: watchdog)".
# No process outlives its test: each carries MT_SUITE=<run>/<test> in its
# environment; when a test ends, any process of its session or with its
# mark still alive is listed in its log, killed, and the test fails; at
# the end the same for the whole run.
set -u
cd "$(dirname "$0")/.."
export MT_BUILD=$PWD/build PY=/usr/bin/python3
make -s -j"$(nproc 2>/dev/null || echo 1)" tests >/dev/null || { echo "building the tests failed"; echo "0 passed, 1 failed"; exit 1; }
filter=${MEMTALLY_TEST:-}
case "$filter" in *:*) export MEMTALLY_CASE=${filter#*:}; filter=${filter%%:*} ;; esac
ncpu=$(nproc 2>/dev/null || echo 1)
jobs=${MT_JOBS:-$((ncpu >= 2 ? 2 : 1))}
[ -n "${MEMTALLY_TEST_PREFIX:-}" ] && jobs=1
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
limit=${MEMTALLY_TEST_TIMEOUT:-$([ "${MT_FULL:-}" = 1 ] && echo 1200 || echo 300)}
run_id=$$.$EPOCHSECONDS.$RANDOM
mkdir -p test/out
times_file=test/out/.times

# Tests that must not overlap: the same group never runs twice at once.
group_of() {
	case "$1" in
	test_bundle | test_wheel) echo bundle ;; # both remake build/bundle
	*) echo "" ;;
	esac
}

# The tests, longest first (last run's seconds; unknown ones keep their
# place after the known slow ones, unit tests first).
names=() cmds=()
# Whole tests that only `make check` runs (MT_FULL=1), or one named
# (MEMTALLY_TEST): the bench harness's smoke run (70 s of CPU; it runs
# callgrind over the shim, and every workload of `make bench` once).
full_only=" test_bench_smoke "
add() { # name cmd...
	local name=$1; shift
	case "$name" in *"$filter"*) ;; *) return ;; esac
	if [ -n "${MT_TESTS:-}" ] && [[ " $MT_TESTS " != *" $name "* ]]; then
		return
	fi
	if [ "${MT_FULL:-}" != 1 ] && [ -z "$filter" ] && [ -z "${MT_TESTS:-}" ] && [[ "$full_only" == *" $name "* ]]; then
		echo "skip $name: make check runs it (MT_FULL=1)"
		return
	fi
	names+=("$name"); cmds+=("$(printf '%q ' "$@")")
}
for t in build/test/unit_*; do
	[ -x "$t" ] && add "${t##*/}" ${MEMTALLY_TEST_PREFIX:-} "$t"
done
for t in test/integration/test_*.py; do
	n=${t##*/}; add "${n%.py}" "$PY" "$t"
done
for t in test/integration/test_*.sh; do
	[ -e "$t" ] || continue
	n=${t##*/}; add "${n%.sh}" bash "$t"
done
# (a fresh tree: the slow ones as a run of 2026-12 took them, alone)
declare -A last=([test_pictures_torch]=300 [test_answers_torch]=255 [test_trainers]=237
	[test_why]=183 [test_torch_steps]=178 [test_bench_smoke]=141 [test_cuts]=136
	[test_pyframes]=118 [test_userline]=104 [test_torch_children]=86 [test_readme]=61
	[test_torch_leak]=56 [test_programs]=53 [test_pictures]=45 [test_cfi_programs]=42
	[test_formats]=41 [test_dlsym]=40 [test_torch]=34 [test_stress]=33 [test_damage]=32)
if [ -r "$times_file" ]; then
	while read -r n s; do [ -n "$n" ] && last[$n]=$s; done <"$times_file"
fi
order=()
while read -r _ i; do order+=("$i"); done < <(
	for i in "${!names[@]}"; do echo "${last[${names[$i]}]:-0} $i"; done | sort -k1,1nr -k2,2n -s)

# The processes of the suite still alive: those of the sessions given or
# whose environment has the mark (MT_SUITE=pattern, a regular expression).
strays() { # pattern sid...
	local pat=$1; shift
	local f p st rest s
	declare -A seen=()
	for f in $(grep -lzxE "MT_SUITE=$pat" /proc/[0-9]*/environ 2>/dev/null); do
		p=${f#/proc/}; seen[${p%/environ}]=1
	done
	if [ $# -gt 0 ]; then
		for f in /proc/[0-9]*/stat; do
			read -r st 2>/dev/null <"$f" || continue
			rest=(${st##*\) })
			for s; do [ "${rest[3]}" = "$s" ] && { p=${f#/proc/}; seen[${p%/stat}]=1; }; done
		done
	fi
	for p in "${!seen[@]}"; do
		[ "$p" = $$ ] && continue
		read -r st 2>/dev/null </proc/$p/stat || continue
		rest=(${st##*\) })
		[ "${rest[0]}" = Z ] && continue
		echo "$p $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-200)"
	done
}
# Kill what strays() listed (its output on stdin); prints the list.
reap() {
	local l pids=()
	while read -r l; do echo "$l"; pids+=("${l%% *}"); done
	[ ${#pids[@]} -eq 0 ] && return
	kill -TERM "${pids[@]}" 2>/dev/null; sleep 1; kill -KILL "${pids[@]}" 2>/dev/null
}

# The watchdog of one test's session.
watchdog() { # sid out
	local sid=$1 out=$2 used=0 wall=0 load share
	while kill -0 "$sid" 2>/dev/null; do
		sleep 2
		wall=$((wall + 2))
		read -r load _ </proc/loadavg
		load=${load/./}; load=$((10#$load)) # hundredths
		share=$((load > ncpu * 100 ? ncpu * 100 * 1000 / load : 1000))
		used=$((used + 2 * share))
		if [ $used -ge $((limit * 1000)) ] || [ $wall -ge $((limit * 4)) ]; then
			echo "$wall s wall, $((used / 1000)) s of the limit ($limit s) at load $((load / 100)).$((load % 100 / 10))" >"$out/.timedout"
			kill -TERM -- -"$sid" 2>/dev/null; sleep 5; kill -KILL -- -"$sid" 2>/dev/null
			return
		fi
	done
}

# One test, in the background: its own session, its output in its log; the
# subshell exits with the test's status after writing its CPU seconds.
launch() { # index
	local i=$1 name=${names[$1]} out=$PWD/test/out/${names[$1]}
	rm -rf "$out"; mkdir -p "$out"
	(
		export MT_OUT=$out
		eval "set -- ${cmds[$i]}"
		# setsid execs the test in this pid (a background child is no group
		# leader), so $! is its session; the mark on the test alone (not on
		# the watchdog's sleeps)
		# env --default-signal: a background job of a shell without job
		# control starts with SIGINT and SIGQUIT ignored (POSIX), which
		# every program a test runs would inherit (test_death's SIGINT
		# from outside then never ended its program)
		if [ "$jobs" -gt 1 ]; then
			MT_SUITE=$run_id/$name setsid env --default-signal=INT,QUIT,HUP "$@" >"$out/log" 2>&1 </dev/null &
		else
			MT_SUITE=$run_id/$name setsid env --default-signal=INT,QUIT,HUP "$@" >"$out/log" 2>&1 &
		fi
		tp=$!
		echo "$tp" >"$out/.sid"
		watchdog "$tp" "$out" &
		wp=$!
		wait "$tp"
		rc=$?
		kill "$wp" 2>/dev/null; wait "$wp" 2>/dev/null
		end=$EPOCHREALTIME
		times >"$out/.cpu" # (in this shell: its children's user and sys)
		echo "$end" >>"$out/.cpu"
		exit $rc
	) &
	pid_of[$!]=$i
	start[$i]=${EPOCHREALTIME/./}
}

ms() { # 1m2.345s -> 62345
	local m=${1%%m*} s=${1#*m}
	s=${s%s}; echo $(((10#$m * 60 + 10#${s%%.*}) * 1000 + 10#${s#*.}))
}

pass=0 fail=0 failed=() sids=()
declare -A pid_of=() start=() busy=()
finish() { # index rc
	local i=$1 rc=$2 name=${names[$1]} out=$PWD/test/out/${names[$1]}
	local log=$out/log sid cpu=() left try
	sid=$(cat "$out/.sid" 2>/dev/null)
	sids+=($sid)
	left=$(strays "$run_id/$name" $sid)
	for try in 1 2 3 4 5; do
		[ -z "$left" ] && break
		sleep 0.5
		left=$(strays "$run_id/$name" $sid)
	done
	if [ -n "$left" ]; then
		{ echo "  FAIL processes of the test still alive after it ended (killed):"
		  reap <<<"$left" | sed 's/^/    /'; } >>"$log"
		[ $rc -eq 0 ] && rc=1
	fi
	[ -e "$out/.timedout" ] && { rc=124; echo "  (timed out: watchdog: $(cat "$out/.timedout"))" >>"$log"; }
	cpu=($(tail -n +2 "$out/.cpu" 2>/dev/null))
	local end=${cpu[2]:-$EPOCHREALTIME}
	local s=$(((${end/./} - ${start[$i]} + 500000) / 1000000)) c=$((($(ms "${cpu[0]:-0m0.000s}") + $(ms "${cpu[1]:-0m0.000s}") + 500) / 1000))
	new_times+=("$name $s")
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf 'ok   %-28s %3ds  cpu %3ds\n' "$name" $s $c
	else
		fail=$((fail + 1)); failed+=("$name")
		printf 'FAIL %-28s %3ds  cpu %3ds\n' "$name" $s $c; sed 's/^/    /' "$log" | tail -40
	fi
}

stop_all() {
	local p
	for p in "${!pid_of[@]}"; do
		local sid; sid=$(cat "test/out/${names[${pid_of[$p]}]}/.sid" 2>/dev/null)
		[ -n "$sid" ] && kill -TERM -- -"$sid" 2>/dev/null
	done
	sleep 1
	strays "$run_id/.*" | reap >/dev/null
	echo "interrupted"; echo "$pass passed, $((fail + 1)) failed"
	exit 130
}
trap stop_all INT TERM

new_times=()
queue=("${order[@]}")
# Tests that mostly wait (for a cadence, an interval, a server: a fifth
# or less of their wall time on a CPU): one of them at a time runs beside
# the $jobs others rather than in a slot of theirs
light=" test_prometheus test_top test_peak test_shapes "
nlight=0
declare -A is_light=()
while [ ${#queue[@]} -gt 0 ] || [ ${#pid_of[@]} -gt 0 ]; do
	# start what may start: a free slot, the first queued test whose group
	# is free; a waiting test (light) has a slot of its own, beside them
	while [ ${#queue[@]} -gt 0 ]; do
		pick=-1
		for k in "${!queue[@]}"; do
			n=${names[${queue[$k]}]}
			g=$(group_of "$n")
			[ -n "$g" ] && [ -n "${busy[$g]:-}" ] && continue
			if [[ "$light" == *" $n "* ]] && [ "$jobs" -gt 1 ]; then
				[ "$nlight" -lt 1 ] && { pick=$k; break; }
			elif [ $((${#pid_of[@]} - nlight)) -lt "$jobs" ]; then
				pick=$k; break
			fi
		done
		[ $pick -lt 0 ] && break
		i=${queue[$pick]}
		unset 'queue[pick]'; queue=("${queue[@]}")
		g=$(group_of "${names[$i]}"); [ -n "$g" ] && busy[$g]=1
		[[ "$light" == *" ${names[$i]} "* ]] && [ "$jobs" -gt 1 ] && { nlight=$((nlight + 1)); is_light[$i]=1; }
		launch "$i"
	done
	wait -n -p done "${!pid_of[@]}"
	rc=$?
	[ -z "${done:-}" ] && continue
	i=${pid_of[$done]}
	unset 'pid_of[$done]'
	[ -n "${is_light[$i]:-}" ] && nlight=$((nlight - 1))
	g=$(group_of "${names[$i]}"); [ -n "$g" ] && unset 'busy[$g]'
	finish "$i" "$rc"
	done=
done

# Nothing of the suite outlives it.
left=$(strays "$run_id/.*" "${sids[@]}")
if [ -n "$left" ]; then
	echo "FAIL processes started by the suite still alive at its end (killed):"
	reap <<<"$left" | sed 's/^/    /'
	fail=$((fail + 1)); failed+=("(stray processes)")
fi
# the seconds of each test, for the order of the next run
for l in "${new_times[@]}"; do last[${l%% *}]=${l#* }; done
for n in "${!last[@]}"; do echo "$n ${last[$n]}"; done | sort >"$times_file"
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
