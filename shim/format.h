/*
 * format.h — what the file format's writer (the shim) and its reader (the
 * memtally command) must agree on, in one place: the format version and
 * the allocation kinds with their names (shim/FORMAT.md describes them).
 * Plain C, no dependencies: included by both sides.
 */
#ifndef MT_FORMAT_H
#define MT_FORMAT_H

/* Bump when a record's layout changes (FORMAT.md says what each has). */
#define MT_FORMAT_VERSION 2

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

#endif
