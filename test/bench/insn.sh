#!/usr/bin/env bash
# insn.sh — instructions per malloc/free pair, counted by callgrind, so the
# machine's noise does not enter: test/bench/insnbench.c runs N1 and then
# N2 pairs under `valgrind --tool=callgrind`, and (Ir(N2) - Ir(N1)) /
# (N2 - N1) is one pair's cost; start-up, the shim's constructor and its
# exit cancel.  Bare glibc's cost, then what memtally adds to it, exact
# (MEMTALLY_SAMPLE=0) and sampled (MEMTALLY_SAMPLE=512K), on a 4-frame
# stack and on 20-27-frame stacks; then the same for the shape family
# (test/bench/insnshapes.c, insnshapes_cxx.cc: malloc from a loop in main
# with rbp holding a loop value, through function pointers, two sites
# alternating, a realloc growth chain, calloc, a ring of 64 live blocks,
# C++ new/delete through unique_ptr and vector), each line's unit its
# own.  Prints markdown tables and the commands; `make bench` puts them
# in RESULTS.md.
#
#   bash test/bench/insn.sh            the table (needs build/libmemtally.so)
#   INSN_ANNOTATE=exact:shallow bash test/bench/insn.sh
#                                      also callgrind_annotate's top functions
#                                      of that run, per pair (the long run
#                                      minus the short one)
#   INSN_SHIM                          the shim to measure (build/libmemtally.so)
#   INSN_N1, INSN_N2                   the two run lengths (20000, 120000)
#   INSN_SHAPES="main ring ..."        the shape family's lines to run (all;
#                                      "none": the first table alone)
#   INSN_QUICK=1                       while optimizing: exact and sampled only,
#                                      bare glibc's taken as given (INSN_BARE_SHALLOW,
#                                      INSN_BARE_DEEP: 279, 425 here), N 5000 and 25000
set -eu
cd "$(dirname "$0")/../.."
ROOT=$PWD
SHIM=${INSN_SHIM:-$ROOT/build/libmemtally.so}
QUICK=${INSN_QUICK:-0}
if [ "$QUICK" = 1 ]; then N1=${INSN_N1:-5000} N2=${INSN_N2:-25000}; else N1=${INSN_N1:-20000} N2=${INSN_N2:-120000}; fi
TMP=$(mktemp -d /tmp/mtinsn.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
[ -f "$SHIM" ] || { echo "insn.sh: $SHIM missing: make all first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "insn.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
gcc -O2 -g -o "$TMP/insnbench" test/bench/insnbench.c
gcc -O2 -g -fomit-frame-pointer -o "$TMP/insnshapes" test/bench/insnshapes.c
g++ -O2 -g -fomit-frame-pointer -o "$TMP/insnshapes_cxx" test/bench/insnshapes_cxx.cc
SHAPES=${INSN_SHAPES:-main fptr alt realloc calloc ring unique vector}
[ "$SHAPES" = none ] && SHAPES=

# ir CONFIG SHAPE N: the program's total instructions (callgrind's summary)
ir() {
	local cfg=$1 shape=$2 n=$3 out="$TMP/cg.$1.$2.$3"
	# a fixed environment: the stack's layout (and so which starts share
	# a set of the shim's per-thread tables) does not follow the caller's
	local -a env=(env -i PATH="$PATH")
	case $cfg in
	bare) ;;
	exact) env+=(LD_PRELOAD="$SHIM" MEMTALLY_OUT="$TMP/out" MEMTALLY_CADENCE=0 MEMTALLY_SAMPLE=0) ;;
	sampled) env+=(LD_PRELOAD="$SHIM" MEMTALLY_OUT="$TMP/out" MEMTALLY_CADENCE=0 MEMTALLY_SAMPLE=512K) ;;
	esac
	local prog=$TMP/insnbench
	case $shape in
	shallow | deep) ;;
	unique | vector) prog=$TMP/insnshapes_cxx ;;
	*) prog=$TMP/insnshapes ;;
	esac
	"${env[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$prog" "$shape" "$n" >/dev/null 2>"$out.log" ||
		{ echo "insn.sh: callgrind run failed: $cfg $shape $n" >&2; cat "$out.log" >&2; exit 1; }
	sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$out" | head -1
}

