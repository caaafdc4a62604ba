/*
 * stacks.h — the stack table: a stack of return addresses (with the
 * Python stack it was captured under, and its kind) interned to a stack
 * id.  Each id is one call site: its figures live in arrays indexed by
 * the id (sites.h), whose chunk the table maps before it publishes an id.
 *
 *   id                   what it names
 *   0 .. MT_NKINDS-1     the unknown stack of each kind (no frame, no Python
 *                        stack, or the table full: mt_sites_dropped)
 *   MT_NKINDS ..         (frames, key, Python stack), in order of first sight
 *
 * A stack's key is its kind, and for memory on a GPU (cuda, cuda_managed,
 * cuda_vmm) the device too: key = kind | (device + 1) << 8, so one call
 * site allocating on two GPUs is two ids, each with the figures of one
 * device (its bytes at that device's peak: sites.h).
 *
 * Ids are never reused or re-keyed (a fork child keeps its parent's).
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Lookups are lock-free; inserting a new stack takes the stack lock.
 */
#ifndef MT_STACKS_H
#define MT_STACKS_H
#include "format.h"
#include "state/chunks.h"
#include <stdint.h>

#define MT_KIND_ENUM_(e, n) MT_##e,
enum mt_kind { MT_KINDS(MT_KIND_ENUM_) MT_NKINDS };
#undef MT_KIND_ENUM_
extern const char *const mt_kind_names[MT_NKINDS];

/* CUDA devices the shim keeps apart (devices.h), and the peaks it keeps:
 * one a kind, then one a device (the sum of the kinds on it). */
#define MT_MAXDEV MT_MAX_DEVICE
#define MT_PEAK_SLOTS (MT_NKINDS + MT_MAXDEV)
/* Whether memory of this kind lives on one device (pinned host memory
 * does not: its device is the one current when it was made). */
static inline int
mt_kind_on_device(int kind) {
	return kind == MT_CUDA || kind == MT_CUDA_MANAGED || kind == MT_CUDA_VMM;
}
/* The key of a stack of this kind made on device (any value where the
 * kind is on no device). */
static inline int
mt_stack_key(int kind, int device) {
	return mt_kind_on_device(kind) && device >= 0 && device < MT_MAXDEV
		       ? kind | (device + 1) << 8
		       : kind;
}
#define MT_KEY_KIND(key) ((key) & 0xff)
/* The peak a site of this key is measured against: its device's, or its
 * kind's (totals.h: mt_peak_epoch). */
static inline int
mt_peak_slot(int key) {
	return key >> 8 ? MT_NKINDS + (key >> 8) - 1 : key;
}

/* The table for at most max stacks of at most depth frames; figures: the
 * array of call-site figures whose chunk for an id is mapped before the
 * id is published (sites.c).  0 or ENOMEM. */
int mt_stacks_init(uint64_t max, int depth, struct mt_chunked *figures);
/* Id for (pcs[0..n), Python stack py, key: mt_stack_key); the kind's
 * unknown id when the table is full or there is neither a frame nor a
 * Python stack.  Takes the stack lock on a miss only.  Never allocates. */
uint32_t mt_stack_intern(const uintptr_t *pcs, int n, int key, uint32_t py);
/* The same for a stack of one frame, through a per-thread cache keyed by
 * the frame.  Never allocates. */
uint32_t mt_stack_intern1(uintptr_t pc, int key, uint32_t py);
/* The Python stack id (python.h) a stack was captured with; 0 = none. */
uint32_t mt_stack_py(uint32_t id);
/* How a stack is kept: its own innermost *nown frames (returned), then
 * the outermost *keep frames of stack *up (an earlier id; 0 and 0 when
 * it holds all its frames).  up's own up shares fewer than *keep. */
const uintptr_t *mt_stack_own(uint32_t id, int *nown, uint32_t *up, int *keep);
uint32_t mt_stack_count(void); /* ids in use, the unknown ones included */
int mt_stack_kind(uint32_t id);
/* The device a stack's memory is on, or -1 (a kind on no device, or an
 * unknown id). */
int mt_stack_device(uint32_t id);
/* The peak slot of a stack id (mt_peak_slot of its key). */
int mt_stack_peak_slot(uint32_t id);
/* The id a file shows: 0 for the unknown ids. */
static inline uint32_t
mt_stack_public(uint32_t id) {
	return id < MT_NKINDS ? 0 : id;
}
extern uint64_t mt_sites_dropped; /* allocations charged to id 0: table full */

/* fork: the stack lock around it; the child keeps every stack (fresh: its
 * figures start again, and so does the dropped count). */
void mt_stacks_prefork(void);
void mt_stacks_postfork_parent(void);
void mt_stacks_postfork_child(int fresh);
/* Bytes the table holds: headers, frames, index. */
uint64_t mt_stacks_memory(void);

#endif
