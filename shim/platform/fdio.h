/*
 * fdio.h — writes to the shim's own file that never land in the
 * program's (issue 51).
 *
 * The output file's descriptor lives in the program's descriptor table.
 * A program may close it at any moment (closefrom, close_range, a loop
 * over /proc/self/fd) and be handed its number for a file of its own
 * (open, dup2, F_DUPFD); a check of the descriptor's identity followed by
 * a write is then a race: the write could land in the program's file.
 * Every operation on the file (write, seek to the end, truncate) goes
 * through mt_fdio, with the file's identity (device, inode) that file.c
 * registered:
 *  - where the program cannot be handed the number (it lies at or above
 *    the program's soft RLIMIT_NOFILE: open, dup2 and F_DUPFD never
 *    reach it) the check (fstat) and the operation follow each other;
 *  - otherwise (a large limit: the descriptor sits at 900, inside the
 *    program's range; a limit the shim could not raise; a limit the
 *    program raised since) the check and the operation run in a child
 *    made with clone(CLONE_VM) and no CLONE_FILES: it shares our memory
 *    (the buffers) but holds a copy of the descriptor table taken at the
 *    clone, which no thread of the program can change; what it checks is
 *    what it writes to.  It runs with every signal blocked, raises no
 *    SIGCHLD (exit signal 0: only a __WCLONE wait sees it) and is reaped
 *    at once.  A copy of the program's table held for the moment of a
 *    write can delay, by that moment, the end-of-file a reader sees when
 *    the program closes a pipe's last writer meanwhile.
 * Cost: a child per operation, about 50 us on the machine this was
 * written on with few descriptors open, growing with the number open (the
 * table is copied: about 1 ms at 10,000); a compressed snapshot makes two
 * operations (the seek is known from our own writes: known_end).
 * A check that fails (the descriptor is not our file any more) returns
 * -ESTALE and writes nothing: the caller drops that snapshot, counted,
 * and opens the file again for the next.  Never allocates;
 * async-signal-safe; one caller at a time (the writer lock's holder).
 */
#ifndef MT_FDIO_H
#define MT_FDIO_H
#include <stddef.h>
#include <stdint.h>

/* The file whose descriptor is guarded (fd -1: none). */
void mt_fdio_guard(int fd, uint64_t dev, uint64_t ino);
/* Whether fd is the guarded one. */
int mt_fdio_guarded(int fd);
enum { MT_IO_WRITE, MT_IO_SEEK_END, MT_IO_TRUNCATE };
/* One operation on the guarded file: WRITE p[0..n) whole (0 or -errno),
 * SEEK_END (the offset, or -errno), TRUNCATE to off (0 or -errno);
 * -ESTALE when fd is not the file any more. */
long mt_fdio(int fd, int op, const void *p, size_t n, long off);
/* No child: checked operations only (the check and the write are then
 * two steps).  Under valgrind, whose clone takes threads and forks alone
 * and ends the process on clone(CLONE_VM) (life.c, from the option
 * table's look at LD_PRELOAD). */
void mt_fdio_no_child(void);

#endif
