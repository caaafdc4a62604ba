/*
 * zout.h — zstd compression of the output file (MEMTALLY_COMPRESS=1):
 * one frame per snapshot, through a static context in memory mapped when
 * the first file is made (mt_zout_init).  Rules: never calls malloc; writer lock held (one caller at a
 * time); returns 0 or an errno.
 */
#ifndef MT_ZOUT_H
#define MT_ZOUT_H
#include <stddef.h>
#include <stdint.h>

int mt_zout_init(void);
/* Unmap the context (no frame in progress); mt_zout_init maps it again. */
void mt_zout_free(void);
/* Compress n bytes of src into the current frame (begun if none) and
 * write what zstd hands back to fd. */
int mt_zout_write(int fd, const void *src, size_t n);
/* End the current frame, writing its rest to fd. */
int mt_zout_end(int fd);
/* Forget a frame in progress (its bytes were cut off the file, or a fork
 * child starts its own file). */
void mt_zout_reset(void);
/* n bytes of src as a zstd skippable frame of memtally's magic
 * (MT_ZSTD_SUMMARY_MAGIC: a snapshot's summary), written to fd whole or
 * not at all as far as write(2) allows; outside any frame.  The frame
 * holds src compressed as a zstd frame of its own. */
int mt_zout_skippable(int fd, const void *src, size_t n);
uint64_t mt_zout_memory(void);

#endif
