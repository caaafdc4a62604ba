/* source.c — a file's bytes as JSONL (source.h): plain, or zstd frames
 * decoded as a stream.  Where the compressed data is corrupt the source
 * stops and records the frame and byte, so the reader keeps what came
 * before; a file that ends inside a frame gives what that frame held. */
#include "read/source.h"
#include "base/util.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd_errors.h>

#define SRC_IN (1u << 20)

static uint32_t
rd_le32(const unsigned char *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

/* The file's kind from its first four bytes: 1 when known, 0 when too few
 * bytes are there yet (with wait), -1 on a read error.  Fewer than four
 * bytes that do not begin zstd's magic are plain already (a first line
 * of three bytes, "{}\n", waited for a fourth for ever: top --once spun). */
static int
src_kind(struct src *s, int wait) {
	unsigned char m[4];
	ssize_t r = pread(s->fd, m, sizeof m, 0);
	if (r < 0)
		return -1;
	if (r < 4 && wait && !memcmp(m, zstd_magic, (size_t)r))
		return 0;
	s->mode = r == 4 && !memcmp(m, zstd_magic, 4) ? 2 : 1;
	if (s->mode == 2) {
		s->z = ZSTD_createDStream();
		s->in = xmalloc(SRC_IN);
		if (!s->z)
			die(EXIT_BAD_INPUT, "%s: no memory for zstd", s->path);
	}
	return 1;
}

/* zstd: decode into dst until something comes out, the file has no more
 * bytes now, or the data is corrupt (s->damage). */
static ssize_t
src_unzstd(struct src *s, char *dst, size_t cap) {
	for (;;) {
		ZSTD_inBuffer in = {s->in, s->len, s->pos};
		ZSTD_outBuffer out = {dst, cap, 0};
		if (in.pos < in.size || s->in_frame) {
			size_t rc = ZSTD_decompressStream(s->z, &out, &in);
			uint64_t at = s->raw - (s->len - in.pos); /* file offset of in.pos */
			s->pos = in.pos;
			if (ZSTD_isError(rc)) {
				snprintf(s->damage, sizeof s->damage,
					 "corrupt zstd data in the frame that begins at byte %llu (%s)",
					 (unsigned long long)s->frame_at, ZSTD_getErrorName(rc));
				return 0;
			}
			s->in_frame = rc != 0;
			if (rc == 0) /* a frame ended: the next begins here */
				s->frame_at = at;
		}
		if (out.pos)
			return (ssize_t)out.pos;
		if (s->pos < s->len)
			continue;
		ssize_t r = read(s->fd, s->in, SRC_IN);
		if (r <= 0)
			return r;
		s->raw += (uint64_t)r;
		s->len = (size_t)r;
		s->pos = 0;
	}
}

int
summary_cut(uint32_t magic, const unsigned char *p, size_t have, uint64_t left) {
	if (magic != MT_ZSTD_SUMMARY_MAGIC || left > have)
		return 0;
	size_t r = ZSTD_findFrameCompressedSize(p, have);
	return ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_srcSize_wrong;
}

/* The file ended inside a frame: a zstd frame is a write cut short (the
 * caller's truncated file), and so is a summary whose frame is cut (a
 * process killed inside its write); but a skippable frame whose length
 * runs past the end otherwise (a whole summary and more bytes, or not a
 * summary: the shim writes no other) is a damaged length, and the stream
 * decoder skipped everything after it: said, with the frame's byte. */
static void
src_skippable_past_end(struct src *s) {
	enum { LOOK = 8 + MT_SUMMARY_FRAME_MAX };
	unsigned char *h = xmalloc(LOOK);
	ssize_t got = pread(s->fd, h, LOOK, (off_t)s->frame_at);
	uint32_t m = got >= 8 ? rd_le32(h) : 0, n = got >= 8 ? rd_le32(h + 4) : 0;
	int cut = got < 8 || (m & 0xFFFFFFF0u) != 0x184D2A50u /* ZSTD_MAGIC_SKIPPABLE_START */ ||
		  summary_cut(m, h + 8, (size_t)got - 8, s->raw - s->frame_at - 8);
	free(h);
	if (cut) /* a frame header cut short, a zstd frame cut, a summary cut */
		return;
	snprintf(s->damage, sizeof s->damage,
		 "the skippable frame that begins at byte %llu says it holds %lu bytes, past the "
		 "end of the file (byte %llu): a damaged length",
		 (unsigned long long)s->frame_at, (unsigned long)n, (unsigned long long)s->raw);
}

ssize_t
src_read(struct src *s, char *dst, size_t cap, int wait) {
	if (s->damage[0])
		return 0;
	if (!s->mode) {
		int k = src_kind(s, wait);
		if (k <= 0)
			return k;
	}
	if (s->mode == 2) {
		ssize_t r = src_unzstd(s, dst, cap);
		if (!r && !wait && s->in_frame && !s->damage[0])
			src_skippable_past_end(s);
		return r;
	}
	ssize_t r = read(s->fd, dst, cap);
	if (r > 0)
		s->raw += (uint64_t)r;
	return r;
}

int
src_cut(const struct src *s) {
	return s->mode == 2 && s->in_frame;
}

void
src_close(struct src *s) {
	close(s->fd);
	ZSTD_freeDStream(s->z);
	free(s->in);
	s->z = NULL;
	s->in = NULL;
	s->fd = -1;
}

const char *
file_kind(mode_t m) {
	return S_ISREG(m)    ? "a regular file"
	       : S_ISDIR(m)  ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
			     : "not a file";
}

/* O_NONBLOCK: open(2) of a FIFO with no writer blocks for ever, and a
 * device's open may wait or act; fstat then refuses all but a regular
 * file before a byte is read.  On a regular file O_NONBLOCK changes
 * nothing (reads never wait), so it stays set. */
int
open_regular(const char *path, struct stat *st, char *why, size_t n) {
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, st)) {
		snprintf(why, n, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(why, n, "%s: %s, not a regular file: memtally reads only regular files", path,
			 file_kind(st->st_mode));
		close(fd);
		return -1;
	}
	return fd;
}

int
open_input(const char *path, struct stat *st) {
	char why[PATH_MAX + 128];
	int fd = open_regular(path, st, why, sizeof why);
	if (fd < 0)
		die(EXIT_BAD_INPUT, "%s", why);
	return fd;
}
