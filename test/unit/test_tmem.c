/* test_tmem — each thread's tables (platform/tmem.h): a claim gives a
 * zeroed block of the pool's size; a live thread's block is never given
 * to another; the block of a thread that ended is taken again, zeroed;
 * a fork child's one thread keeps its block while the child's new
 * threads claim theirs, and a block of a thread that is not in the
 * child is free there. */
#include "../test.h"
#include "platform/tmem.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE 20000 /* over four pages: the zeroing of later pages too */
static struct mt_tpool pool = MT_TPOOL(SIZE);

static int
zeroed(const unsigned char *p) {
	for (size_t i = 0; i < SIZE; i++)
		if (p[i])
			return 0;
	return 1;
}

struct got {
	unsigned char *p;
	int was_zero;
};

static void *
claim_and_dirty(void *arg) {
	struct got *g = arg;
	g->p = mt_tmem_claim(&pool);
	g->was_zero = g->p && zeroed(g->p);
	if (g->p)
		memset(g->p, 0xab, SIZE);
	return NULL;
}

static pthread_barrier_t bar;
static void *
claim_and_wait(void *arg) {
	claim_and_dirty(arg);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	return NULL;
}

static struct got
in_thread(void *(*fn)(void *)) {
	struct got g = {0};
	pthread_t t;
	pthread_create(&t, NULL, fn, &g);
	pthread_join(t, NULL);
	return g;
}

TEST(claim_fresh) {
	struct got g = in_thread(claim_and_dirty);
	EXPECT(g.p != NULL);
	EXPECT(g.was_zero);
	EXPECT(((uintptr_t)g.p & 63) == 0);
	EXPECT(mt_tmem_bytes() >= SIZE);
}

TEST(ended_thread_block_again_zeroed) {
	struct got a = in_thread(claim_and_dirty); /* joined: it has ended */
	EXPECT(a.p != NULL);
	/* one thread at a time: every block but the last thread's is free
	 * (its tid may outlive pthread_join by a little), so no new mapping */
	uint64_t before = mt_tmem_bytes();
	for (int i = 0; i < 20; i++) {
		struct got c = in_thread(claim_and_dirty);
		EXPECT(c.p != NULL && c.was_zero);
	}
	EXPECT(mt_tmem_bytes() == before);
}

TEST(live_thread_block_kept) {
	pthread_barrier_init(&bar, NULL, 2);
	struct got a = {0};
	pthread_t t;
	pthread_create(&t, NULL, claim_and_wait, &a);
	pthread_barrier_wait(&bar); /* a holds its block and lives */
	for (int i = 0; i < 20; i++) {
		struct got b = in_thread(claim_and_dirty);
		EXPECT(b.p != NULL && b.p != a.p && b.was_zero);
	}
	EXPECT(a.p[0] == 0xab && a.p[SIZE - 1] == 0xab); /* untouched */
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&bar);
}

static unsigned char *forker_block;
static void *
forker(void *arg) {
	(void)arg;
	forker_block = mt_tmem_claim(&pool);
	memset(forker_block, 0xcd, SIZE);
	pid_t pid = fork();
	if (pid == 0) {
		mt_tmem_postfork_child(); /* life.c's pthread_atfork child handler */
		int bad = 0;
		for (int i = 0; i < 20; i++) {
			struct got g = in_thread(claim_and_dirty);
			bad |= !g.p || g.p == forker_block || !g.was_zero;
		}
		bad |= forker_block[0] != 0xcd || forker_block[SIZE - 1] != 0xcd;
		_exit(bad);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	return (void *)(intptr_t)(WIFEXITED(st) ? WEXITSTATUS(st) : 99);
}

TEST(fork_child_keeps_its_block) {
	pthread_t t;
	void *rc;
	pthread_create(&t, NULL, forker, NULL);
	pthread_join(t, &rc);
	EXPECT(rc == NULL);
}

int
main(void) {
	RUN(claim_fresh);
	RUN(ended_thread_block_again_zeroed);
	RUN(live_thread_block_kept);
	RUN(fork_child_keeps_its_block);
	return TEST_DONE();
}
