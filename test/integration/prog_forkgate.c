/* prog_forkgate — fork while other threads unwind (issue 14's CI hang):
 * short-lived threads keep capturing stacks (each new thread misses
 * libunwind's per-thread cache, so it looks up unwind tables through
 * dl_iterate_phdr and the loader's lock), while the main thread forks
 * N times; each child allocates (a capture) and leaves with _exit.  A
 * child stuck on a loader lock a parent thread held at the fork is
 * killed after 10 s and counted.  Prints "forks F hung H". */
#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

__attribute__((noinline)) static void *deep(int d) {
	void *p = d ? deep(d - 1) : malloc(32);
	__asm__ volatile("" ::: "memory");
	return p;
}

static void *churn(void *arg) {
	(void)arg;
	for (int i = 0; i < 20; i++)
		free(deep(i % 12));
	return NULL;
}

static void *spawner(void *arg) {
	(void)arg;
	while (!stop) {
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, churn, NULL);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 200, hung = 0;
	/* more loaded objects: a longer walk under the loader's lock */
	glob_t g;
	if (!glob("/usr/lib/x86_64-linux-gnu/lib*.so.[0-9]", 0, NULL, &g)) {
		for (size_t i = 0, k = 0; i < g.gl_pathc && k < 60; i++)
			k += dlopen(g.gl_pathv[i], RTLD_LAZY | RTLD_LOCAL) != NULL;
		globfree(&g);
	}
	pthread_t sp[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&sp[i], NULL, spawner, NULL);
	for (int f = 0; f < n; f++) {
		pid_t pid = fork();
		if (pid == 0) {
			free(deep(3));
			_exit(0);
		}
		int st, done = 0;
		for (int k = 0; k < 1000 && !done; k++) { /* 10 s */
			if (waitpid(pid, &st, WNOHANG) == pid)
				done = 1;
			else
				usleep(10000);
		}
		if (!done) {
			hung++;
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		}
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(sp[i], NULL);
	printf("forks %d hung %d\n", n, hung);
	return 0;
}
