/* prog_drop UID PROG ARGS... — become UID (all three ids, no groups) and
 * exec PROG with the same environment.  Built static, so a preloaded
 * library (/etc/ld.so.preload) never runs in it: test_files uses it to
 * start a setuid program as an ordinary user (AT_SECURE). */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern char **environ;

int
main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	uid_t id = (uid_t)atoi(argv[1]);
	if (setgroups(0, NULL) || setresgid(id, id, id) || setresuid(id, id, id)) {
		perror("prog_drop");
		return 3;
	}
	execve(argv[2], argv + 2, environ);
	perror("prog_drop: execve");
	return 127;
}
