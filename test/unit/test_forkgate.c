/* test_forkgate — the loader gate (unwind.h) that keeps fork from
 * happening while a thread of the shim holds the loader's lock: fork's
 * prepare waits for a thread inside to leave, a thread arriving while a
 * fork is in progress waits until it is done, and a real fork with
 * threads unwinding (libunwind: dl_iterate_phdr) leaves a child that can
 * unwind.  Ordering is asserted through flags, never through time. */
#include "../test.h"
#include "capture/unwind.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int a_inside, a_may_leave, a_left, prefork_done, b_entered;

static void *thread_a(void *arg) {
	(void)arg;
	mt_loader_enter();
	a_inside = 1;
	while (!a_may_leave)
		usleep(1000);
	a_left = 1;
	__sync_synchronize();
	mt_loader_leave();
	return NULL;
}

static void *forker(void *arg) {
	(void)arg;
	mt_loader_prefork();
	prefork_done = 1;
	return NULL;
}

static void *thread_b(void *arg) {
	(void)arg;
	mt_loader_enter();
	b_entered = 1;
	mt_loader_leave();
	return NULL;
}

TEST(prefork_waits_for_inside) {
	pthread_t a, f, b;
	pthread_create(&a, NULL, thread_a, NULL);
	while (!a_inside)
		usleep(1000);
	pthread_create(&f, NULL, forker, NULL);
	usleep(50000);
	EXPECT(!prefork_done); /* A is inside: the fork waits */
	a_may_leave = 1;
	pthread_join(f, NULL);
	EXPECT(prefork_done && a_left); /* and goes on once A has left */
	pthread_join(a, NULL);
	pthread_create(&b, NULL, thread_b, NULL);
	usleep(50000);
	EXPECT(!b_entered); /* the gate is closed until the fork is done */
	mt_loader_postfork(0);
	pthread_join(b, NULL);
	EXPECT(b_entered);
}

static volatile int stop;
static void *unwind_once(void *arg) {
	(void)arg;
	uintptr_t pcs[32];
	mt_unwind(pcs, 32, 0, 0, 0, 0); /* a new thread: libunwind's cache is cold */
	return NULL;
}
static void *unwinder(void *arg) {
	(void)arg;
	while (!stop) {
		pthread_t t;
		pthread_create(&t, NULL, unwind_once, NULL);
		pthread_join(t, NULL);
	}
	return NULL;
}

/* New threads unwinding all the time (cold caches: dl_iterate_phdr);
 * forks through the gate, as the shim's atfork handlers do; every child
 * unwinds and exits.  A smoke test of the gate with a real fork: the race
 * it closes is too narrow to hit on demand (1 child in ~2000 forks hung
 * without it, prog_stress-like load); the test above pins the order. */
TEST(fork_while_unwinding) {
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, unwinder, NULL);
	int bad = 0;
	int n = 300;
	for (int f = 0; f < n; f++) {
		mt_loader_prefork();
		pid_t pid = fork();
		mt_loader_postfork(pid == 0);
		if (pid == 0) {
			uintptr_t pcs[32];
			_exit(mt_unwind(pcs, 32, 0, 0, 0, 0) > 0 ? 0 : 1);
		}
		int st;
		waitpid(pid, &st, 0);
		bad += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	EXPECT(bad == 0);
}

int main(void) {
	mt_unwind_init(dlsym);
	RUN(prefork_waits_for_inside);
	RUN(fork_while_unwinding);
	return TEST_DONE();
}
