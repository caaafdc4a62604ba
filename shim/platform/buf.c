/*
 * buf.c — the shim's formatter and logger (mimalloc's own limited fprintf,
 * jemalloc's malloc_snprintf).  Storage for growable buffers comes from
 * raw mmap/mremap so formatting never re-enters the program's allocator.
 * Number formatting, JSON escaping and the warning cap live here; what a
 * record contains lives in output/ (snapshot.c and the files it calls).
 */
#include "platform/glue.h"
#include "platform/buf.h"
#include "platform/fdio.h"
#include <string.h>
#include <sys/mman.h>

void
mt_buf_fixed(struct mt_buf *b, char *mem, size_t cap) {
	b->p = mem;
	b->len = 0;
	b->cap = cap;
	b->growable = 0;
	b->overflow = 0;
	b->flush_fd = 0;
	b->flush_err = 0;
	b->sink = NULL;
}

void
mt_buf_stream(struct mt_buf *b, char *mem, size_t cap, int fd) {
	mt_buf_fixed(b, mem, cap);
	b->flush_fd = fd;
}

int
mt_buf_flush(struct mt_buf *b) {
	if (b->flush_fd > 0 && b->len) {
		int err = b->sink ? b->sink(b->flush_fd, b->p, b->len)
				  : mt_write_all(b->flush_fd, b->p, b->len);
		if (err && !b->flush_err)
			b->flush_err = err;
		b->len = 0;
	}
	return b->flush_err;
}

int
mt_buf_init(struct mt_buf *b, size_t cap) {
	cap = (cap + 4095) & ~(size_t)4095;
	b->p = mt_sys_mmap(cap);
	b->len = 0;
	b->cap = b->p ? cap : 0;
	b->growable = 1;
	b->overflow = b->p == NULL;
	b->flush_fd = 0;
	b->flush_err = 0;
	b->sink = NULL;
	return b->p ? 0 : ENOMEM;
}

void
mt_buf_free(struct mt_buf *b) {
	if (b->growable && b->p)
		mt_sys_munmap(b->p, b->cap);
	b->p = NULL;
	b->len = b->cap = 0;
}

int
mt_buf_reserve(struct mt_buf *b, size_t n) {
	if (b->len + n <= b->cap)
		return 0;
	if (b->flush_fd > 0) {
		mt_buf_flush(b);
		if (n <= b->cap)
			return 0;
	}
	if (!b->growable || !b->p) {
		b->overflow = 1;
		return ENOMEM;
	}
	size_t ncap = b->cap * 2;
	while (ncap < b->len + n)
		ncap *= 2;
	long r = mt_sys(SYS_mremap, b->p, b->cap, ncap, MREMAP_MAYMOVE, 0, 0);
	if (r < 0 && r > -4096) {
		b->overflow = 1;
		return ENOMEM;
	}
	b->p = (char *)r;
	b->cap = ncap;
	return 0;
}

void
mt_buf_put(struct mt_buf *b, const void *s, size_t n) {
	if (MT_UNLIKELY(b->cap - b->len < n) && mt_buf_reserve(b, n))
		n = b->cap - b->len; /* fixed buffer: keep what fits */
	char *d = b->p + b->len;
	b->len += n;
	if (n > 16) {
		memcpy(d, s, n);
		return;
	}
	/* most pieces are a few bytes (a key, a number): a call to memcpy
	 * cost more than the copy (a tenth of a snapshot's instructions) */
	const char *c = s;
	for (size_t i = 0; i < n; i++)
		d[i] = c[i];
}

void
mt_buf_puts(struct mt_buf *b, const char *s) {
	mt_buf_put(b, s, strlen(s));
}


/* Digits by a constant base, so the compiler divides by multiplying (a
 * variable base cost a 64-bit division a digit: put_unsigned was 4% of
 * `import torch`'s samples, writing 700 k stack records). */
static void
put_unsigned(struct mt_buf *b, uint64_t v, unsigned base, int prefix) {
	char tmp[24];
	int i = sizeof tmp;
	if (base == 16) {
		do {
			tmp[--i] = "0123456789abcdef"[v & 15];
			v >>= 4;
		} while (v);
	} else {
		/* two digits a division (the divisions are multiplies, but
		 * each waits for the last), from the pairs table */
		static const char pairs[201] = "00010203040506070809"
					       "10111213141516171819"
					       "20212223242526272829"
					       "30313233343536373839"
					       "40414243444546474849"
					       "50515253545556575859"
					       "60616263646566676869"
					       "70717273747576777879"
					       "80818283848586878889"
					       "90919293949596979899";
		while (v >= 100) {
			unsigned r = (unsigned)(v % 100);
			v /= 100;
			tmp[--i] = pairs[2 * r + 1];
			tmp[--i] = pairs[2 * r];
		}
		if (v >= 10) {
			tmp[--i] = pairs[2 * v + 1];
			tmp[--i] = pairs[2 * v];
		} else {
			tmp[--i] = (char)('0' + v);
		}
	}
	if (prefix) {
		tmp[--i] = 'x';
		tmp[--i] = '0';
	}
	size_t n = sizeof tmp - (size_t)i;
	if (MT_UNLIKELY(b->cap - b->len < n)) {
		mt_buf_put(b, tmp + i, n);
		return;
	}
	char *d = b->p + b->len; /* a few bytes: no call to memcpy */
	b->len += n;
	for (size_t k = 0; k < n; k++)
		d[k] = tmp[i + (int)k];
}

