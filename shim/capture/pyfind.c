/*
 * pyfind.c — finding the interpreter: which CPython this process runs (if
 * any), where its objects keep what the capture reads, and the two
 * interpreter functions the capture calls (pyint.h, mt_pyi); and its str
 * objects read as UTF-8 (mt_py_str_utf8: code objects' names).
 *
 *  - Linked in (the executable, as Debian's python3, or a DT_NEEDED
 *    libpython) it is found by the constructor; dlopen'ed later, perhaps
 *    RTLD_LOCAL, the writer thread looks for a libpython3 by name every
 *    second while objects are being loaded.
 *  - Layouts: 3.10 - 3.12 from pylayout.h's table (offsetof against each
 *    version's headers; test_pyframes checks them against the installed
 *    headers), 3.13 from the interpreter's own _Py_DebugOffsets (cookie,
 *    version and free-threading checked).  Anything else fails closed:
 *    native stacks only, one warning.
 *  - PyCode_Type.tp_dealloc is wrapped (the capture's code_dealloc) so a
 *    dying code object's serial is dropped before its memory is reused.
 *
 * Rules: runs with the re-entry guard held, never from a hook (it calls
 * dlsym, dlopen, Py_GetVersion); never calls malloc itself.
 */
#include "platform/glue.h"
#include "capture/pyint.h"
#include "capture/python.h"
#include "capture/unwind.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "platform/dl.h"
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

struct mt_pyinterp mt_pyi;
static int tried, gave_up, found;

static inline uintptr_t
rd(uintptr_t a) {
	return *(const volatile uintptr_t *)a;
}

/* PY_VERSION_HEX from Py_Version (3.11+) or Py_GetVersion's text into
 * *hex; 0 when h has neither (not a Python process, yet). */
static int
version_hex(void *h, unsigned long *hex) {
	void *pv = mt_dlsym(h, "Py_Version");
	const char *(*getv)(void) = (const char *(*)(void))mt_dlsym(h, "Py_GetVersion");
	if (!pv && !getv)
		return 0;
	if (pv) {
		*hex = *(const unsigned long *)pv;
		return 1;
	}
	/* 3.10 and older: "3.10.13 (main, ..." */
	const char *s = getv();
	unsigned long v[3] = {0, 0, 0};
	for (int i = 0; i < 3 && *s >= '0' && *s <= '9'; i++) {
		while (*s >= '0' && *s <= '9')
			v[i] = v[i] * 10 + (unsigned long)(*s++ - '0');
		if (*s == '.')
			s++;
	}
	*hex = v[0] << 24 | v[1] << 16 | v[2] << 8;
	return 1;
}

/* 3.10 - 3.12: the table's row and _Py_IsFinalizing; 0 (warned) when
 * that is missing. */
static int
layout_table(void *h, int minor) {
	mt_pyi.L = mt_py_tables[minor - 10];
	mt_pyi.L.how = "table";
	*(void **)&mt_pyi.is_finalizing = mt_dlsym(h, "_Py_IsFinalizing");
	if (!mt_pyi.is_finalizing) {
		mt_warn("Python 3.%d: _Py_IsFinalizing not found; native stacks only", minor);
		return 0;
	}
	char *rt = mt_dlsym(h, "_PyRuntime");
	if (rt && mt_pyi.L.rt_gil_mutex >= 0)
		mt_pyi.gil_mutex = (pthread_mutex_t *)(rt + mt_pyi.L.rt_gil_mutex);
	return 1;
}

/* 3.13: the layout from the interpreter's _Py_DebugOffsets; 0 (warned)
 * when they are not there or do not check out. */
static int
layout_debug(void *h) {
	const struct dbg313 *d = mt_dlsym(h, "_PyRuntime");
	if (!d || memcmp(d->cookie, "xdebugpy", 8) || d->version != mt_pyi.hex ||
	    d->free_threaded) {
		mt_warn("Python 3.13: %s; native stacks only",
			!d ? "_PyRuntime not found"
			: d->free_threaded ? "a free-threaded build is not supported"
					   : "its debug offsets do not check out");
		return 0;
	}
	mt_pyi.L = (struct layout){
		.minor = 13, .entry = PY_ENTRY_CSTACK, .lines = PY_LINES_LOCATIONS,
		.instr = PY_INSTR_POINTER, .skip_non_code = 1,
		.cf_current = -1, .fr_entry = -1,
		.ts_frame = (long)d->thread_state.current_frame,
		.fr_code = (long)d->interpreter_frame.executable,
		.fr_prev = (long)d->interpreter_frame.previous,
		.fr_instr = (long)d->interpreter_frame.instr_ptr,
		.fr_owner = (long)d->interpreter_frame.owner,
		.co_file = (long)d->code_object.filename,
		.co_name = (long)d->code_object.qualname,
		.co_lines = (long)d->code_object.linetable,
		.co_first = (long)d->code_object.firstlineno,
		.co_code = (long)d->code_object.co_code_adaptive,
		.str_state = (long)d->unicode_object.state,
		.str_len = (long)d->unicode_object.length,
		.str_ascii = (long)d->unicode_object.asciiobject_size,
		/* + utf8_length and utf8 (PyCompactUnicodeObject) */
		.str_compact = (long)d->unicode_object.asciiobject_size + 16,
		.bytes_size = (long)d->bytes_object.ob_size,
		.bytes_data = (long)d->bytes_object.ob_sval,
		.ob_type = (long)d->pyobject.ob_type,
		.finalizing = (uintptr_t)d + d->runtime_state.finalizing,
		.rt_gil_mutex = -1,
		.how = "debug_offsets"};
	return 1;
}

