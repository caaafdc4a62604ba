/* prog_threads — 8 threads x N mixed operations (malloc, calloc, realloc,
 * posix_memalign, free) with a fork mid-run.  Prints what it computed
 * itself; the test compares that with the shim's totals between the
 * "start" and "end" snapshots it requests through the C API. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NT 8
#define SLOTS 256
static long nops = 1000000;
static pthread_barrier_t start_bar, end_bar, exit_bar;
static pid_t child = -1;

struct tstate {
	void *slot[SLOTS];
	size_t size[SLOTS];
	uint64_t allocs, bytes, frees, live, rng;
	int id;
};
static struct tstate ts[NT];

static uint64_t rnd(struct tstate *t) {
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	return t->rng;
}

__attribute__((noinline)) static void child_work(void) {
	static void *keep[10];
	for (int i = 0; i < 10; i++)
		keep[i] = malloc(1000);
	exit(0);
}

static void *worker(void *arg) {
	struct tstate *t = arg;
	pthread_barrier_wait(&start_bar);
	for (long i = 0; i < nops; i++) {
		if (t->id == 0 && i == nops / 2) {
			child = fork();
			if (child == 0)
				child_work();
		}
		uint64_t r = rnd(t);
		int s = r % SLOTS;
		size_t n = 1 + (r >> 20) % 2048;
		if (t->slot[s]) {
			if ((r >> 8) & 1) {
				void *q = realloc(t->slot[s], n);
				if (!q)
					abort();
				t->frees++, t->allocs++, t->bytes += n;
				t->live += n - t->size[s];
				t->slot[s] = q, t->size[s] = n;
			} else {
				free(t->slot[s]);
				t->frees++;
				t->live -= t->size[s];
				t->slot[s] = NULL;
			}
			continue;
		}
		void *p = NULL;
		switch ((r >> 9) % 3) {
		case 0: p = malloc(n); break;
		case 1: p = calloc(1, n); break;
		case 2: if (posix_memalign(&p, 64, n)) p = NULL; break;
		}
		if (!p)
			abort();
		t->allocs++, t->bytes += n, t->live += n;
		t->slot[s] = p, t->size[s] = n;
	}
	pthread_barrier_wait(&end_bar);
	pthread_barrier_wait(&exit_bar);
	for (int s = 0; s < SLOTS; s++)
		free(t->slot[s]);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1)
		nops = atol(argv[1]);
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	pthread_t th[NT];
	pthread_barrier_init(&start_bar, NULL, NT + 1);
	pthread_barrier_init(&end_bar, NULL, NT + 1);
	pthread_barrier_init(&exit_bar, NULL, NT + 1);
	for (int i = 0; i < NT; i++) {
		ts[i].id = i;
		ts[i].rng = 0x9e3779b97f4a7c15ull * (i + 1);
		pthread_create(&th[i], NULL, worker, &ts[i]);
	}
	if (snap && snap("start"))
		return 10;
	pthread_barrier_wait(&start_bar);
	pthread_barrier_wait(&end_bar);
	if (snap && snap("end"))
		return 11;
	uint64_t a = 0, b = 0, f = 0, l = 0, c = 0;
	for (int i = 0; i < NT; i++) {
		a += ts[i].allocs, b += ts[i].bytes, f += ts[i].frees, l += ts[i].live;
		for (int s = 0; s < SLOTS; s++)
			c += ts[i].slot[s] != NULL;
	}
	printf("{\"allocs\":%lu,\"alloc_bytes\":%lu,\"frees\":%lu,\"live_bytes\":%lu,"
	       "\"live_count\":%lu,\"child\":%d}\n", (unsigned long)a, (unsigned long)b,
	       (unsigned long)f, (unsigned long)l, (unsigned long)c, (int)child);
	fflush(stdout);
	pthread_barrier_wait(&exit_bar);
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		return 12;
	return 0;
}
