/* pickle.h — a protocol-2 pickle writer with only the opcodes PyTorch's own
 * C++ pickler uses (PROTO, EMPTY_DICT/EMPTY_LIST + MARK + SETITEMS/APPENDS,
 * BINUNICODE, BININT1/BININT2/BININT/LONG1, NONE, NEWTRUE/NEWFALSE,
 * TUPLE2, BINPUT/LONG_BINPUT + BINGET/LONG_BINGET, STOP), every list and
 * dict written in batches of at most 1000 items (PyTorch's web viewer
 * pushes a batch's items as function arguments and overflows its stack on
 * larger ones).
 *
 * The memo: a string is written once and fetched from the memo after
 * (each key of a trace entry, each file name), and a caller may store any
 * value it wrote (pk_put) and write it again by reference (pk_get): one
 * object the reader shares, as PyTorch's own pickler shares a frame list
 * among the blocks and trace entries of one traceback.  Python's pickle,
 * _memory_viz and the web viewer read the memo opcodes. */
#ifndef MTA_PICKLE_H
#define MTA_PICKLE_H
#include "base/util.h"
#include <stdint.h>

struct pk {
	struct sb out;
	int depth;
	int count[64]; /* items in the open batch, per open container */
	char kind[64]; /* 'l' list, 'd' dict */
	struct keyix strs; /* string -> its memo index + 1 */
	uint32_t nmemo;    /* memo indexes used */
};

void pk_begin(struct pk *p);          /* PROTO 2 */
void pk_end(struct pk *p);            /* STOP */
void pk_list(struct pk *p);           /* open a list; items follow */
void pk_dict(struct pk *p);           /* open a dict; key, value, ... follow */
void pk_close(struct pk *p);          /* close the innermost */
void pk_str(struct pk *p, const char *s);
void pk_int(struct pk *p, int64_t v);
void pk_uint(struct pk *p, uint64_t v); /* addresses: LONG1 above INT64_MAX */
void pk_none(struct pk *p);
void pk_bool(struct pk *p, int v);
void pk_pair(struct pk *p, int64_t a, int64_t b); /* a 2-tuple of ints */
/* Store the value just written (a container after its pk_close) in the
 * memo; returns its index for pk_get. */
uint32_t pk_put(struct pk *p);
/* The value stored under ix, as the next item (the same object). */
void pk_get(struct pk *p, uint32_t ix);
/* The output and the memo's index. */
void pk_free(struct pk *p);

#endif