/* With the layout known: its object header checked against PyType_Type,
 * PyCode_Type's tp_dealloc wrapped, the eval loop's text found.  0 when
 * the header differs (warned) or there is no tp_dealloc. */
static int
hook(void *h, int minor, uintptr_t type_type, void (*code_dealloc)(void *)) {
	/* A build whose object header differs (Py_TRACE_REFS) fails here. */
	if (rd(mt_pyi.code_type + (uintptr_t)mt_pyi.L.ob_type) != type_type) {
		mt_warn("Python 3.%d: unexpected object layout (a debug build?); "
			"native stacks only", minor);
		return 0;
	}
	void **slot = (void **)(mt_pyi.code_type + 48); /* tp_dealloc, every 3.x */
	*(void **)&mt_pyi.real_code_dealloc = *slot;
	if (!mt_pyi.real_code_dealloc)
		return 0;
	*slot = (void *)code_dealloc;
	void *ev = mt_dlsym(h, "_PyEval_EvalFrameDefault");
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	if (ev && dladdr1(ev, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
		mt_pyi.eval_lo = (uintptr_t)ev;
		mt_pyi.eval_hi = mt_pyi.eval_lo + sym->st_size;
		/* captures with a Python stack now stop there: those the CFI
		 * walker kept without the stop are not recalled (cfi.h) */
		mt_cfi_forget();
	}
	return 1;
}

/* 0: no interpreter behind h (yet); 1: decided, found or given up. */
static int
setup(void *h, void (*code_dealloc)(void *)) {
	if (!version_hex(h, &mt_pyi.hex))
		return 0; /* not a Python process (yet) */
	int major = (int)(mt_pyi.hex >> 24), minor = (int)(mt_pyi.hex >> 16 & 255);
	gave_up = 1; /* unless everything below checks out */
	mt_pyi.code_type = (uintptr_t)mt_dlsym(h, "PyCode_Type");
	mt_pyi.str_type = (uintptr_t)mt_dlsym(h, "PyUnicode_Type");
	mt_pyi.bytes_type = (uintptr_t)mt_dlsym(h, "PyBytes_Type");
	uintptr_t type_type = (uintptr_t)mt_dlsym(h, "PyType_Type");
	*(void **)&mt_pyi.get_tstate = mt_dlsym(h, "PyGILState_GetThisThreadState");
	if (major != 3 || minor < 10 || minor > 13) {
		mt_warn("Python %d.%d: Python frames are read from 3.10 to 3.13 only; "
			"native stacks only", major, minor);
		return 1;
	}
	if (!mt_pyi.code_type || !mt_pyi.str_type || !mt_pyi.bytes_type || !type_type ||
	    !mt_pyi.get_tstate) {
		mt_warn("Python %d.%d: interpreter symbols not found; native stacks only",
			major, minor);
		return 1;
	}
	if (!(minor <= 12 ? layout_table(h, minor) : layout_debug(h)))
		return 1;
	if (!hook(h, minor, type_type, code_dealloc))
		return 1;
	gave_up = 0;
	found = 1;
	return 1;
}

struct find {
	char name[512];
	unsigned long long adds; /* loader's count of objects added, last look */
	int scanning;            /* past the first object of this look */
};

static int
find_libpython(struct dl_phdr_info *info, size_t size, void *arg) {
	struct find *f = arg;
	if (!f->scanning++ &&
	    size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
		if (info->dlpi_adds == f->adds)
			return 2; /* nothing loaded since the last look */
		f->adds = info->dlpi_adds;
	}
	const char *base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	size_t n = strlen(info->dlpi_name);
	if (!strncmp(base, "libpython3", 10) && n < sizeof f->name) {
		memcpy(f->name, info->dlpi_name, n + 1);
		return 1;
	}
	return 0;
}

int
mt_py_waiting(void) {
	return mt_cfg.python && !found && !gave_up;
}

static int
first_adds(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* the count is the same in every entry: one is enough */
}

int
mt_py_loaded_since(void) {
	static unsigned long long seen;
	if (!mt_py_waiting())
		return 0;
	unsigned long long adds = 0;
	mt_loader_enter();
	dl_iterate_phdr(first_adds, &adds);
	mt_loader_leave();
	int changed = seen && adds != seen;
	seen = adds;
	return changed;
}

int
mt_py_find(void (*code_dealloc)(void *)) {
	if (!mt_cfg.python || found || gave_up)
		return 0;
	if (!tried) { /* linked in: the executable (Debian) or a DT_NEEDED */
		tried = 1;
		if (setup(RTLD_DEFAULT, code_dealloc))
			return found;
	}
	/* dlopen'ed later, perhaps RTLD_LOCAL: look for it by name (the
	 * writer thread, every second, only when objects were loaded) */
	static struct find f;
	f.scanning = 0;
	/* the loader's locks are taken below: not across a fork (unwind.h) */
	mt_loader_enter();
	if (dl_iterate_phdr(find_libpython, &f) == 1) {
		void *h = dlopen(f.name, RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			setup(h, code_dealloc);
			dlclose(h); /* NOLOAD took a reference */
		}
	}
	mt_loader_leave();
	mt_py_loaded_since(); /* what is loaded now was looked at */
	return found;
}

/* Python 3.10 frees its interpreter state at the end of Py_FinalizeEx
 * while daemon threads may still wait for the GIL; one that wakes before
 * the process is gone reads the freed state and dies of SIGSEGV in
 * take_gil (fixed in 3.11).  Without a tool the process is gone within
 * microseconds; the exit snapshot takes milliseconds, and so does any
 * library destructor: a 5 ms one alone, no memtally, crashed 7 runs of
 * py_shutdown.py in 400 under load, the shim 1 in ~300.  So once the
 * interpreter is finalizing, the exit snapshot takes the GIL's mutex and
 * keeps it until the process ends: a waiting thread cannot come back from
 * its condition wait (released at the end of our destructor, a thread
 * took it at once and crashed: the window is the whole exit).  Nothing
 * may take the GIL after finalization; an exit() from C while Python
 * still runs is not finalizing, and nothing is held.  Not covered: a
 * thread that was inside malloc or free when the state was freed reads it
 * on its way back into Python (~1 run in 350 with both cores busy; in
 * a core: take_gil locking a mutex at 0x1b0).  Bounded: after
 * ~100 ms of a mutex held elsewhere (a thread inside take_gil) it gives
 * up and writes anyway. */
void
mt_py_exit_hold(void) {
	/* gil_mutex is set only where is_finalizing was found (setup) */
	if (!found || !mt_pyi.gil_mutex || !mt_pyi.is_finalizing())
		return;
	for (int i = 0; i < 1000; i++) {
		if (pthread_mutex_trylock(mt_pyi.gil_mutex) == 0)
			return; /* never unlocked: the process is ending */
		struct timespec t = {0, 100 * 1000};
		mt_sys(SYS_nanosleep, &t, 0, 0, 0, 0, 0);
	}
}

int
mt_py_cut_range(uintptr_t *lo, uintptr_t *hi) {
	if (!mt_pyi.eval_hi || mt_cfg.pynative)
		return 0;
	*lo = mt_pyi.eval_lo;
	*hi = mt_pyi.eval_hi;
	return 1;
}

static size_t
utf8(char *d, uint32_t c) {
	if (c < 0x80) {
		d[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		d[0] = (char)(0xc0 | c >> 6);
		d[1] = (char)(0x80 | (c & 63));
		return 2;
	}
	if (c >= 0xd800 && c < 0xe000) /* a lone surrogate: not UTF-8 */
		c = 0xfffd;
	if (c < 0x10000) {
		d[0] = (char)(0xe0 | c >> 12);
		d[1] = (char)(0x80 | (c >> 6 & 63));
		d[2] = (char)(0x80 | (c & 63));
		return 3;
	}
	if (c > 0x10ffff)
		c = 0xfffd;
	d[0] = (char)(0xf0 | c >> 18);
	d[1] = (char)(0x80 | (c >> 12 & 63));
	d[2] = (char)(0x80 | (c >> 6 & 63));
	d[3] = (char)(0x80 | (c & 63));
	return 4;
}

size_t
mt_py_str_utf8(uintptr_t s, char *out, size_t max) {
	size_t n = 0;
	if (!s || rd(s + (uintptr_t)mt_pyi.L.ob_type) != mt_pyi.str_type)
		return 0;
	uint32_t state = *(const uint32_t *)(s + (uintptr_t)mt_pyi.L.str_state);
	int64_t len = *(const int64_t *)(s + (uintptr_t)mt_pyi.L.str_len);
	int kind = (int)(state >> 2 & 7), compact = state >> 5 & 1, ascii = state >> 6 & 1;
	if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4))
		return 0;
	const unsigned char *d = (const unsigned char *)s + (ascii ? mt_pyi.L.str_ascii : mt_pyi.L.str_compact);
	for (int64_t i = 0; i < len && n + 4 <= max; i++) {
		uint32_t c = kind == 1 ? d[i] : kind == 2 ? ((const uint16_t *)d)[i] : ((const uint32_t *)d)[i];
		n += utf8(out + n, c);
	}
	return n;
}