void
mt_buf_u64(struct mt_buf *b, uint64_t v) {
	put_unsigned(b, v, 10, 0);
}

void
mt_buf_i64(struct mt_buf *b, int64_t v) {
	if (v < 0) {
		mt_buf_putc(b, '-');
		put_unsigned(b, (uint64_t)0 - (uint64_t)v, 10, 0);
	} else {
		put_unsigned(b, (uint64_t)v, 10, 0);
	}
}

void
mt_buf_hex(struct mt_buf *b, uint64_t v) {
	int nd = (64 - __builtin_clzll(v | 1) + 3) / 4; /* digits */
	if (MT_UNLIKELY(b->cap - b->len < (size_t)nd + 2)) {
		put_unsigned(b, v, 16, 1); /* grows, flushes or cuts */
		return;
	}
	/* in place, last digit first: every frame of every stack record is
	 * one of these (put through a scratch array and a copy, they were a
	 * fifth of a snapshot's instructions) */
	static const char hex2[513] =
		"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
		"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
		"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
		"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
		"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
		"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
		"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
		"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
	char *d = b->p + b->len;
	b->len += (size_t)nd + 2;
	d[0] = '0';
	d[1] = 'x';
	int i = nd + 1; /* two digits a byte of v, the odd one last */
	for (; i >= 3; i -= 2, v >>= 8) {
		d[i] = hex2[2 * (v & 255) + 1];
		d[i - 1] = hex2[2 * (v & 255)];
	}
	if (i == 2)
		d[2] = "0123456789abcdef"[v & 15];
}

void
mt_buf_double(struct mt_buf *b, double v, int decimals) {
	if (v != v || v > 1e18 || v < -1e18) { /* JSON has no NaN or inf */
		mt_buf_puts(b, "null");
		return;
	}
	if (v < 0) {
		mt_buf_putc(b, '-');
		v = -v;
	}
	uint64_t scale = 1;
	for (int i = 0; i < decimals; i++)
		scale *= 10;
	uint64_t whole = (uint64_t)v;
	uint64_t frac = (uint64_t)((v - (double)whole) * (double)scale + 0.5);
	if (frac >= scale) {
		whole++;
		frac -= scale;
	}
	put_unsigned(b, whole, 10, 0);
	if (decimals) {
		char tmp[20];
		mt_buf_putc(b, '.');
		for (int i = decimals - 1; i >= 0; i--) {
			tmp[i] = '0' + frac % 10;
			frac /= 10;
		}
		mt_buf_put(b, tmp, decimals);
	}
}

void
mt_buf_jstrn(struct mt_buf *b, const char *s, size_t n) {
	mt_buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			mt_buf_putc(b, '\\');
			mt_buf_putc(b, (char)c);
		} else if (c < 0x20 || c == 0x7f) {
			mt_buf_puts(b, "\\u00");
			mt_buf_putc(b, "0123456789abcdef"[c >> 4]);
			mt_buf_putc(b, "0123456789abcdef"[c & 15]);
		} else if (c >= 0x80) {
			/* Paths and argv need not be UTF-8: well-formed
			 * sequences pass, anything else (a stray byte, F5-FF,
			 * an overlong form, a surrogate, a sequence cut short)
			 * becomes U+FFFD, so every strict reader takes the line. */
			size_t len = mt_utf8_len((const unsigned char *)s + i, n - i);
			if (len) {
				mt_buf_put(b, s + i, len);
				i += len - 1;
			} else {
				mt_buf_puts(b, "\\ufffd");
			}
		} else {
			mt_buf_putc(b, (char)c);
		}
	}
	mt_buf_putc(b, '"');
}

void
mt_buf_jstr(struct mt_buf *b, const char *s) {
	mt_buf_jstrn(b, s ? s : "", s ? strlen(s) : 0);
}

