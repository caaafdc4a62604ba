#!/usr/bin/env bash
# test/fuzz/run.sh — libFuzzer (clang) on the memtally command, for a
# bounded time (FUZZ_SECONDS per target, default 60), from seeds the shim
# writes here: a leaking C program's snapshots, a CUDA OOM dump (fake
# driver), a Python process's file (pyframe/pystack records); and the
# reader's hostile cases made here (a zstd bomb, a cut and a corrupt
# frame, negative sizes and times, values whose sums and products
# overflowed).
#   fuzz_reader:  report, leaks, ranks, oom, functions, top on each input
#   fuzz_writers: torch (pickle), html, flame on each input
#   fuzz_names:   strings with every byte value (argv, host, module path,
#                 Python names, label, mark, OOM kind/api/error, trace op)
#                 in a process file and an OOM dump, every writer's output
#                 checked in the harness (UTF-8, JSON, XML, the page's data)
# Any crash, sanitizer report, failed check or timeout fails; afterwards
# every corpus file `memtally torch` accepts must give a pickle Python's
# own pickle loads, and the files fuzz_names made of its corpus go through
# Python's json, XML parser and pickle (check_outputs.py).  Run by
# `make check`; needs clang with libFuzzer.
set -eu
cd "$(dirname "$0")/../.."
B=$PWD/build
F=$B/fuzz
SECS=${FUZZ_SECONDS:-60}
rm -rf "$F" && mkdir -p "$F/seeds"
SRC=$(find analysis -name '*.c' ! -path analysis/main.c | sort)
for t in reader writers names; do
	clang -g -O1 -std=c11 -D_GNU_SOURCE -DMT_FUZZ -DFUZZ_$(echo $t | tr a-z A-Z) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-Ianalysis -I. -o "$F/fuzz_$t" test/fuzz/fuzz_cmd.c $SRC \
		-x c analysis/main.c -Dmain=memtally_main -Ishim shim/platform/config.c shim/platform/buf.c shim/platform/fdio.c \
		shim/platform/glue.c -ldw -lelf -lm -lprotobuf-c -lz -lzstd
done
# seeds: plain JSONL (the parser is what is fuzzed), and one compressed
# file (the zstd reader)
export MEMTALLY_COMPRESS=0
MEMTALLY_COMPRESS=1 MEMTALLY_OUT=$F/s4 MEMTALLY_EVERY=500 LD_PRELOAD=$B/libmemtally.so $B/test/prog_trainer leak 10 >/dev/null
MEMTALLY_OUT=$F/s1 MEMTALLY_EVERY=200 LD_PRELOAD=$B/libmemtally.so $B/test/prog_trainer leak 20 >/dev/null
LD_LIBRARY_PATH=$B/test/fakecuda FAKE_CUDA_MEM=$((64 << 20)) MEMTALLY_OUT=$F/s2 LD_PRELOAD=$B/libmemtally.so \
	$B/test/cuda_prog rt oom "$F/s2" >/dev/null 2>&1 || true
MEMTALLY_OUT=$F/s3 LD_PRELOAD=$B/libmemtally.so /usr/bin/python3 -S -c \
	'import ctypes; x = [bytearray(5000) for _ in range(50)]; ctypes.CDLL(None).memtally_snapshot(b"s")'
