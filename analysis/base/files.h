/* files.h — writing the command's output files whole. */
#ifndef MTA_FILES_H
#define MTA_FILES_H
#include <stddef.h>

/* write(2) all of data, retrying short writes and EINTR: 0 or an errno. */
int write_all(int fd, const void *data, size_t len);
/* Write len bytes to path whole: into a new file beside it, then renamed
 * over it, so a reader never sees half a file and a link at path is
 * replaced, not followed.  Dies (exit 2) naming path on an error. */
void write_output(const char *path, const void *data, size_t len);

#endif
