/* source.h — a file's bytes as JSONL: read as they are, or decompressed
 * when the file begins with zstd's magic (MEMTALLY_COMPRESS=1 writes a
 * frame per snapshot; any concatenation of frames reads as one stream).
 * Damage is not an error here: the source stops where it is and says
 * what and where (the reader decides what that means for the file). */
#ifndef MTA_SOURCE_H
#define MTA_SOURCE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zstd.h>

struct src {
	const char *path;
	int fd;
	int mode;             /* 0: not known yet, 1: plain, 2: zstd */
	ZSTD_DStream *z;
	char *in;             /* compressed bytes read, in[pos..len) not decoded */
	size_t len, pos;
	uint64_t raw;         /* bytes read from the file */
	uint64_t frame_at;    /* zstd: where the frame being decoded began */
	int in_frame;         /* zstd: a frame begun and not ended */
	char damage[160];     /* set when the data stopped being readable */
};

/* Up to cap bytes of JSONL into dst; 0 when the file has no more now (or,
 * with wait, too few bytes yet to tell its kind, or damage: s->damage
 * says what and at which byte; without wait, a skippable frame whose
 * length runs past the end of the file is damage); -1 and errno on a
 * read error. */
ssize_t src_read(struct src *s, char *dst, size_t cap, int wait);
/* A summary's skippable frame is at most this long after its 8-byte
 * header: the shim's summary line is at most 16 KiB, and its zstd frame
 * (a compressed block, or a raw one when that is smaller) holds it. */
#define MT_SUMMARY_FRAME_MAX (32u << 10)
/* Whether a skippable frame of this magic whose length runs past the end
 * of the file is a summary cut short (a process killed inside its write:
 * the file's normal end): the have bytes after its header, the left
 * bytes to the end of the file, are the start of one zstd frame.  Else
 * the length is damaged (a whole summary and more, or not a summary). */
int summary_cut(uint32_t magic, const unsigned char *p, size_t have, uint64_t left);
/* Whether the file ended inside a zstd frame (a write cut short). */
int src_cut(const struct src *s);
void src_close(struct src *s);
/* An input file opened for reading: a regular file, or bad input named
 * (exit 1). */
struct stat;
int open_input(const char *path, struct stat *st);
/* The same without dying: -1 with why ("PATH: a FIFO, not a regular
 * file..." or the error) when path is anything but a regular file.
 * Never blocks: opened O_NONBLOCK, checked with fstat before any read. */
int open_regular(const char *path, struct stat *st, char *why, size_t n);
/* "a FIFO", "a socket", "a character device", ... for st_mode m. */
const char *file_kind(mode_t m);

#endif
