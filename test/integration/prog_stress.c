/* prog_stress — NT threads x N mixed operations (argv[1], argv[2]); thread
 * 0 forks every F of its operations (argv[3]; the child allocates a little
 * and leaves through _exit), and a signal thread sends SIGUSR1 to the
 * process every 10 ms.  Like prog_threads it prints its own totals between
 * two requested snapshots, for the test to compare. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 128
static long nops, fork_every;
static int nt;
static pthread_barrier_t start_bar, end_bar;
static volatile int stop_signals;
static long forks;

struct ts { void *slot[SLOTS]; size_t size[SLOTS]; uint64_t allocs, bytes, frees, live, rng; int id; };
static struct ts ts[64];

static uint64_t rnd(struct ts *t) { t->rng ^= t->rng << 13; t->rng ^= t->rng >> 7; t->rng ^= t->rng << 17; return t->rng; }

static void *signaller(void *a) {
	(void)a;
	while (!stop_signals) {
		kill(getpid(), SIGUSR1);
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	return NULL;
}

static void *worker(void *arg) {
	struct ts *t = arg;
	pthread_barrier_wait(&start_bar);
	for (long i = 0; i < nops; i++) {
		if (t->id == 0 && fork_every && i % fork_every == fork_every - 1) {
			pid_t c = fork();
			if (c == 0) {
				void *p = malloc(1234);
				(void)p;
				_exit(0);
			}
			int st;
			waitpid(c, &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				abort();
			forks++;
		}
		uint64_t r = rnd(t);
		int s = (int)(r % SLOTS);
		size_t n = 1 + (r >> 20) % 1024;
		if (t->slot[s]) {
			if ((r >> 8) & 1) {
				void *q = realloc(t->slot[s], n);
				if (!q) abort();
				t->frees++, t->allocs++, t->bytes += n, t->live += n - t->size[s];
				t->slot[s] = q, t->size[s] = n;
			} else {
				free(t->slot[s]);
				t->frees++, t->live -= t->size[s], t->slot[s] = NULL;
			}
			continue;
		}
		void *p = (r >> 9) & 1 ? malloc(n) : calloc(1, n);
		if (!p) abort();
		t->allocs++, t->bytes += n, t->live += n, t->slot[s] = p, t->size[s] = n;
	}
	pthread_barrier_wait(&end_bar);
	return NULL;
}

static void on_usr1(int s) { (void)s; }

int main(int argc, char **argv) {
	nt = argc > 1 ? atoi(argv[1]) : 16;
	nops = argc > 2 ? atol(argv[2]) : 2000000;
	fork_every = argc > 3 ? atol(argv[3]) : 100000;
	signal(SIGUSR1, on_usr1); /* the program's own handler, chained */
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	pthread_t th[64], sg;
	pthread_barrier_init(&start_bar, NULL, nt + 1);
	pthread_barrier_init(&end_bar, NULL, nt + 1);
	for (int i = 0; i < nt; i++) {
		ts[i].id = i;
		ts[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		pthread_create(&th[i], NULL, worker, &ts[i]);
	}
	pthread_create(&sg, NULL, signaller, NULL);
	if (snap && snap("start"))
		return 10;
	pthread_barrier_wait(&start_bar);
	pthread_barrier_wait(&end_bar);
	if (snap && snap("end"))
		return 11;
	stop_signals = 1;
	pthread_join(sg, NULL);
	uint64_t a = 0, b = 0, f = 0, l = 0;
	for (int i = 0; i < nt; i++)
		a += ts[i].allocs, b += ts[i].bytes, f += ts[i].frees, l += ts[i].live;
	for (int i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	printf("{\"allocs\":%lu,\"alloc_bytes\":%lu,\"frees\":%lu,\"live_bytes\":%lu,\"forks\":%ld}\n",
	       (unsigned long)a, (unsigned long)b, (unsigned long)f, (unsigned long)l, forks);
	return 0;
}
