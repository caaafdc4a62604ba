/* prog_deaths — a multi-threaded program that dies at a moment the test
 * chooses, while its other threads are busy in libc (test_deaths: the
 * random-death property test of issue 51).
 *   prog_deaths HOW THREADS DELAY_US [LIB]
 *     HOW      wait:   prints "ready", then waits to be killed from outside
 *              abort:  abort() in the main thread after DELAY_US
 *              dfree:  a double free that glibc finds inside free() with
 *                      the arena locked ("double free or corruption"),
 *                      after DELAY_US
 *              fault:  a store through NULL (SIGSEGV from the kernel)
 *              bound:  another thread holds the loader's lock for ever
 *                      (a dl_iterate_phdr callback that never returns),
 *                      then the main thread sends itself SIGTERM: a final
 *                      snapshot that needs that lock can never be written,
 *                      and the process must die of SIGTERM all the same
 *              exit:   exit(3) after DELAY_US (the control)
 *              dlclose: one more thread dlopens and dlcloses LIB without
 *                      pause; prints "ready TID" (that thread's id) and
 *                      waits: the test sends SIGTERM to that thread, which
 *                      is often inside dlclose, the loader's lock held and
 *                      the object's segments half unmapped
 *     THREADS  busy threads: each mallocs, reallocs and frees blocks of
 *              many sizes (some past the tcache and the mmap threshold),
 *              writes through stdio, and every 64th round dlopens and
 *              dlcloses LIB (when given)
 * Prints "ready" (flushed) once the threads run. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *lib;
static volatile int started;

static void *
busy(void *arg) {
	unsigned long seed = (unsigned long)(size_t)arg * 2654435761u + 1;
	void *mine[48] = {0};
	FILE *f = fopen("/dev/null", "w");
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	for (unsigned long n = 0;; n++) {
		seed = seed * 6364136223846793005ul + 1442695040888963407ul;
		int i = (int)(seed >> 33) % 48;
		size_t sz = (seed >> 40) % 4 == 0 ? 200000 + (seed >> 20) % 100000 : 16 + (seed >> 44) % 3000;
		if ((seed >> 60) & 1) {
			void *p = realloc(mine[i], sz);
			if (p)
				mine[i] = p;
		} else {
			free(mine[i]);
			mine[i] = malloc(sz);
		}
		if (mine[i])
			memset(mine[i], (int)n, 16);
		if (f && n % 8 == 0)
			fprintf(f, "round %lu size %zu\n", n, sz);
		if (lib && n % 64 == 0) {
			void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
			if (h)
				dlclose(h);
		}
	}
	return NULL;
}

static volatile int dl_tid;

static void *
dl_loop(void *arg) {
	(void)arg;
	dl_tid = (int)gettid();
	for (;;) {
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		if (h)
			dlclose(h);
	}
	return NULL;
}

static int hold_pipe[2];

static int
hold_loader(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)info;
	(void)size;
	(void)arg;
	char c;
	__atomic_store_n(&started, -1, __ATOMIC_SEQ_CST);
	for (;;) /* the loader's lock, held for ever */
		if (read(hold_pipe[0], &c, 1) < 0)
			sleep(1);
	return 1;
}

static void *
holder(void *arg) {
	(void)arg;
	dl_iterate_phdr(hold_loader, NULL);
	return NULL;
}

int
main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: prog_deaths HOW THREADS DELAY_US [LIB]\n");
		return 2;
	}
	const char *how = argv[1];
	int threads = atoi(argv[2]);
	long delay = atol(argv[3]);
	lib = argc > 4 ? argv[4] : NULL;
	void *keep[64];
	for (int i = 0; i < 64; i++) /* what was live when it died */
		memset(keep[i] = malloc(10000), 1, 10000);
	for (int i = 0; i < threads; i++) {
		pthread_t t;
		pthread_create(&t, NULL, busy, (void *)(size_t)(i + 1));
	}
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < threads)
		usleep(100);
	if (!strcmp(how, "dlclose") && lib) {
		pthread_t t;
		pthread_create(&t, NULL, dl_loop, NULL);
		while (!__atomic_load_n(&dl_tid, __ATOMIC_SEQ_CST))
			usleep(100);
		printf("ready %d\n", dl_tid);
		fflush(stdout);
		for (;;)
			pause();
	}
	printf("ready\n");
	fflush(stdout);
	if (!strcmp(how, "wait")) {
		for (;;)
			pause();
	}
	if (delay)
		usleep((useconds_t)delay);
	if (!strcmp(how, "abort")) {
		abort();
	} else if (!strcmp(how, "dfree")) {
		void *b[8], *p = malloc(2000), *g = malloc(2000);
		for (int i = 0; i < 8; i++)
			b[i] = malloc(2000);
		for (int i = 0; i < 7; i++) /* the tcache for this size full */
			free(b[i]);
		free(p);
		free(p); /* in _int_free, the arena locked */
		(void)g;
	} else if (!strcmp(how, "fault")) {
		int *volatile np = NULL;
		*np = 0;
	} else if (!strcmp(how, "bound")) {
		if (pipe(hold_pipe))
			return 2;
		pthread_t t;
		started = 0;
		pthread_create(&t, NULL, holder, NULL);
		while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) != -1)
			usleep(100);
		kill(getpid(), SIGTERM);
		for (;;)
			pause();
	} else if (!strcmp(how, "exit")) {
		exit(3);
	}
	fprintf(stderr, "prog_deaths: still alive after %s\n", how);
	return 1;
}
