/* prog_peaksplit — the heap's peak when several threads record: argv[1]
 * threads each allocate argv[2] blocks of argv[3] bytes, wait for the
 * others (so every block is live at once: the work's peak is threads x
 * blocks x bytes above what was live before), then free them all; the
 * main thread requests a snapshot ("held") while they wait and another
 * ("done") after the join.  With 0 threads the main thread does the
 * same work itself, the one thread that records, whose peak the shim
 * keeps exactly: the test compares the two.  argv[4] "quiet": no "held"
 * snapshot (the peak is then the one the threads' charges made).
 * Each thread's blocks come and go in small steps, the case where a
 * thread's change of the heap's live bytes is held back from the shared
 * figure (totals.h MT_HEAP_SLACK). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int nt = 4;
static long nblocks = 2000, size = 1000;
static pthread_barrier_t held, freed;

static void *worker(void *arg) {
	(void)arg;
	void **v = malloc((size_t)nblocks * sizeof *v);
	for (long i = 0; i < nblocks; i++)
		v[i] = malloc((size_t)size);
	pthread_barrier_wait(&held); /* every block live */
	pthread_barrier_wait(&held); /* the snapshot taken */
	for (long i = 0; i < nblocks; i++)
		free(v[i]);
	free(v);
	return NULL;
}

/* "ended": argv[1] threads each keep argv[2] blocks of argv[3] bytes (a
 * thread's whole change within the 64 KiB it holds back) and end; after
 * the join a snapshot ("ended"), then one block of 1 MiB, freed: the
 * heap's peak is then what the ended threads keep plus 1 MiB, exactly,
 * if their held-back bytes reached the shared figure when they ended. */
static pid_t keeper_tid[64];
static void *keeper(void *arg) {
	keeper_tid[(long)arg] = (pid_t)syscall(SYS_gettid);
	for (long i = 0; i < nblocks; i++)
		(void)!malloc((size_t)size); /* kept: a leak */
	return NULL;
}
static void ended(void) {
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	pthread_t t[64];
	for (int i = 0; i < nt; i++)
		pthread_create(&t[i], NULL, keeper, (void *)(long)i);
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	/* a join can return while the kernel still holds the thread for a
	 * moment: wait until each is gone (as the writer tells, tgkill ESRCH) */
	for (int i = 0, tries = 0; i < nt && tries < 5000; tries++)
		if (syscall(SYS_tgkill, getpid(), keeper_tid[i], 0) == -1 && errno == ESRCH)
			i++;
		else
			usleep(1000);
	snap("ended");
	char *volatile big = malloc(1 << 20);
	free(big);
	printf("%ld\n", (long)nt * nblocks * size);
}

int main(int argc, char **argv) {
	if (argc > 1)
		nt = atoi(argv[1]);
	if (argc > 2)
		nblocks = atol(argv[2]);
	if (argc > 3)
		size = atol(argv[3]);
	int quiet = argc > 4 && argv[4][0] == 'q'; /* "quiet": no "held" snapshot */
	if (argc > 4 && argv[4][0] == 'e') { /* "ended": see ended() */
		ended();
		return 0;
	}
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	if (!snap || nt < 0 || nt > 64) {
		fprintf(stderr, "prog_peaksplit: run under the shim, 0-64 threads\n");
		return 2;
	}
	snap("before");
	if (nt == 0) { /* the same work on the main thread: no thread at all */
		void **v = malloc((size_t)nblocks * sizeof *v);
		for (long i = 0; i < nblocks; i++)
			v[i] = malloc((size_t)size);
		snap("held");
		for (long i = 0; i < nblocks; i++)
			free(v[i]);
		free(v);
		snap("done");
		printf("%ld\n", nblocks * size);
		return 0;
	}
	pthread_t t[64];
	pthread_barrier_init(&held, NULL, (unsigned)nt + 1);
	for (int i = 0; i < nt; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	pthread_barrier_wait(&held);
	if (!quiet)
		snap("held");
	pthread_barrier_wait(&held);
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	snap("done");
	printf("%ld\n", (long)nt * nblocks * size);
	return 0;
}
