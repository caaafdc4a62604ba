/* prog_exec MODE — an image that execs before any snapshot (issue 15):
 * allocates 1 MiB in keep_config(), then
 *   ok        execl("/bin/true")           the image is replaced
 *   fail      execv("/nonexistent/x")      fails (ENOENT): says so, goes on
 *   lp        execlp("true")               through PATH
 *   le        execle("/bin/true", ..., envp)
 *   vfork     vfork() + execv("/bin/true") in the child, the parent waits
 *   fork      fork() + execv("/bin/true") in the child (a shell's way) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *kept;
__attribute__((noinline)) static void keep_config(void) {
	kept = malloc(1 << 20);
	memset(kept, 1, 1 << 20);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "ok";
	keep_config();
	char *av[] = {"true", NULL};
	char *env[] = {"X=1", NULL};
	if (!strcmp(mode, "ok"))
		execl("/bin/true", "true", (char *)NULL);
	else if (!strcmp(mode, "lp"))
		execlp("true", "true", (char *)NULL);
	else if (!strcmp(mode, "le"))
		execle("/bin/true", "true", (char *)NULL, env);
	else if (!strcmp(mode, "fail")) {
		int rc = execv("/nonexistent/x", av);
		printf("execv: %d %s\n", rc, strerror(errno));
		return 3;
	} else if (!strcmp(mode, "vfork") || !strcmp(mode, "fork")) {
		pid_t p = mode[0] == 'v' ? vfork() : fork();
		if (!p) {
			execv("/bin/true", av);
			_exit(127);
		}
		int st;
		waitpid(p, &st, 0);
		printf("child: %d\n", WEXITSTATUS(st));
		return 0;
	}
	printf("exec failed: %s\n", strerror(errno));
	return 1;
}