declare -A per
for shape in shallow deep; do
	per[bare.$shape]=${INSN_BARE_SHALLOW:-279}
	[ $shape = deep ] && per[bare.$shape]=${INSN_BARE_DEEP:-425}
	for cfg in bare exact sampled; do
		[ "$QUICK" = 1 ] && [ $cfg = bare ] && continue
		a=$(ir $cfg $shape "$N1")
		b=$(ir $cfg $shape "$N2")
		per[$cfg.$shape]=$(( (b - a + (N2 - N1) / 2) / (N2 - N1) ))
	done
done

echo "| program | bare glibc per pair | added by exact | added by sampled (512K) |"
echo "|---|---|---|---|"
for shape in shallow deep; do
	case $shape in
	shallow) what="4-frame stack, 1 site, sizes 16 B-4 KiB" ;;
	deep) what="20-27-frame stacks, 8 sites, sizes 16 B-4 KiB" ;;
	esac
	bare=${per[bare.$shape]}
	echo "| $what | $bare | $(( per[exact.$shape] - bare )) | $(( per[sampled.$shape] - bare )) |"
done
echo
echo "Instructions per malloc/free pair (callgrind's Ir): for each configuration,"
echo "\`valgrind --tool=callgrind test/bench/insnbench SHAPE N\` with N = $N1 and $N2"
echo "(\`LD_PRELOAD=build/libmemtally.so MEMTALLY_SAMPLE=0\` exact, \`=512K\` sampled),"
echo "then (Ir($N2) - Ir($N1)) / $((N2 - N1)); the memtally columns less bare glibc's."
echo "insnbench.c built with gcc -O2 -g (no frame pointers: the CFI walker's case)."

if [ -n "$SHAPES" ]; then
	for shape in $SHAPES; do
		for cfg in bare exact sampled; do
			a=$(ir $cfg $shape "$N1")
			b=$(ir $cfg $shape "$N2")
			per[$cfg.$shape]=$(( (b - a + (N2 - N1) / 2) / (N2 - N1) ))
		done
	done
	echo
	echo "| shape | unit | bare glibc per unit | added by exact | added by sampled (512K) |"
	echo "|---|---|---|---|---|"
	for shape in $SHAPES; do
		case $shape in
		main) what="malloc/free from a loop in main, rbp holding the loop's sum|pair" ;;
		fptr) what="malloc/free through function pointers|pair" ;;
		alt) what="two call sites, alternating|pair" ;;
		realloc) what="realloc growth chain, 16 B doubling to 4 KiB|realloc" ;;
		calloc) what="calloc/free|pair" ;;
		ring) what="ring of 64 live blocks (each free takes the block of 64 units ago)|pair" ;;
		unique) what="C++ std::make_unique of a 64-byte object|object" ;;
		vector) what="C++ std::vector<int> of 4-1024 elements|object" ;;
		*) what="$shape|unit" ;;
		esac
		bare=${per[bare.$shape]}
		echo "| $what | $bare | $(( per[exact.$shape] - bare )) | $(( per[sampled.$shape] - bare )) |"
	done
	echo
	echo "The shape family: \`valgrind --tool=callgrind test/bench/insnshapes SHAPE N\`"
	echo "(insnshapes_cxx for unique and vector) with N = $N1 and $N2 units, the same"
	echo "difference; built -O2 -g -fomit-frame-pointer (g++ for C++)."
fi

if [ -n "${INSN_ANNOTATE:-}" ]; then
	cfg=${INSN_ANNOTATE%%:*} shape=${INSN_ANNOTATE##*:}
	echo
	echo "Where $cfg $shape's instructions go, per pair (self cost: callgrind_annotate of both runs, the difference over the pairs):"
	echo '```'
	# self cost per function in each run; the difference over the pairs
	for n in "$N1" "$N2"; do
		callgrind_annotate --auto=no --threshold=100 "$TMP/cg.$cfg.$shape.$n" 2>/dev/null |
			sed -n 's/^ *\([0-9,][0-9,]*\) ([^)]*) *\([^ ]*:[^ ]*\).*$/\1 \2/p' |
			sed 's|[^ ]*/||; s/,//g' >"$TMP/fn.$n"
	done
	awk -v d=$((N2 - N1)) 'NR == FNR { a[$2] = $1; next } { v = ($1 - a[$2]) / d; if (v >= 1) printf "%8.1f  %s\n", v, $2 }' \
		"$TMP/fn.$N1" "$TMP/fn.$N2" | sort -rn | head -30
	echo '```'
fi
