# memtally — one non-recursive Makefile (musl's rule: this is how simple
# every makefile should be).  Local overrides go in config.mak.
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
CFLAGS ?= -O2 -g
WARN := -std=c11 -Wall -Wextra
STRICT := -Werror -Wmissing-prototypes -Wstrict-prototypes -Wshadow
B := build
NPROC := $(shell nproc 2>/dev/null || echo 1)
-include config.mak

# shim/: life.c on top of the layers platform/ < state/ < capture/ < output/ <
# entry/ (scripts/layers.py checks them); format.h and memtally.h, the shared
# and public headers, at the top.  Includes name their folder (-Ishim).
SHIM_SRC := $(sort $(wildcard shim/*.c shim/*/*.c))
SHIM_HDR := $(wildcard shim/*.h shim/*/*.h)
SHIM_OBJ := $(SHIM_SRC:shim/%.c=$(B)/shim/%.o)
# The shim: PIC, hidden by default (only the interposed names are exported),
# initial-exec TLS, frame pointers kept (MEMTALLY_UNWIND=fp walks them),
# and no builtin knowledge of the allocator functions it defines.
SHIM_CFLAGS := $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden \
	-ftls-model=initial-exec -fno-omit-frame-pointer \
	-fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc \
	-fno-builtin-free -D_GNU_SOURCE -pthread -Ishim
SHIM_LIBS := -lunwind -lzstd -ldl -pthread # no libm: glue.c mt_log, mt_expm1

AN_SRC := $(sort $(wildcard analysis/*.c analysis/*/*.c analysis/*/*/*.c))
AN_HDR := $(wildcard analysis/*.h analysis/*/*.h analysis/*/*/*.h)
AN_OBJ := $(AN_SRC:analysis/%.c=$(B)/analysis/%.o)
AN_CFLAGS := $(WARN) $(CFLAGS) -Ianalysis -I. -D_GNU_SOURCE -pthread -fstack-protector-strong -D_FORTIFY_SOURCE=2
AN_LIBS := -ldw -lelf -lm -lstdc++ -lprotobuf-c -lz -lzstd -pthread

.PHONY: all test check bench demo install clean deps format soak bundle proto wheel
all: $(B)/libmemtally.so $(B)/memtally $(B)/memtally-config $(B)/demo_trainer

$(B)/shim/%.o: shim/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(SHIM_CFLAGS) -c -o $@ $<

$(B)/libmemtally.so: $(SHIM_OBJ)
	$(CC) -shared -o $@ $^ $(SHIM_LIBS) -Wl,-z,now -Wl,--no-undefined

# Prints the option table (README generation, tests).
$(B)/memtally-config: scripts/memtally-config.c $(B)/shim/platform/config.o $(B)/shim/platform/buf.o $(B)/shim/platform/glue.o $(B)/shim/platform/fdio.o
	$(CC) $(WARN) $(CFLAGS) -Ishim -o $@ $^

$(B)/demo_trainer: scripts/demo_trainer.c
	$(CC) -O1 -g -fno-omit-frame-pointer -o $@ $< -ldl

$(B)/analysis/%.o: analysis/%.c $(AN_HDR) shim/format.h
	@mkdir -p $(@D)
	$(CC) $(AN_CFLAGS) -c -o $@ $<

# the page's CSS and script are embedded with .incbin
$(B)/analysis/export/html_page.o: analysis/export/page/report.css analysis/export/page/report.js

# pprof's encoding: generated from analysis/export/proto/profile.proto by protoc-c
# (protobuf-c-compiler) and kept in the tree; `make proto` makes it again.
proto:
	cd analysis/export/proto && protoc-c --c_out=. profile.proto

# `memtally run` checks options against the shim's own table: config.c
# and what it needs, linked in (one table, no copy).
SHIM_CONFIG_OBJ := $(B)/shim/platform/config.o $(B)/shim/platform/buf.o $(B)/shim/platform/glue.o $(B)/shim/platform/fdio.o
SHIM_CONFIG_SRC := shim/platform/config.c shim/platform/buf.c shim/platform/glue.c shim/platform/fdio.c
$(B)/memtally: $(AN_OBJ) $(SHIM_CONFIG_OBJ)
	$(CC) -o $@ $^ $(AN_LIBS)

