/* pyoffsets.c — compiled by test_pyframes against each installed CPython's
 * own headers: every offset of shim/capture/pylayout.h (3.10 - 3.12's table, 3.13's
 * copy of _Py_DebugOffsets) must equal offsetof/sizeof from the headers. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX < 0x030b0000
#include <frameobject.h>
#include "internal/pycore_runtime.h"
#else
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030d0000
#include "internal/pycore_runtime.h"
#endif
#include "capture/pylayout.h"

static int n, bad;
#define CHECK(ours, theirs) check(#ours, (long)(ours), (long)(theirs))
static void
check(const char *what, long ours, long theirs) {
	n++;
	if (ours != theirs) {
		printf("MISMATCH %s: memtally %ld, headers %ld\n", what, ours, theirs);
		bad++;
	}
}

int
main(void) {
#if PY_VERSION_HEX < 0x030d0000
	const struct layout *L = &mt_py_tables[PY_MINOR_VERSION - 10];
	CHECK(L->minor, PY_MINOR_VERSION);
#if PY_VERSION_HEX < 0x030b0000
	CHECK(L->ts_frame, offsetof(PyThreadState, frame));
	CHECK(L->fr_code, offsetof(PyFrameObject, f_code));
	CHECK(L->fr_prev, offsetof(PyFrameObject, f_back));
	CHECK(L->fr_instr, offsetof(PyFrameObject, f_lasti));
	CHECK(L->co_name, offsetof(PyCodeObject, co_name));
	CHECK(L->rt_gil_mutex, offsetof(_PyRuntimeState, ceval.gil.mutex));
#else
	CHECK(L->rt_gil_mutex, -1);
	CHECK(L->ts_frame, offsetof(PyThreadState, cframe));
	CHECK(L->cf_current, offsetof(_PyCFrame, current_frame));
	CHECK(L->fr_code, offsetof(_PyInterpreterFrame, f_code));
	CHECK(L->fr_prev, offsetof(_PyInterpreterFrame, previous));
	CHECK(L->fr_instr, offsetof(_PyInterpreterFrame, prev_instr));
	CHECK(L->fr_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030c0000
	CHECK(L->fr_entry, offsetof(_PyInterpreterFrame, is_entry));
#else
	CHECK(3, FRAME_OWNED_BY_CSTACK);
#endif
	CHECK(L->co_name, offsetof(PyCodeObject, co_qualname));
	CHECK(L->co_code, offsetof(PyCodeObject, co_code_adaptive));
#endif
	CHECK(L->co_file, offsetof(PyCodeObject, co_filename));
	CHECK(L->co_lines, offsetof(PyCodeObject, co_linetable));
	CHECK(L->co_first, offsetof(PyCodeObject, co_firstlineno));
	CHECK(L->str_state, offsetof(PyASCIIObject, state));
	CHECK(L->str_len, offsetof(PyASCIIObject, length));
	CHECK(L->str_ascii, sizeof(PyASCIIObject));
	CHECK(L->str_compact, sizeof(PyCompactUnicodeObject));
	CHECK(L->bytes_size, offsetof(PyVarObject, ob_size));
	CHECK(L->bytes_data, offsetof(PyBytesObject, ob_sval));
	CHECK(L->ob_type, offsetof(PyObject, ob_type));
#else
#define D(f) CHECK(offsetof(struct dbg313, f), offsetof(_Py_DebugOffsets, f))
	D(version);
	D(free_threaded);
	D(runtime_state.finalizing);
	D(thread_state.current_frame);
	D(interpreter_frame.previous);
	D(interpreter_frame.executable);
	D(interpreter_frame.instr_ptr);
	D(interpreter_frame.owner);
	D(code_object.filename);
	D(code_object.qualname);
	D(code_object.linetable);
	D(code_object.firstlineno);
	D(code_object.co_code_adaptive);
	D(pyobject.ob_type);
	D(bytes_object.ob_size);
	D(bytes_object.ob_sval);
	D(unicode_object.state);
	D(unicode_object.length);
	D(unicode_object.asciiobject_size);
	CHECK(sizeof(struct dbg313), sizeof(_Py_DebugOffsets));
	CHECK(sizeof(PyASCIIObject) + 16, sizeof(PyCompactUnicodeObject));
	CHECK(3, FRAME_OWNED_BY_CSTACK);
#endif
	/* the string state bits python.c decodes */
	PyASCIIObject a = {0};
	a.state.kind = 4;
	a.state.compact = 1;
	a.state.ascii = 1;
	unsigned st;
	__builtin_memcpy(&st, (char *)&a + offsetof(PyASCIIObject, state), sizeof st);
	CHECK(st >> 2 & 7, 4);
	CHECK(st >> 5 & 1, 1);
	CHECK(st >> 6 & 1, 1);
	printf("%d checked, %d mismatched\n", n, bad);
	return bad != 0;
}
