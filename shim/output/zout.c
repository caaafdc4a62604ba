/*
 * zout.c — the output file compressed with zstd (MEMTALLY_COMPRESS=1).
 *
 * Rules (the writer's): never calls malloc.  The compression context is
 * a static one (ZSTD_initStaticCCtx) over memory mapped once with raw
 * mmap, sized by ZSTD_estimateCStreamSize for the level; with no worker
 * threads zstd then allocates nothing.  Called only under the writer lock
 * (one thread at a time), never from a hook.
 *
 * Each snapshot is one zstd frame: the file is a sequence of whole frames
 * (which `zstd -dc` and the readers take as one stream), a snapshot that
 * fails to write is cut back to its frame's start, and a process killed
 * mid-write leaves a last frame that decodes up to where it stopped.
 */
#include "platform/glue.h"
#include "output/zout.h"
#include <string.h>
#include "platform/buf.h"
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#define LEVEL 1
#define OUT_BYTES (256u << 10)

static ZSTD_CCtx *cctx;
static void *work;
static size_t work_bytes;
static char *obuf;
static int in_frame; /* a frame was begun and not yet ended */

int
mt_zout_init(void) {
	if (cctx)
		return 0;
	work_bytes = ZSTD_estimateCStreamSize(LEVEL);
	work = mt_sys_mmap(work_bytes);
	obuf = mt_sys_mmap(OUT_BYTES);
	if (work && obuf)
		cctx = ZSTD_initStaticCCtx(work, work_bytes);
	if (!cctx || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1))) {
		mt_zout_free();
		return ENOMEM;
	}
	return 0;
}

void
mt_zout_free(void) {
	if (work)
		mt_sys_munmap(work, work_bytes);
	if (obuf)
		mt_sys_munmap(obuf, OUT_BYTES);
	work = obuf = NULL;
	cctx = NULL;
	in_frame = 0;
}

uint64_t
mt_zout_memory(void) {
	return cctx ? work_bytes + OUT_BYTES : 0;
}

/* Compress src (end: and close the frame) and write what comes out. */
static int
pump(int fd, const void *src, size_t n, ZSTD_EndDirective end) {
	ZSTD_inBuffer in = {src, n, 0};
	int err = 0;
	for (;;) {
		ZSTD_outBuffer out = {obuf, OUT_BYTES, 0};
		size_t left = ZSTD_compressStream2(cctx, &out, &in, end);
		if (ZSTD_isError(left)) {
			ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
			in_frame = 0;
			return EIO;
		}
		if (out.pos && !err)
			err = mt_write_all(fd, obuf, out.pos);
		if (end == ZSTD_e_continue ? in.pos == in.size : left == 0)
			break;
	}
	return err;
}

int
mt_zout_write(int fd, const void *src, size_t n) {
	if (!cctx)
		return EIO;
	in_frame = 1;
	return pump(fd, src, n, ZSTD_e_continue);
}

int
mt_zout_end(int fd) {
	if (!cctx || !in_frame)
		return 0;
	in_frame = 0;
	return pump(fd, "", 0, ZSTD_e_end);
}

int
mt_zout_skippable(int fd, const void *src, size_t n) {
	/* the content: src as a zstd frame of its own (with zstd's checksum),
	 * compressed whole into obuf, idle between snapshots */
	if (!cctx || in_frame)
		return EIO;
	ZSTD_inBuffer in = {src, n, 0};
	ZSTD_outBuffer out = {obuf + 8, OUT_BYTES - 8, 0}; /* after its header */
	size_t left = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
	if (ZSTD_isError(left) || left) {
		ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
		return EIO;
	}
	uint32_t m = MT_ZSTD_SUMMARY_MAGIC, z = (uint32_t)out.pos;
	unsigned char h[8] = {(unsigned char)m, (unsigned char)(m >> 8), (unsigned char)(m >> 16),
			      (unsigned char)(m >> 24), (unsigned char)z, (unsigned char)(z >> 8),
			      (unsigned char)(z >> 16), (unsigned char)(z >> 24)};
	memcpy(obuf, h, sizeof h);
	return mt_write_all(fd, obuf, out.pos + 8); /* one write: one checked operation */
}

void
mt_zout_reset(void) {
	if (cctx)
		ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
	in_frame = 0;
}
