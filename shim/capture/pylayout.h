/*
 * pylayout.h — where CPython keeps what the capture reads, per version
 * (x86-64 release builds).  Included through pyint.h (pyfind.c fills the
 * layout, python.c reads by it) and by test/unit/pyoffsets.c, which
 * compiles against each installed interpreter's own headers and checks
 * every number here with offsetof.
 */
#ifndef MT_PYLAYOUT_H
#define MT_PYLAYOUT_H
#include <stdint.h>

/* What differs between versions, as capabilities: python.c branches on
 * these, never on the minor version, so a new version is a row. */
enum py_entry {         /* which frames start an activation of the eval loop */
	PY_ENTRY_EVERY,     /* 3.10: every frame (a C call per Python call) */
	PY_ENTRY_FLAG,      /* 3.11: the frame's is_entry byte (fr_entry) */
	PY_ENTRY_CSTACK,    /* 3.12+: a frame owned by the C stack (owner 3) sits
			     * below each activation's first frame */
};
enum py_lines {         /* the code object's line table */
	PY_LINES_PEP626,    /* 3.10: co_linetable pairs (byte delta, line delta) */
	PY_LINES_LOCATIONS, /* 3.11+: the location table (Objects/locations.md) */
};
enum py_instr {         /* where a frame's current instruction is */
	PY_INSTR_LASTI,     /* 3.10: int f_lasti, in code units */
	PY_INSTR_POINTER,   /* 3.11+: a pointer into co_code_adaptive */
};

struct layout {
	int minor;
	enum py_entry entry;
	enum py_lines lines;
	enum py_instr instr;
	int skip_non_code; /* a frame without a code object: 1 skip it (3.13's
			    * executable may be None), 0 stop the walk */
	long ts_frame;    /* tstate -> first frame (3.11/3.12: -> _PyCFrame) */
	long cf_current;  /* _PyCFrame -> current frame; -1: none (3.10, 3.13) */
	long fr_code, fr_prev;
	long fr_instr;    /* int lasti (3.10) or the instruction pointer */
	long fr_owner;    /* char; -1 (3.10) */
	long fr_entry;    /* bool is_entry (3.11); -1 */
	long co_file, co_name, co_lines, co_first, co_code;
	long str_state, str_len, str_ascii, str_compact;
	long bytes_size, bytes_data, ob_type;
	uintptr_t finalizing; /* 3.13: address of _PyRuntime._finalizing */
	long rt_gil_mutex; /* _PyRuntime.ceval.gil.mutex, held while the exit
			    * snapshot is written (3.10 only, pyfind.c
			    * mt_py_exit_hold); -1: not done */
	const char *how;
};

/* x86-64 release builds, offsetof against the headers of 3.10.13, 3.11.7
 * (and Debian's 3.11.2) and 3.12.1. */
static const struct layout mt_py_tables[] = {
	{.minor = 10, .entry = PY_ENTRY_EVERY, .lines = PY_LINES_PEP626,
	 .instr = PY_INSTR_LASTI, .ts_frame = 24, .cf_current = -1, .fr_code = 32,
	 .fr_prev = 24, .fr_instr = 96, .fr_owner = -1, .fr_entry = -1,
	 .co_file = 104, .co_name = 112, .co_lines = 120, .co_first = 40,
	 .co_code = 0, .str_state = 32, .str_len = 16, .str_ascii = 48,
	 .str_compact = 72, .bytes_size = 16, .bytes_data = 32, .ob_type = 8,
	 .rt_gil_mutex = 432},
	{.minor = 11, .entry = PY_ENTRY_FLAG, .lines = PY_LINES_LOCATIONS,
	 .instr = PY_INSTR_POINTER, .ts_frame = 56, .cf_current = 8, .fr_code = 32,
	 .fr_prev = 48, .fr_instr = 56, .fr_owner = 69, .fr_entry = 68,
	 .co_file = 112, .co_name = 128, .co_lines = 136, .co_first = 72,
	 .co_code = 184, .str_state = 32, .str_len = 16, .str_ascii = 48,
	 .str_compact = 72, .bytes_size = 16, .bytes_data = 32, .ob_type = 8,
	 .rt_gil_mutex = -1},
	{.minor = 12, .entry = PY_ENTRY_CSTACK, .lines = PY_LINES_LOCATIONS,
	 .instr = PY_INSTR_POINTER, .ts_frame = 56, .cf_current = 0, .fr_code = 0,
	 .fr_prev = 8, .fr_instr = 56, .fr_owner = 70, .fr_entry = -1,
	 .co_file = 112, .co_name = 128, .co_lines = 136, .co_first = 68,
	 .co_code = 192, .str_state = 32, .str_len = 16, .str_ascii = 40,
	 .str_compact = 56, .bytes_size = 16, .bytes_data = 32, .ob_type = 8,
	 .rt_gil_mutex = -1},
};

/* _Py_DebugOffsets as 3.13 defines it (Include/internal/pycore_runtime.h
 * at v3.13.0); only its own minor version may be read this way. */
struct dbg313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
	struct { uint64_t f[13]; } interpreter_state;
	struct { uint64_t size, prev, next, interp, current_frame, thread_id,
		 native_thread_id, datastack_chunk, status; } thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus,
		 owner; } interpreter_frame;
	struct { uint64_t size, filename, name, qualname, linetable,
		 firstlineno, argcount, localsplusnames, localspluskinds,
		 co_code_adaptive; } code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
	struct { uint64_t size, collecting; } gc;
};

#endif