# setup-torch2.sh: the PyTorch 2.x venv test_frameworks runs in (outside
# the tree, built once; never fails the build).
deps:
	bash scripts/setup-deps.sh
	bash scripts/setup-torch2.sh

# The Python start-up hook and helper (doc/python.md): `memtally run` finds
# them beside itself (bundle: python/), in ../share/memtally/python
# (installed) or ../scripts/python (this tree).
# The hook's own modules are the package _memtally/ (PY_PKG_FILES).
PY_FILES := $(sort $(wildcard scripts/python/*.py))
PY_PKG_FILES := $(sort $(wildcard scripts/python/_memtally/*.py))

# bundle: the shim and the command with every shared library they load from
# outside glibc in $(B)/bundle/lib, found through an RPATH of $ORIGIN/lib
# (DT_RPATH, not RUNPATH: it also serves the libraries' own dependencies),
# so the folder alone runs on a machine without libunwind or libdw (the GPU
# machine: test/gpu/check.sh takes this folder); python/ holds the Python
# hook (bundle/memtally run puts it on PYTHONPATH; bare LD_PRELOAD runs set
# PYTHONPATH=bundle/python).
BUNDLE_RPATH := -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN/lib'
bundle: all
	rm -rf $(B)/bundle && mkdir -p $(B)/bundle/lib
	$(CC) -shared -o $(B)/bundle/libmemtally.so $(SHIM_OBJ) $(SHIM_LIBS) -Wl,-z,now -Wl,--no-undefined $(BUNDLE_RPATH)
	$(CC) -o $(B)/bundle/memtally $(AN_OBJ) $(SHIM_CONFIG_OBJ) $(AN_LIBS) $(BUNDLE_RPATH)
	bash scripts/bundle-libs.sh $(B)/bundle
	mkdir -p $(B)/bundle/python/_memtally && cp $(PY_FILES) $(B)/bundle/python/
	cp $(PY_PKG_FILES) $(B)/bundle/python/_memtally/

# wheel: dist/memtally-$(VERSION)-py3-none-manylinux_<glibc>_<arch>.whl, the
# bundle (shim, command, their libraries, the Python hook) inside a
# `memtally` Python package with the `memtally` command, `python -m
# memtally` and the pytest plugin; written by scripts/wheel/build.py with
# the standard library alone (no network).  pip install dist/memtally-*.whl
VERSION ?= 0.1.0
wheel: bundle
	rm -f dist/memtally-*.whl
	python3 scripts/wheel/build.py $(VERSION) $(B)/bundle scripts/python dist

test: deps
	$(MAKE) -j$(NPROC) all
	bash test/run.sh

# check: the stricter gate CI runs after `make test` (test/check.sh): the
# strict build and the whole suite on it, the command under ASan+UBSan,
# valgrind and libFuzzer (FUZZ_SECONDS per target, default 60), the shim's
# tables under ThreadSanitizer; ends with "N passed, N failed".
check:
	MEMTALLY_DEPS_EXTRA="clang libclang-rt-14-dev $(MEMTALLY_DEPS_EXTRA)" bash scripts/setup-deps.sh
	bash scripts/setup-torch2.sh
	bash test/check.sh

$(B)/asan/memtally: $(AN_SRC) $(AN_HDR) $(SHIM_CONFIG_SRC)
	mkdir -p $(B)/asan
	$(CC) $(WARN) -Ianalysis -I. -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -D_GNU_SOURCE -o $@ $(AN_SRC) $(AN_LIBS) -Ishim $(SHIM_CONFIG_SRC)

# soak: 100 M operations; the shim's memory must stay bounded (README).
soak: deps
	$(MAKE) tests
	bash test/soak.sh

bench: deps all
	bash test/bench/run.sh

demo: deps
	$(MAKE) all $(FAKECUDA)
	bash scripts/demo.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 755 $(B)/libmemtally.so $(DESTDIR)$(PREFIX)/lib/libmemtally.so
	install -m 755 $(B)/memtally $(DESTDIR)$(PREFIX)/bin/memtally
	install -m 644 shim/memtally.h $(DESTDIR)$(PREFIX)/include/memtally.h
	install -d $(DESTDIR)$(PREFIX)/share/memtally/python
	install -m 644 $(PY_FILES) $(DESTDIR)$(PREFIX)/share/memtally/python/
	install -d $(DESTDIR)$(PREFIX)/share/memtally/python/_memtally
	install -m 644 $(PY_PKG_FILES) $(DESTDIR)$(PREFIX)/share/memtally/python/_memtally/
	# byte-compiled for this machine's python3: the hook runs at every
	# Python start, and users cannot write __pycache__ there (doc/python.md)
	-command -v python3 >/dev/null && python3 -m compileall -q \
		-d $(PREFIX)/share/memtally/python $(DESTDIR)$(PREFIX)/share/memtally/python

clean:
	rm -rf $(B)

# ---- tests: programs run under LD_PRELOAD, unit tests of shim modules ----
TEST_PROGS := $(patsubst test/integration/%.c,$(B)/test/%,$(filter-out test/integration/prog_mpi.c,$(wildcard test/integration/prog_*.c)))
# MPI programs only where mpicc exists (setup-deps installs it).
TEST_PROGS += $(if $(shell command -v mpicc),$(B)/test/prog_mpi)
TEST_LIBS := $(patsubst test/integration/%.c,$(B)/test/%.so,$(wildcard test/integration/lib_*.c))
UNIT := $(patsubst test/unit/%.c,$(B)/test/unit_%,$(wildcard test/unit/test_*.c))
# Unit tests of the analysis command's cores: every analysis source but main.c.
UNIT += $(patsubst test/unit/%.c,$(B)/test/unit_%,$(wildcard test/unit/antest_*.c))
AN_LIB_SRC := $(filter-out analysis/main.c,$(AN_SRC))
TEST_CFLAGS := -O0 -g -fno-omit-frame-pointer -fno-inline -pthread -D_GNU_SOURCE -Wno-alloc-size-larger-than
.PHONY: tests
FAKECUDA := $(B)/test/fakecuda/libcuda.so.1 $(B)/test/cuda_prog $(B)/test/cuda_direct $(B)/test/fakecuda/libnccl.so.2
tests: all $(TEST_PROGS) $(TEST_LIBS) $(UNIT) $(FAKECUDA) $(B)/cfi-check/libmemtally.so $(B)/test/lib_cfibad.so
# A library with corrupt unwind information (test_cfi reads it).
$(B)/test/lib_cfibad.so: test/unit/lib_cfibad.c test/unit/corrupt_eh_frame.py | $(B)/test
	$(CC) -O1 -fPIC -shared -o $@ $<
	python3 test/unit/corrupt_eh_frame.py $@
# The shim with its CFI walker checked against libunwind at every capture
# (unwind.c, MT_CFI_CHECK): test_cfi_programs runs real programs under it.
# Only unwind.c and charge.c (which inlines the recall unwind.h gives it)
# differ; the other objects are the shim's own.
CHECK_OBJ := $(filter-out $(B)/shim/capture/unwind.o $(B)/shim/capture/charge.o,$(SHIM_OBJ)) \
	$(B)/cfi-check/unwind.o $(B)/cfi-check/charge.o
$(B)/cfi-check/%.o: shim/capture/%.c $(SHIM_HDR) | $(B)/cfi-check
	$(CC) $(SHIM_CFLAGS) -DMT_CFI_CHECK -c -o $@ $<
$(B)/cfi-check/libmemtally.so: $(CHECK_OBJ)
	$(CC) -shared -o $@ $^ $(SHIM_LIBS) -Wl,-z,now -Wl,--no-undefined
$(B)/cfi-check:
	mkdir -p $@
# The fake driver: -Bsymbolic, so its own name table never resolves into
# the shim (tests would pass for the wrong reason).
$(B)/test/fakecuda/libcuda.so.1: test/fakecuda/fakecuda.c
	mkdir -p $(@D)
	$(CC) -O1 -g -fPIC -shared -Wl,-Bsymbolic -Wl,-soname,libcuda.so.1 -pthread -o $@ $<
	ln -sf libcuda.so.1 $(@D)/libcuda.so
# A library that takes device memory itself, named as NCCL's (test_torch_cuda).
$(B)/test/fakecuda/libnccl.so.2: test/fakecuda/fakenccl.c
	mkdir -p $(@D)
	$(CC) -O1 -g -fPIC -shared -o $@ $< -ldl
$(B)/test/cuda_prog: test/fakecuda/cuda_prog.c | $(B)/test
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl
$(B)/test/cuda_direct: test/fakecuda/cuda_prog.c $(B)/test/fakecuda/libcuda.so.1 | $(B)/test
	$(CC) $(TEST_CFLAGS) -DDIRECT -o $@ $< -L$(B)/test/fakecuda -lcuda -ldl
$(B)/test/prog_%: test/integration/prog_%.c | $(B)/test
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl $(PROG_LDFLAGS_$*)
$(B)/test/prog_mpi: test/integration/prog_mpi.c | $(B)/test
	mpicc $(TEST_CFLAGS) -o $@ $< -ldl
$(B)/test/lib_%.so: test/integration/lib_%.c | $(B)/test
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $<
# Unit tests of the shim's tables, outside LD_PRELOAD (frame pointers kept, as
# in the shim itself: the CFI walker's reuse of its last walk keys on rbp): ASan+UBSan in
# `make test`, ThreadSanitizer in `make check`.
UNIT_SHIM := shim/state/sites.c shim/state/stacks.c shim/state/totals.c shim/state/phases.c shim/state/solo.c shim/state/ptrtab.c shim/state/ptrmem.c shim/state/maptab.c shim/platform/glue.c shim/platform/buf.c shim/platform/fdio.c shim/platform/tmem.c \
	shim/platform/config.c shim/capture/pylines.c shim/state/map64.c shim/capture/unwind.c shim/capture/cfi.c \
	shim/capture/cfitab.c shim/capture/ehframe.c
# (the sources under test compiled once, as objects every unit test links:
# each test compiled all of them again, most of the build's time)
UNIT_CFLAGS := -std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -pthread -Ishim
UNIT_SHIM_OBJ := $(UNIT_SHIM:%.c=$(B)/test/asan/%.o)
$(B)/test/asan/shim/%.o: shim/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -c -o $@ $<
UNIT_SHIM_TESTS := $(patsubst test/unit/%.c,$(B)/test/unit_%,$(wildcard test/unit/test_*.c))
UNIT_AN_TESTS := $(patsubst test/unit/%.c,$(B)/test/unit_%,$(wildcard test/unit/antest_*.c))
$(UNIT_SHIM_TESTS): $(B)/test/unit_%: test/unit/%.c $(UNIT_SHIM_OBJ) $(SHIM_HDR) | $(B)/test
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_SHIM_OBJ) -lunwind
AN_TEST_CFLAGS := -Ianalysis -I. -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE
AN_LIB_OBJ := $(AN_LIB_SRC:%.c=$(B)/test/asan/%.o)
$(B)/test/asan/analysis/%.o: analysis/%.c $(AN_HDR) shim/format.h
	@mkdir -p $(@D)
	$(CC) $(AN_TEST_CFLAGS) -c -o $@ $<
$(B)/test/an_main.o: analysis/main.c $(AN_HDR) shim/format.h | $(B)/test
	$(CC) $(AN_TEST_CFLAGS) -Dmain=memtally_cli_main -c -o $@ $<
$(UNIT_AN_TESTS): $(B)/test/unit_antest_%: test/unit/antest_%.c $(AN_LIB_OBJ) $(B)/test/an_main.o $(AN_HDR) shim/format.h $(SHIM_CONFIG_OBJ) | $(B)/test
	$(CC) $(AN_TEST_CFLAGS) -o $@ $< $(AN_LIB_OBJ) $(B)/test/an_main.o $(SHIM_CONFIG_OBJ) $(AN_LIBS)
$(B)/test/tsan_%: test/unit/%.c $(UNIT_SHIM) $(SHIM_HDR) | $(B)/test
	$(CC) -std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=thread -DMT_TSAN -D_GNU_SOURCE -pthread -Ishim -o $@ $< $(UNIT_SHIM) -lunwind
$(B)/test:
	mkdir -p $@
PROG_LDFLAGS_znow := -Wl,-z,now
PROG_LDFLAGS_phases := -Ishim
PROG_LDFLAGS_drop := -static
