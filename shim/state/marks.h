/*
 * marks.h — step marks set through the C API (memtally_mark) and written
 * as `"marks":{...}` in every snapshot.  State layer: calls only the
 * platform.
 * Rules: never calls malloc; lock-free, any thread.
 */
#ifndef MT_MARKS_H
#define MT_MARKS_H

/* Set name (<= 31 bytes) to value; 0, or -1 when the 8 slots are taken.
 * *old gets the value it replaced (NaN for a new name); NULL: not wanted. */
int mt_mark_set(const char *name, double value, double *old);
/* The value of mark name: 0, or -1 when it was never set. */
int mt_mark_get(const char *name, double *value);
/* `"marks":{...},` for the snapshot, if any mark is set. */
struct mt_buf;
void mt_marks_json(struct mt_buf *b);

#endif
