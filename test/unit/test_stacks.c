/* test_stacks — the stack table (shim/state/stacks.h): the same stack
 * gives the same id and any difference (a frame, their order, the kind,
 * the Python stack) another; ids in order of first sight from MT_NKINDS;
 * the unknown ids; the one-frame path agrees with the general one and
 * another thread (no cache of its own yet) finds the same ids; a stack's
 * frames rebuilt from its own and its up's; the index grown past two
 * doublings; the table's two bounds (ids, frames), each counted as dropped
 * and each exact at its edge.  The table is set up once per process, so
 * every test runs in a child of its own. */
#include "../test.h"
#include "state/chunks.h"
#include "state/stacks.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct mt_chunked figures = {.elem = 8};

/* Run body in a child that sets the table up with (max, depth); the
 * child's failures are the test's. */
static void
in_child(void (*body)(void), uint64_t max, int depth) {
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		if (mt_stacks_init(max, depth, &figures))
			_exit(3);
		body();
		fflush(stdout);
		_exit(t_cur_failed ? 1 : 0);
	}
	int st = 0;
	waitpid(p, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The frames of id, innermost first, from its own and its ups'. */
static int
rebuild(uint32_t id, uintptr_t *out) {
	int nown, keep;
	uint32_t up;
	const uintptr_t *own = mt_stack_own(id, &nown, &up, &keep);
	if (!own)
		return 0;
	/* its own innermost frames, then its up's outermost keep frames */
	memcpy(out, own, (size_t)nown * sizeof *out);
	if (!up)
		return nown;
	uintptr_t upf[MT_MAX_DEPTH];
	int un = rebuild(up, upf);
	memcpy(out + nown, upf + un - keep, (size_t)keep * sizeof *out);
	return nown + keep;
}

static uint32_t
intern_n(const uintptr_t *pcs, int n) {
	return mt_stack_intern(pcs, n, MT_HEAP, 0);
}

static void
same_and_different(void) {
	uintptr_t a[] = {0x401000, 0x402000, 0x403000};
	uintptr_t b[] = {0x401000, 0x402001, 0x403000};
	uintptr_t swapped[] = {0x402000, 0x401000, 0x403000};
	EXPECT(mt_stack_count() == MT_NKINDS);
	uint32_t ia = intern_n(a, 3);
	EXPECT(ia == MT_NKINDS); /* the first id after the unknown ones */
	EXPECT(intern_n(a, 3) == ia);
	uintptr_t copy[3];
	memcpy(copy, a, sizeof a); /* equal frames, not the same array */
	EXPECT(intern_n(copy, 3) == ia);
	uint32_t ib = intern_n(b, 3), is = intern_n(swapped, 3), i2 = intern_n(a, 2);
	EXPECT(ib == ia + 1 && is == ia + 2 && i2 == ia + 3);
	uint32_t ik = mt_stack_intern(a, 3, MT_MMAP, 0);
	uint32_t ip = mt_stack_intern(a, 3, MT_HEAP, 7);
	EXPECT(ik == ia + 4 && ip == ia + 5);
	EXPECT(mt_stack_count() == ia + 6);
	EXPECT(mt_stack_kind(ik) == MT_MMAP && mt_stack_kind(ia) == MT_HEAP);
	EXPECT(mt_stack_py(ip) == 7 && mt_stack_py(ia) == 0);
	/* again, all of them, in another order */
	EXPECT(mt_stack_intern(a, 3, MT_HEAP, 7) == ip && intern_n(swapped, 3) == is &&
	       mt_stack_intern(a, 3, MT_MMAP, 0) == ik && intern_n(b, 3) == ib);
	/* no frame and no Python stack: the kind's unknown id, which a file
	 * calls 0; a Python stack alone is a stack */
	EXPECT(mt_stack_intern(a, 0, MT_MMAP, 0) == MT_MMAP);
	EXPECT(mt_stack_public(MT_MMAP) == 0 && mt_stack_public(ia) == ia);
	uint32_t py = mt_stack_intern(a, 0, MT_HEAP, 9);
	EXPECT(py == ia + 6 && mt_stack_py(py) == 9);
	EXPECT(mt_stack_py(MT_HEAP) == 0 && mt_stack_py(1u << 30) == 0);
	EXPECT(mt_sites_dropped == 0);
}

TEST(same_frames_same_id) {
	in_child(same_and_different, 4096, 32);
}

static uint32_t thread_ids[3];
static void *
other_thread(void *arg) {
	const uintptr_t *pcs = arg;
	thread_ids[0] = intern_n(pcs, 4);
	thread_ids[1] = mt_stack_intern1(pcs[0], MT_HEAP, 0);
	thread_ids[2] = intern_n(pcs + 1, 3);
	return NULL;
}

static void
one_frame_and_threads(void) {
	uintptr_t f[] = {0x500010, 0x500020, 0x500030, 0x500040};
	uint32_t one = mt_stack_intern1(f[0], MT_HEAP, 0);
	EXPECT(one >= MT_NKINDS && mt_stack_intern(f, 1, MT_HEAP, 0) == one);
	EXPECT(mt_stack_intern1(f[0], MT_HEAP, 0) == one);
	EXPECT(mt_stack_intern1(f[0], MT_MMAP, 0) != one);
	EXPECT(mt_stack_intern1(f[0], MT_HEAP, 3) != one);
	uint32_t four = intern_n(f, 4), three = intern_n(f + 1, 3);
	pthread_t t;
	pthread_create(&t, NULL, other_thread, f);
	pthread_join(t, NULL);
	EXPECT(thread_ids[0] == four && thread_ids[1] == one && thread_ids[2] == three);
}

TEST(one_frame_and_other_threads) {
	in_child(one_frame_and_threads, 4096, 32);
}

static void
shared_frames(void) {
	/* a loop's allocations: the same outer frames, a new innermost one */
	uintptr_t outer[] = {0x600100, 0x600200, 0x600300, 0x600400, 0x600500, 0x600600};
	uintptr_t pcs[8], got[MT_MAX_DEPTH];
	uint32_t ids[5];
	for (int i = 0; i < 5; i++) {
		pcs[0] = 0x700000 + (uintptr_t)i * 16;
		pcs[1] = 0x710000;
		memcpy(pcs + 2, outer, sizeof outer);
		ids[i] = intern_n(pcs, 8);
		EXPECT(rebuild(ids[i], got) == 8 && !memcmp(got, pcs, sizeof pcs));
		int nown, keep;
		uint32_t up;
		mt_stack_own(ids[i], &nown, &up, &keep);
		if (i == 0)
			EXPECT(nown == 8 && up == 0 && keep == 0);
		else /* only the new innermost frame is its own */
			EXPECT(nown == 1 && up == ids[0] && keep == 7);
	}
	/* a stack sharing fewer frames with the last: its own up chain stays
	 * short (the up holds fewer shared frames than the stack) */
	uintptr_t other[] = {0x800000, 0x600500, 0x600600};
	uint32_t io = intern_n(other, 3);
	EXPECT(rebuild(io, got) == 3 && !memcmp(got, other, sizeof other));
	/* every earlier one still rebuilds whole */
	for (int i = 0; i < 5; i++) {
		pcs[0] = 0x700000 + (uintptr_t)i * 16;
		pcs[1] = 0x710000;
		memcpy(pcs + 2, outer, sizeof outer);
		EXPECT(intern_n(pcs, 8) == ids[i]);
		EXPECT(rebuild(ids[i], got) == 8 && !memcmp(got, pcs, sizeof pcs));
	}
}

TEST(shared_outer_frames) {
	in_child(shared_frames, 4096, 32);
}

static void
growth(void) {
	/* 3000 stacks: the index of 1024 slots doubles at 768 ids and again
	 * at 1536 */
	enum { N = 3000 };
	uint32_t *ids = calloc(N, sizeof *ids);
	for (int i = 0; i < N; i++) {
		uintptr_t pcs[2] = {0x900000 + (uintptr_t)i * 8, 0x9f0000};
		ids[i] = intern_n(pcs, 2);
		EXPECT(ids[i] == MT_NKINDS + (uint32_t)i);
	}
	int wrong = 0;
	for (int i = 0; i < N; i++) {
		uintptr_t pcs[2] = {0x900000 + (uintptr_t)i * 8, 0x9f0000};
		wrong += intern_n(pcs, 2) != ids[i];
	}
	EXPECT(wrong == 0);
	EXPECT(mt_stack_count() == MT_NKINDS + N && mt_sites_dropped == 0);
	free(ids);
}

TEST(index_growth) {
	in_child(growth, 1u << 20, 8);
}

static void
id_bound(void) {
	/* max 64 ids, the unknown ones included */
	uint32_t last = 0;
	for (uint32_t i = MT_NKINDS; i < 64; i++) {
		uintptr_t pc = 0xa00000 + (uintptr_t)i * 8;
		last = intern_n(&pc, 1);
		EXPECT(last == i);
	}
	EXPECT(mt_stack_count() == 64 && mt_sites_dropped == 0);
	uintptr_t more[] = {0xb00000, 0xb00008};
	EXPECT(intern_n(&more[0], 1) == MT_HEAP); /* full: the unknown id */
	EXPECT(mt_stack_intern(&more[1], 1, MT_MMAP, 0) == MT_MMAP);
	EXPECT(mt_sites_dropped == 2 && mt_stack_count() == 64);
	/* what is in the table still is */
	uintptr_t pc = 0xa00000 + (uintptr_t)63 * 8;
	EXPECT(intern_n(&pc, 1) == last);
	EXPECT(mt_sites_dropped == 2);
}

TEST(id_bound_drops) {
	in_child(id_bound, 64, 4);
}

static void
frames_bound(void) {
	/* 64 ids of depth 4: 256 frames; stacks of 100, 100 and 56 frames
	 * (sharing none) fill it exactly, one frame more is dropped */
	uintptr_t pcs[100];
	for (int s = 0; s < 3; s++) {
		for (int i = 0; i < 100; i++)
			pcs[i] = 0xc00000 + (uintptr_t)s * 0x10000 + (uintptr_t)i * 8;
		int n = s < 2 ? 100 : 56;
		EXPECT(intern_n(pcs, n) == MT_NKINDS + (uint32_t)s);
	}
	EXPECT(mt_sites_dropped == 0);
	uintptr_t pc = 0xd00000;
	EXPECT(intern_n(&pc, 1) == MT_HEAP);
	EXPECT(mt_sites_dropped == 1 && mt_stack_count() == MT_NKINDS + 3);
}

TEST(frames_bound_drops) {
	in_child(frames_bound, 64, 4);
}

int
main(void) {
	RUN(same_frames_same_id);
	RUN(one_frame_and_other_threads);
	RUN(shared_outer_frames);
	RUN(index_growth);
	RUN(id_bound_drops);
	RUN(frames_bound_drops);
	return TEST_DONE();
}
