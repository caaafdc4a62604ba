/* symbolize.h — offline symbolization with libdw: the module comes from the
 * file's maps record, checked by build id; frames carry the demangled
 * function, file:line and inlined frames.  Results are cached per module
 * and per address. */
#ifndef MTA_SYMBOLIZE_H
#define MTA_SYMBOLIZE_H
#include "model/model.h"

enum { SYM_OK, SYM_NOSYM, SYM_GONE, SYM_MISMATCH, SYM_NOMODULE };

struct frame {
	const char *func;    /* demangled, or NULL */
	const char *file;    /* source file, or NULL */
	int line;            /* 0 when unknown */
	int inlined;         /* inlined into the next frame */
	const char *module;  /* module path */
	uint64_t offset;     /* pc - base - 1 (file virtual address) */
	int status;          /* SYM_* */
	int python;          /* 1: a Python frame; 2: the "[no Python frame]" mark */
	uint64_t pc;         /* the return address it came from (0: Python) */
	const struct module *mod; /* its module in the file, or NULL */
};

/* Frames for return address pc of file f, innermost first (an inline chain
 * gives several).  Returns the count (>= 1).  The strings live as long as
 * the process. */
int sym_frames(const struct mfile *f, uint64_t pc, struct frame *out, int max);
/* One line of text: "func (file.c:12)", "lib.so+0x1f2 [gone]", ... */
const char *sym_text(const struct frame *fr, char *buf, size_t n, int full_path);
/* Frames of no interest as a call site's name: the allocator, the shim,
 * libc, the C++ runtime's operator new, the loader. */
int sym_boring(const struct frame *fr);

#endif
