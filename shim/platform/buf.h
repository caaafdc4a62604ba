/*
 * buf.h — byte buffers and a small printf for the shim: JSON and log lines
 * are formatted here and leave through write(2).
 * Rules: never calls malloc; may run inside malloc, before main, in a child.
 * A growable buffer takes its memory from mmap/mremap (raw syscalls); a
 * fixed buffer (stack or pre-reserved) sets `overflow` instead of growing.
 */
#ifndef MT_BUF_H
#define MT_BUF_H
#include "format.h" /* mt_utf8_len */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct mt_buf {
	char *p;      /* data */
	size_t len;   /* bytes used */
	size_t cap;   /* bytes available */
	int growable; /* 1: storage is ours, from mmap, may mremap */
	int overflow; /* a fixed buffer ran out: output truncated */
	int flush_fd; /* > 0: a streaming buffer, written to this fd when full */
	int flush_err; /* errno of a failed flush */
	/* set: flushes go through it (zout.c's compressor), else write(2) */
	int (*sink)(int fd, const void *s, size_t n);
};

/* A fixed buffer over caller storage.  Never allocates. */
void mt_buf_fixed(struct mt_buf *b, char *mem, size_t cap);
/* A fixed buffer that writes itself to fd whenever it fills (OOM dumps:
 * any amount of output through memory reserved in advance).  Lines may be
 * split across write calls; only one thread writes that fd.  mt_buf_flush
 * writes what is left.  Never allocates. */
void mt_buf_stream(struct mt_buf *b, char *mem, size_t cap, int fd);
int mt_buf_flush(struct mt_buf *b);
/* A growable buffer starting at cap bytes of fresh mmap.  Returns 0 or ENOMEM. */
int mt_buf_init(struct mt_buf *b, size_t cap);
void mt_buf_free(struct mt_buf *b);
/* Ensure room for n more bytes; 0 or ENOMEM (sets overflow).  Never allocates via malloc. */
int mt_buf_reserve(struct mt_buf *b, size_t n);
void mt_buf_put(struct mt_buf *b, const void *s, size_t n);
/* A string literal, its length known at compile time: when there is room
 * it is a few moves, not a call. */
#define mt_buf_lit(b, s)                                                       \
	do {                                                                   \
		struct mt_buf *b_ = (b);                                       \
		if (__builtin_expect(b_->cap - b_->len >= sizeof(s) - 1, 1)) { \
			__builtin_memcpy(b_->p + b_->len, "" s, sizeof(s) - 1); \
			b_->len += sizeof(s) - 1;                              \
		} else {                                                       \
			mt_buf_put(b_, s, sizeof(s) - 1);                      \
		}                                                              \
	} while (0)
void mt_buf_puts(struct mt_buf *b, const char *s);
/* One byte; inline: JSON is written a few bytes at a time. */
static inline void
mt_buf_putc(struct mt_buf *b, char c) {
	if (__builtin_expect(b->len < b->cap, 1) || !mt_buf_reserve(b, 1))
		b->p[b->len++] = c;
}
void mt_buf_u64(struct mt_buf *b, uint64_t v);
void mt_buf_i64(struct mt_buf *b, int64_t v);
void mt_buf_hex(struct mt_buf *b, uint64_t v);       /* 0x... */
void mt_buf_double(struct mt_buf *b, double v, int decimals);
void mt_buf_jstr(struct mt_buf *b, const char *s);   /* "escaped" JSON string */
void mt_buf_jstrn(struct mt_buf *b, const char *s, size_t n);
/* printf subset: %s %c %d %u %ld %lu %llu %zu %x %lx %p %%.  Never allocates. */
void mt_buf_printf(struct mt_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void mt_buf_vprintf(struct mt_buf *b, const char *fmt, va_list ap);

/* write(2) all of s, retrying on EINTR and short writes; 0 or an errno value.
 * Async-signal-safe. */
int mt_write_all(int fd, const void *s, size_t n);

/* A warning: kept (up to MT_WARN_SLOTS distinct ones a process) for the
 * output file, which carries each as a warning record (snapshot.c), and
 * "memtally: warning: ..." on stderr for the first of the process only,
 * none with MEMTALLY_QUIET=1 (`memtally run` sets it and prints each
 * distinct one at the end): the program's stderr is the program's.
 * Never allocates, takes no lock.  Async-signal-safe. */
void mt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define MT_WARN_SLOTS 16
/* MEMTALLY_QUIET (config.c sets it before the other options' warnings). */
void mt_warn_set_quiet(int quiet);
/* The warnings kept so far (a slot being filled reads as NULL). */
unsigned mt_warn_count(void);
const char *mt_warn_get(unsigned i);
/* "memtally: ..." on stderr (verbose output).  Never allocates. */
void mt_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* n, or less so that s[0..n) does not end inside a UTF-8 character (a
 * label or mark name cut to its buffer). */
size_t mt_utf8_cut(const char *s, size_t n);

#endif