# the reader's hostile cases (issues 33 and 45): a zstd bomb of zeros, a line of
# spaces, a file cut inside a frame, a corrupt frame, negative sizes and
# times, an allocator footprint of 1e999 and two large integers (the sum
# overflowed), a dump whose times overflowed torch's us (10^16 ms) and a
# request of 2^64-1 bytes
mkdir -p "$F/s5"
head -c 16M /dev/zero | zstd -q -1 -c >"$F/s5/memtally.bomb.p1.jsonl.zst"
(printf '{'; head -c 4M /dev/zero | tr '\0' ' ') | zstd -q -1 -c >"$F/s5/memtally.spaces.p1.jsonl.zst"
z=$(ls "$F"/s4/*.jsonl.zst | head -1)
head -c $(($(stat -c %s "$z") - 40)) "$z" >"$F/s5/memtally.cut.p1.jsonl.zst"
/usr/bin/python3 - "$z" "$F/s5" <<'PY'
import sys
z, out = sys.argv[1], sys.argv[2]
b = bytearray(open(z, 'rb').read())
for i in range(len(b) // 2, len(b) // 2 + 16):
    b[i] ^= 0x5a
open(out + '/memtally.corrupt.p1.jsonl.zst', 'wb').write(bytes(b))
h = ('{"type":"header","version":3,"pid":7,"host":"h","exe":"/x","argv":["x"]}\n'
     '{"type":"stack","id":1,"pcs":["0x401000"]}\n')
site = ('"callsites_mode":"full","callsites":[{"stack":1,"kind":"heap","live_bytes":64,'
        '"live_count":1,"allocs":1,"alloc_bytes":64,"frees":0,"peak_bytes":64}]}\n')
def snap(seq, extra):
    return '{"type":"snapshot","seq":%d,"reason":"every","elapsed_ms":%d,%s' % (seq, seq * 10, extra) + site
cases = {
    'negative': h + snap(0, '') + snap(1, '"wall_ns":-5,"proc":{"rss_bytes":-1},') +
                snap(2, '"heap":{"allocs":-3},').replace('"elapsed_ms":20', '"elapsed_ms":-99999999999'),
    'footprint': h + snap(0, '"allocator":{"arena_bytes":10,"hblkhd_bytes":1e999},') +
                 snap(1, '"allocator":{"arena_bytes":10,"hblkhd_bytes":9223372036854775807},'),
    'dump.oom1': h + ('{"type":"oom","kind":"cuda","api":"cuMemAlloc_v2","requested_bytes":18446744073709551615,'
                      '"error":"CUDA_ERROR_OUT_OF_MEMORY","device":0,"elapsed_ms":5}\n'
                      '{"type":"segment","kind":"cuda","address":"0x7000000","size":4096,"stack":1,'
                      '"time_ms":10000000000000000,"device":0,"stream":0}\n'
                      '{"type":"segment","kind":"cuda","address":"0x7100000","size":4096,"stack":1,'
                      '"time_ms":4398046511104,"device":0,"stream":0}\n'
                      '{"type":"trace","kind":"cuda","op":"alloc","address":"0x7000000","size":4096,'
                      '"stack":1,"time_ms":4398046511104}\n') +
                 snap(0, '').replace('"every"', '"oom"'),
    # issue 45: what cannot be (a seq going back, a duplicate snapshot, a
    # stack defined twice), what may (a stack said again, one snapshot's
    # rows repeated), and step marks 0.05 apart (top's SIGFPE)
    'seqback': h + snap(1, '') + snap(0, ''),
    'dupsnap': h + snap(0, '') + snap(0, ''),
    'stacktwice': h + '{"type":"stack","id":1,"pcs":["0x9"]}\n' + snap(0, ''),
    'stackagain': h + '{"type":"stack","id":1,"pcs":["0x401000"]}\n' + snap(0, ''),
    'repeat': h + ''.join(snap(i, '') for i in range(50)),
    'steps': h + ''.join(snap(i, '"marks":{"step":%r},' % (i * 0.05)) for i in range(6)),
}
for name, text in cases.items():
    open('%s/memtally.%s.p1.jsonl' % (out, name) if 'oom' not in name else
         '%s/memtally.%s.jsonl' % (out, name), 'w').write(text)
PY
n=0
for f in "$F"/s*/*.jsonl "$F"/s*/*.jsonl.zst; do
	cp "$f" "$F/seeds/seed$n.$(basename "$f")"
	n=$((n + 1))
done
# fuzz_names' seeds: ordinary names, and hostile ones (a non-ASCII name,
# "<!--<script>", invalid UTF-8, a lone surrogate, ESC and CR, XML and
# JSON metacharacters), NUL between the fields
mkdir -p "$F/seeds_names"
printf 'prog\0--lr\0node1\0/bin/prog\0/lib/libx.so\0train.py\0step\0<module>\0eval\0step\0cuda\0cuMemAlloc_v2\0CUDA_ERROR_OUT_OF_MEMORY\0alloc' \
	>"$F/seeds_names/plain"
printf '\xe3\x83\x87\xe3\x83\xbc\xe3\x82\xbf\0<!--<script>\0\xff\xfe\xc0\xaf\0a\x01\xd8\x00b\0\x1b[31m\r\0"&<>\0\xed\xa0\x80\0\xf4\x90\x80\x80\0</script>\0]]>\0\x01\x00\x00\0cuda\0x"y\0z\\\\\0free' \
	>"$F/seeds_names/hostile"
echo "fuzz: $n seeds (2 for fuzz_names); ${SECS}s per target"
for t in reader writers names; do
	mkdir -p "$F/corpus_$t"
	if [ $t = names ]; then
		cp "$F"/seeds_names/* "$F/corpus_$t/"
	else
		cp "$F"/seeds/* "$F/corpus_$t/"
	fi
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"$F/fuzz_$t" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=4096 -max_len=400000 \
		-close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$F/crash_$t." \
		"$F/corpus_$t" 2>&1 | grep -E '^(stat::number_of_executed_units|stat::new_units_added|==|SUMMARY|.*ERROR)' || true
	if ls "$F"/crash_$t.* >/dev/null 2>&1; then
		echo "fuzz_$t: FAILED, inputs kept in $F/crash_$t.*"
		exit 1
	fi
done
# every file `memtally torch` accepts gives a pickle Python loads
ok=0 bad=0
for f in $(ls "$F"/corpus_writers/* | head -300); do
	if $B/memtally torch "$f" -o "$F/x.pickle" >/dev/null 2>&1; then
		if /usr/bin/python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' "$F/x.pickle" 2>/dev/null; then
			ok=$((ok + 1))
		else
			echo "fuzz: $f: memtally torch wrote a pickle Python cannot load"
			bad=$((bad + 1))
		fi
	fi
done
echo "fuzz: $ok pickles from the corpus load in Python, $bad do not"
[ "$bad" -eq 0 ]
# the files fuzz_names makes of (up to 100 of) its corpus, through the
# readers people use
mkdir -p "$F/emit"
MT_FUZZ_EMIT=$F/emit ASAN_OPTIONS=detect_leaks=0 "$F/fuzz_names" -runs=1 \
	$(ls -d "$F"/corpus_names/* | head -100) >/dev/null 2>&1
/usr/bin/python3 test/fuzz/check_outputs.py "$B/memtally" "$F/emit"
echo "fuzz: ok"
