/*
 * pyint.h — what the Python frame capture's three files share; internal to
 * them (python.h is the interface the rest of the shim uses).
 *
 *   pyfind.c     finding the interpreter: its version, layout (pylayout.h),
 *                type objects and the functions the capture calls, in mt_pyi
 *   python.c     the capture: the walk of the thread's own frames, and the
 *                tables below that intern code objects, frames and stacks
 *   pyrecords.c  the python, pyframe and pystack records of those tables
 *
 * The tables (chunks.h arrays, ids from 1; written by python.c under its
 * py_lock, element first, then the count with a release store):
 *
 *   table          index            element          fields
 *   mt_pyt.code    code serial      struct pycode    file, name, first line
 *   mt_pyt.frame   pyframe id       struct pyframe   serial, line, written
 *   mt_pyt.stack   pystack id       struct pystack   pyframe ids, entry bits
 *
 * A code object's serial is given at first sight and dropped when it dies
 * (a new object at its address gets a new one); frames are (serial, line)
 * and stacks their frames with entry bits, so ids are never re-keyed.  An
 * id below mt_load(&mt_pyt.nframes) (nstacks) is readable without the lock;
 * only pyrecords.c writes the `written` flags (writer lock held).
 *
 * mt_pyi is written by pyfind.c before python.c sets mt_py_on (release)
 * and read only after (acquire, or a thread that saw mt_py_on).
 *
 * Both are declared hidden (MT_HIDDEN) so the capture reads them
 * PC-relative, as it read them when they were one file's statics.
 *
 * Rules: as python.h; nothing here allocates.
 */
#ifndef MT_PYINT_H
#define MT_PYINT_H
#include "capture/pylayout.h"
#include "capture/pylines.h"
#include "platform/glue.h"
#include "state/chunks.h"
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#define MAXD 64 /* MEMTALLY_PYDEPTH's ceiling */
/* The frames a walk reads at most (a deeper chain: its outermost are
 * those within this many of the innermost). */
#define MT_PY_MAXWALK 100000

/* ---- the interpreter (pyfind.c) ---- */
struct mt_pyinterp {
	struct layout L;
	unsigned long hex;                 /* PY_VERSION_HEX */
	uintptr_t code_type, str_type, bytes_type;
	void *(*get_tstate)(void);         /* PyGILState_GetThisThreadState */
	int (*is_finalizing)(void);        /* _Py_IsFinalizing (3.10 - 3.12) */
	pthread_mutex_t *gil_mutex;        /* 3.10: _PyRuntime.ceval.gil.mutex */
	void (*real_code_dealloc)(void *); /* PyCode_Type's own tp_dealloc */
	/* _PyEval_EvalFrameDefault's code: where a native stack enters the
	 * eval loop (0, 0 when its size is not known: stacks are kept whole). */
	uintptr_t eval_lo, eval_hi;
};
extern MT_HIDDEN struct mt_pyinterp mt_pyi;
/* Find the interpreter (mt_py_init's work): 1 when it is found now, and
 * then PyCode_Type's tp_dealloc is code_dealloc (which must end by calling
 * mt_pyi.real_code_dealloc); 0 when not (yet), or found before. */
int mt_py_find(void (*code_dealloc)(void *));
/* A compact str object (a code object's file or qualified name) as UTF-8
 * into out, at most max bytes (whole characters; a lone surrogate as
 * U+FFFD); 0 when s is not one.  Plain loads only. */
size_t mt_py_str_utf8(uintptr_t s, char *out, size_t max);

/* ---- the tables (python.c) ---- */
struct pycode {
	const char *file, *name; /* in the string arena */
	int32_t first;           /* co_firstlineno */
	struct mt_py_lpos pos;   /* where its line table was last read */
};
struct pyframe {
	uint32_t code; /* serial */
	int32_t line;
	uint8_t written;
};
struct pystack {
	uint64_t hash;
	uint64_t entry;   /* bit i: frame i is its eval-loop activation's first */
	uint32_t *frames; /* pyframe ids, innermost first, in the id arena */
	uint8_t n, truncated, written;
	uint8_t elided_at; /* frames [0, elided_at) innermost, then elided left out */
	uint32_t elided;
};
struct mt_pytables {
	struct mt_chunked code, frame, stack;
	uint32_t ncodes, nframes, nstacks; /* next ids */
};
extern MT_HIDDEN struct mt_pytables mt_pyt;

#endif
