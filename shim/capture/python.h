/*
 * python.h — Python frames for every tracked allocation of a CPython
 * process (3.10 - 3.13), read from the allocating thread's own frame chain.
 *
 * Rules (as every shim header): never calls malloc; may run inside malloc,
 * in any thread, before main, in a forked child.  The capture path calls
 * exactly two CPython functions, both leaf readers that neither allocate
 * nor need the GIL: PyGILState_GetThisThreadState (pthread_getspecific)
 * and _Py_IsFinalizing (one load; 3.13 reads the flag through the debug
 * offsets instead).  Everything else is plain loads from the thread's own
 * frames and the code objects they pin.
 */
#ifndef MT_PYTHON_H
#define MT_PYTHON_H
#include <stdint.h>

/* Find the interpreter (constructor, or the writer thread for a libpython
 * dlopen'ed later).  Calls dlsym and Py_GetVersion (3.10 only): run with
 * the re-entry guard held, never from a hook.  Idempotent. */
void mt_py_init(void);
/* 1 while a libpython loaded later could still turn frames on (the
 * writer thread looks for one every second). */
int mt_py_waiting(void);
/* While waiting: whether objects were loaded since the last look (a
 * libpython dlopen'ed by an embedder may be among them).  Takes the
 * loader's lock for one dl_iterate_phdr step; never allocates. */
int mt_py_loaded_since(void);
/* 1 once frames are being recorded in this process. */
extern int mt_py_on;
/* The Python stack of the calling thread: an id >= 1, or 0 when the thread
 * has no Python frame (no thread state, finalizing, table full).  Takes
 * the Python lock on a thread-cache miss only.  Never allocates. */
uint32_t mt_py_capture(void);
/* Where a native stack captured with a Python stack ends: the frames
 * outside the interpreter's innermost eval loop are what the Python stack
 * already explains (and differ by every return address inside the
 * interpreter: a PyTorch process made 700 k distinct stacks of 19 k
 * Python stacks), so the stack ends at that eval frame (kept: the views
 * put the Python frames in its place).  1 and the eval loop's text
 * (return addresses lo < pc <= hi) for mt_unwind to stop or cut at; 0
 * when every frame is kept (MEMTALLY_PYNATIVE=1, no interpreter). */
int mt_py_cut_range(uintptr_t *lo, uintptr_t *hi);
/* Whether the interpreter is finalizing or has finalized (CPython keeps
 * the flag set after Py_FinalizeEx).  One load; async-signal-safe.  0
 * without frames. */
int mt_py_finalizing(void);
/* Before the exit snapshot: in a finalized Python 3.10, take the GIL's
 * mutex for good, so its daemon threads cannot wake into the interpreter
 * state Py_FinalizeEx freed (pyfind.c). */
void mt_py_exit_hold(void);

struct mt_buf;
/* Write the python record (once per file) and the pyframe and pystack
 * records pystack id needs that the snapshot file lacks, and remember them
 * as written.  Writer lock held. */
void mt_py_emit(struct mt_buf *b, uint32_t id);
/* Every python, pyframe and pystack record (OOM dumps).  Lock-free. */
void mt_py_emit_all(struct mt_buf *b);
/* Forget what the snapshot file holds (new file, failed write, fork child). */
void mt_py_forget_written(void);
/* Counts for the snapshot's shim record: pystacks, pyframes, code objects
 * retired, captures dropped (tables full), bytes mapped. */
void mt_py_stats(uint64_t *stacks, uint64_t *frames, uint64_t *retired,
		 uint64_t *dropped, uint64_t *bytes);
/* fork: the child keeps every table (its frames are the parent's). */
void mt_py_prefork(void);
void mt_py_postfork_parent(void);
void mt_py_postfork_child(int follow);

#endif
