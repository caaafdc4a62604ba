/* prog_smallstack — threads with small stacks (16, 24, 32 and 48 KiB),
 * each allocating, freeing and reallocating through a few call depths
 * and creating a grandchild thread of the same stack size.  glibc takes
 * a thread's static TLS (every loaded object's initial-exec variables)
 * out of its stack, so a preloaded library with a large one makes
 * pthread_create fail with EINVAL where the program alone succeeds (node
 * starts its threads so).  Prints each thread's outcome; the test runs it
 * without and with the shim and compares. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t sizes[] = {16384, 24576, 32768, 49152};
#define NS (sizeof sizes / sizeof *sizes)

struct job {
	size_t stack;
	int nested; /* a thread of the same stack size starts one more */
	uint64_t sum;
	int err; /* the nested pthread_create's */
};

static uint64_t __attribute__((noinline))
churn(int depth, unsigned seed) {
	if (depth > 0) /* a few frames for the walker to step through */
		return churn(depth - 1, seed * 31 + 7) + 1;
	void *keep[64] = {0};
	uint64_t sum = 0;
	for (int i = 0; i < 2000; i++) {
		seed = seed * 1103515245u + 12345u;
		int k = (int)(seed >> 16) % 64;
		size_t n = 16 + (seed >> 8) % 3000;
		if (keep[k] && (seed & 1)) {
			void *q = realloc(keep[k], n);
			if (!q)
				return 0;
			keep[k] = q;
		} else {
			free(keep[k]);
			keep[k] = malloc(n);
			if (!keep[k])
				return 0;
		}
		memset(keep[k], (int)(i & 0xff), n < 64 ? n : 64);
		sum += n;
	}
	for (int k = 0; k < 64; k++)
		free(keep[k]);
	void *c = calloc(100, 10);
	sum += c ? 1000 : 0;
	free(c);
	return sum;
}

static int start(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg);

static void *
run(void *arg) {
	struct job *j = arg;
	j->sum = churn(4, (unsigned)j->stack);
	if (j->nested) {
		struct job inner = {.stack = j->stack};
		pthread_t t;
		j->err = start(&t, j->stack, run, &inner);
		if (!j->err) {
			pthread_join(t, NULL);
			j->sum += inner.sum;
		}
	}
	return NULL;
}

static int
start(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	int err = pthread_attr_setstacksize(&a, stack);
	if (!err)
		err = pthread_create(t, &a, fn, arg);
	pthread_attr_destroy(&a);
	return err;
}

static void *
forker(void *arg) {
	struct job *f = arg;
	pid_t pid = fork();
	if (pid < 0) {
		f->err = -1;
		return NULL;
	}
	if (pid == 0) {
		enum { N = 4 };
		struct job js[N];
		pthread_t ts[N];
		int bad = 0;
		for (int k = 0; k < N; k++) {
			js[k] = (struct job){.stack = 16384};
			bad |= start(&ts[k], 16384, run, &js[k]) != 0;
		}
		uint64_t mine = churn(2, 99);
		for (int k = 0; k < N && !bad; k++)
			pthread_join(ts[k], NULL);
		_exit(bad ? 3 : mine ? 0 : 4);
	}
	int st;
	waitpid(pid, &st, 0);
	f->err = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return NULL;
}

int
main(void) {
	int bad = 0;
	for (size_t i = 0; i < NS; i++) {
		struct job j = {.stack = sizes[i], .nested = 1};
		pthread_t t;
		int err = start(&t, sizes[i], run, &j);
		if (err) {
			printf("stack %zu: pthread_create: %s\n", sizes[i], strerror(err));
			bad = 1;
			continue;
		}
		pthread_join(t, NULL);
		if (j.err) {
			printf("stack %zu: nested pthread_create: %s\n", sizes[i], strerror(j.err));
			bad = 1;
		}
		printf("stack %zu: sum %llu\n", sizes[i], (unsigned long long)j.sum);
	}
	/* many short-lived threads at once, each the first user of its stack:
	 * the shim's per-thread tables of dead threads are used again */
	for (int round = 0; round < 4; round++) {
		enum { N = 16 };
		struct job js[N];
		pthread_t ts[N];
		int ok[N];
		for (int k = 0; k < N; k++) {
			js[k] = (struct job){.stack = 16384};
			ok[k] = start(&ts[k], 16384, run, &js[k]) == 0;
		}
		uint64_t sum = 0;
		int started = 0;
		for (int k = 0; k < N; k++)
			if (ok[k]) {
				pthread_join(ts[k], NULL);
				sum += js[k].sum;
				started++;
			}
		printf("round %d: %d threads, sum %llu\n", round, started, (unsigned long long)sum);
		bad |= started != N;
	}
	/* a fork from a small-stack thread: in the child, that thread goes
	 * on allocating beside new threads of its own */
	struct job f = {.stack = 32768};
	pthread_t t;
	if (start(&t, 32768, forker, &f) || pthread_join(t, NULL))
		return 1;
	printf("fork: child status %d\n", f.err);
	return bad || f.err;
}