void
mt_buf_vprintf(struct mt_buf *b, const char *f, va_list ap) {
	for (; *f; f++) {
		if (*f != '%') { /* the literal run up to the next % at once */
			const char *e = f;
			while (e[1] && e[1] != '%')
				e++;
			mt_buf_put(b, f, (size_t)(e - f + 1));
			f = e;
			continue;
		}
		f++;
		int lng = 0, sz = 0;
		while (*f == 'l') {
			lng++;
			f++;
		}
		if (*f == 'z') {
			sz = 1;
			f++;
		}
		switch (*f) {
		case 's': mt_buf_puts(b, va_arg(ap, const char *)); break;
		case 'c': mt_buf_putc(b, (char)va_arg(ap, int)); break;
		case 'd':
			mt_buf_i64(b, lng ? va_arg(ap, long) : va_arg(ap, int));
			break;
		case 'u':
			mt_buf_u64(b, (lng || sz) ? va_arg(ap, unsigned long)
						  : va_arg(ap, unsigned));
			break;
		case 'x':
			put_unsigned(b, (lng || sz) ? va_arg(ap, unsigned long)
						    : va_arg(ap, unsigned), 16, 0);
			break;
		case 'p': mt_buf_hex(b, (uintptr_t)va_arg(ap, void *)); break;
		case '%': mt_buf_putc(b, '%'); break;
		case '\0': return;
		default: mt_buf_putc(b, '?'); break;
		}
	}
}

void
mt_buf_printf(struct mt_buf *b, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mt_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

int
mt_write_all(int fd, const void *s, size_t n) {
	if (mt_fdio_guarded(fd)) /* the shim's file: checked (fdio.h) */
		return (int)-mt_fdio(fd, MT_IO_WRITE, s, n, 0);
	const char *p = s;
	while (n) {
		long r = mt_sys(SYS_write, fd, p, n, 0, 0, 0);
		if (r == -EINTR)
			continue;
		if (r < 0)
			return (int)-r;
		if (r == 0)
			return EIO;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void
vlog(const char *prefix, const char *fmt, va_list ap) {
	char mem[512];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem - 1);
	mt_buf_puts(&b, prefix);
	mt_buf_vprintf(&b, fmt, ap);
	mem[b.len++] = '\n';
	mt_write_all(2, mem, b.len);
}

/* The kept warnings: a slot is claimed by an atomic add, filled, then
 * published (ready, release); readers take only ready slots. */
static struct {
	char msg[256];
	int ready;
} warn_slot[MT_WARN_SLOTS];
static unsigned warn_n;    /* slots claimed */
static int warn_printed;   /* the one stderr line of this process */
static int warn_quiet;     /* MEMTALLY_QUIET: none */

void
mt_warn_set_quiet(int quiet) {
	warn_quiet = quiet;
}

void
mt_warn(const char *fmt, ...) {
	char mem[256];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem - 1);
	va_list ap;
	va_start(ap, fmt);
	mt_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	b.len = mt_utf8_cut(mem, b.len);
	mem[b.len] = 0;
	int seen = 0;
	unsigned n = __atomic_load_n(&warn_n, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n && i < MT_WARN_SLOTS && !seen; i++)
		seen = __atomic_load_n(&warn_slot[i].ready, __ATOMIC_ACQUIRE) &&
		       !strcmp(warn_slot[i].msg, mem);
	if (!seen) {
		unsigned i = __atomic_fetch_add(&warn_n, 1, __ATOMIC_ACQ_REL);
		if (i < MT_WARN_SLOTS) {
			memcpy(warn_slot[i].msg, mem, b.len + 1);
			__atomic_store_n(&warn_slot[i].ready, 1, __ATOMIC_RELEASE);
		}
	}
	if (warn_quiet || __atomic_exchange_n(&warn_printed, 1, __ATOMIC_ACQ_REL))
		return;
	char line[300];
	mt_buf_fixed(&b, line, sizeof line - 1);
	mt_buf_printf(&b, "memtally: warning: %s", mem);
	line[b.len++] = '\n';
	mt_write_all(2, line, b.len);
}

unsigned
mt_warn_count(void) {
	unsigned n = __atomic_load_n(&warn_n, __ATOMIC_ACQUIRE);
	return n < MT_WARN_SLOTS ? n : MT_WARN_SLOTS;
}

const char *
mt_warn_get(unsigned i) {
	if (i >= MT_WARN_SLOTS || !__atomic_load_n(&warn_slot[i].ready, __ATOMIC_ACQUIRE))
		return NULL;
	return warn_slot[i].msg;
}

void
mt_say(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vlog("memtally: ", fmt, ap);
	va_end(ap);
}

size_t
mt_utf8_cut(const char *s, size_t n) {
	/* back over a character the cut would split: at most 3 bytes */
	size_t i = n;
	while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i > 0 && (unsigned char)s[i - 1] >= 0xc0 &&
	    mt_utf8_len((const unsigned char *)s + i - 1, n - (i - 1)) != n - (i - 1))
		return i - 1;
	return n;
}
