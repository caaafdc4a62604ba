/*
 * format.h — what the file format's writer (the shim) and its reader (the
 * memtally command) must agree on, in one place: the format version and
 * the allocation kinds with their names (doc/FORMAT.md describes them).
 * Plain C, no dependencies: included by both sides.
 */
#ifndef MT_FORMAT_H
#define MT_FORMAT_H
#include <stddef.h>

/* Bump when a record's layout changes (FORMAT.md says what each has). */
#define MT_FORMAT_VERSION 3

/* The most native frames a stack holds (MEMTALLY_DEPTH's bound). */
#define MT_MAX_DEPTH 128
/* A stack's frame that stands for frames left out (MEMTALLY_INITDEPTH):
 * no return address is this low. */
#define MT_PC_ELIDED 1

/* X(ENUM_SUFFIX, "name"), in the order of the kinds' numbers. */
#define MT_KINDS(X)                                                            \
	X(HEAP, "heap")                                                        \
	X(MMAP, "mmap")                                                        \
	X(MMAP_FILE, "mmap_file")                                              \
	X(CUDA, "cuda")                                                        \
	X(CUDA_HOST, "cuda_host")                                              \
	X(CUDA_MANAGED, "cuda_managed")                                        \
	X(CUDA_VMM, "cuda_vmm")

#define MT_KIND_NAME_(e, n) n,
/* The names as an initializer: {"heap", "mmap", ...}. */
#define MT_KIND_NAMES {MT_KINDS(MT_KIND_NAME_)}

/* Every string in a file is UTF-8: the length of the well-formed UTF-8
 * character at p within avail bytes (1-4), or 0 when there is none (a
 * stray continuation byte, F5-FF, an overlong form, a surrogate, past
 * U+10FFFF, cut short).  For a NUL-terminated string avail may be
 * SIZE_MAX: a NUL fails the continuation test before anything past it is
 * read.  The shim's writer and the command's writers both use it. */
static inline size_t
mt_utf8_len(const unsigned char *p, size_t avail) {
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!len || len > avail)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || /* overlong, surrogate */
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))     /* overlong, > U+10FFFF */
		return 0;
	return len;
}

#endif
