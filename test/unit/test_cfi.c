/* test_cfi — the shim's CFI walker (shim/capture/cfi.c) against libunwind on the
 * same stacks: recursion, libc calling back (qsort), alloca frames (the
 * CFA on rbp), a frame whose return address is past its function's end
 * (a call to a noreturn function), a thread's stack (ends at clone),
 * rules served from the table and worked out again after mt_cfi_forget,
 * the last walk's frames reused only where the stack still holds them
 * and only as deep as the walk goes.  The rule table starts small (64
 * KiB) and grows to its full size once half full, its rules kept.
 * A signal handler's stack holds the kernel's signal frame, which the
 * walker does not read: it must say so (-1), and mt_unwind then gives
 * libunwind's frames. */
#include "../test.h"
#include "capture/cfi.h"
#include "capture/cfitab.h"
#include <dlfcn.h>
#include "capture/unwind.h"
#include <alloca.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#define MAXF 128
struct walk {
	uintptr_t pc[MAXF];
	int n;
};
static uintptr_t stk_hi; /* the walking thread's stack top */

/* The calling thread's stack top. */
static uintptr_t
stack_top(void) {
	pthread_attr_t a;
	void *base;
	size_t size;
	pthread_getattr_np(pthread_self(), &a);
	pthread_attr_getstack(&a, &base, &size);
	pthread_attr_destroy(&a);
	return (uintptr_t)base + size;
}

/* The CFI walker's stop range (0, 0: none; stop_range_ends_the_walk). */
static uintptr_t stop_lo, stop_hi;

/* Both walkers from one frame: pc[0] is each call's own return address
 * (two call instructions), so the frames compared start at pc[1]. */
static int walk_max = MAXF; /* the CFI walker's depth (reuse_under_a_depth_limit) */
static __attribute__((noinline)) void
walk_both(struct walk *cfi, struct walk *unw) {
	cfi->n = mt_cfi_walk(cfi->pc, walk_max, stk_hi, stop_lo, stop_hi, 0);
	unw->n = unw_backtrace((void **)unw->pc, MAXF);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

static int cases, same;
static void
check_same(const struct walk *c, const struct walk *u, const char *what) {
	cases++;
	int ok = c->n > 1 && c->n == u->n &&
		 !memcmp(c->pc + 1, u->pc + 1, (size_t)(c->n - 1) * sizeof *c->pc);
	if (ok)
		same++;
	else {
		printf("  %s: cfi %d frames, libunwind %d\n", what, c->n, u->n);
		for (int i = 0; i < c->n || i < u->n; i++)
			printf("    %2d %#18lx %#18lx\n", i, i < c->n ? (unsigned long)c->pc[i] : 0ul,
			       i < u->n ? (unsigned long)u->pc[i] : 0ul);
	}
	EXPECT(ok);
}

static volatile int sink;

/* d frames of recursion, then leaf */
static __attribute__((noinline)) void
descend(int d, void (*leaf)(struct walk *, struct walk *), struct walk *c, struct walk *u) {
	if (d > 0) {
		descend(d - 1, leaf, c, u);
		sink++;
		return;
	}
	leaf(c, u);
	sink++; /* no tail call: this frame stays */
}

static void
chain(int d, struct walk *c, struct walk *u) {
	descend(d, walk_both, c, u);
}

TEST(recursion_matches_libunwind) {
	for (int d = 0; d <= 40; d += 3) {
		struct walk c, u;
		chain(d, &c, &u);
		check_same(&c, &u, "recursion");
		EXPECT(c.n >= d + 2); /* chain's frames, then main's */
	}
}

static struct walk q_c, q_u;
static int q_done;
static int
cmp(const void *a, const void *b) {
	if (!q_done++)
		walk_both(&q_c, &q_u);
	return *(const int *)a - *(const int *)b;
}

TEST(through_libc_qsort) {
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	q_done = 0;
	qsort(v, 64, sizeof *v, cmp);
	check_same(&q_c, &q_u, "qsort");
}

static __attribute__((noinline)) void
with_alloca(int n, struct walk *c, struct walk *u) {
	char *b = alloca((size_t)n);
	memset(b, 1, (size_t)n);
	sink += b[n - 1];
	walk_both(c, u);
	sink += b[0];
}

TEST(alloca_frame_cfa_on_rbp) {
	for (int n = 16; n <= 4096; n *= 4) {
		struct walk c, u;
		with_alloca(n, &c, &u);
		check_same(&c, &u, "alloca");
	}
}

/* die's call is the last instruction of ends_in_noreturn: its return
 * address is the function's end, found at the address before it. */
static jmp_buf out;
static struct walk nr_c, nr_u;
static __attribute__((noinline, noreturn)) void
die(void) {
	walk_both(&nr_c, &nr_u);
	longjmp(out, 1);
}
static __attribute__((noinline)) void
ends_in_noreturn(int x) {
	if (x)
		sink++;
	die();
}

TEST(return_address_past_function_end) {
	if (!setjmp(out))
		ends_in_noreturn(1);
	check_same(&nr_c, &nr_u, "noreturn");
}

static void *
thread_main(void *arg) {
	struct walk *w = arg;
	stk_hi = stack_top(); /* this thread's while it walks */
	chain(5, &w[0], &w[1]);
	return NULL;
}

TEST(thread_stack_ends_at_clone) {
	struct walk w[2];
	pthread_t t;
	pthread_create(&t, NULL, thread_main, w);
	pthread_join(t, NULL);
	stk_hi = stack_top();
	check_same(&w[0], &w[1], "thread");
}

TEST(cached_rules_and_forget) {
	struct walk c1, u1, c2, u2, c3, u3;
	chain(7, &c1, &u1); /* rules worked out (or already there) */
	chain(7, &c2, &u2); /* from the table */
	mt_cfi_forget();
	chain(7, &c3, &u3); /* worked out again */
	check_same(&c1, &u1, "first");
	check_same(&c2, &u2, "cached");
	check_same(&c3, &u3, "after forget");
	EXPECT(c1.n == c2.n && c2.n == c3.n);
}

/* The walker reuses the thread's last walk from the frame where they
 * meet (same sp, pc and rbp) once the stack words it read there still
 * hold the same values.  Here the walks meet inside leaf_pair, reached
 * through two callers whose frames are alike (the same sp at every
 * level) but whose return addresses differ: the second walk must see its
 * own caller, not the first one's. */
static __attribute__((noinline)) void
leaf_pair(struct walk *c, struct walk *u) {
	walk_both(c, u);
	sink++;
}
static __attribute__((noinline)) void
caller_x(struct walk *c, struct walk *u) {
	leaf_pair(c, u);
	sink++;
}
static __attribute__((noinline)) void
caller_y(struct walk *c, struct walk *u) {
	leaf_pair(c, u);
	sink += 2;
}

TEST(reuse_checks_the_outer_frames) {
	struct walk c[4], u[4];
	caller_x(&c[0], &u[0]);
	caller_x(&c[1], &u[1]); /* the same stack again: reused */
	caller_y(&c[2], &u[2]); /* the same sps, another caller */
	caller_x(&c[3], &u[3]);
	for (int i = 0; i < 4; i++)
		check_same(&c[i], &u[i], "reuse");
	EXPECT(c[0].n == c[2].n && c[0].n > 4);
	EXPECT(c[0].pc[2] != c[2].pc[2]); /* leaf_pair's return: into x, into y */
	EXPECT(c[0].pc[2] == c[3].pc[2]);
	/* deeper and shallower than the walk before, alternately */
	for (int d = 0; d < 12; d++) {
		struct walk cc, uu;
		chain(d % 2 ? 3 : 9, &cc, &uu);
		check_same(&cc, &uu, "alternating depth");
	}
}

/* Walks cut at a depth (MEMTALLY_DEPTH) reuse the last walk, itself cut
 * or whole, only as far as their own depth, and a walk past where a cut
 * one ended steps on from there: each is libunwind's first frames. */
TEST(reuse_under_a_depth_limit) {
	for (int rep = 0; rep < 24; rep++) {
		struct walk c, u;
		walk_max = rep % 3 == 2 ? MAXF : 4 + rep % 7;
		chain(rep % 4 < 2 ? 20 : 13, &c, &u);
		int want = u.n < walk_max ? u.n : walk_max;
		cases++;
		int ok = c.n == want && !memcmp(c.pc + 1, u.pc + 1, sizeof(uintptr_t) * (size_t)(want - 1));
		same += ok;
		if (!ok)
			printf("  depth %d: cfi %d frames, want %d\n", walk_max, c.n, want);
		EXPECT(ok);
	}
	walk_max = MAXF;
}

/* A stop range (the caller's eval loop under Python): the walk ends with
 * its first frame there, walked or taken from the last walk; a later walk
 * without one goes on past where that one stopped. */
TEST(stop_range_ends_the_walk) {
	struct walk full_c, full_u;
	caller_x(&full_c, &full_u); /* a whole walk first: the next ones
				     * meet it and stop inside its frames */
	check_same(&full_c, &full_u, "before a stopped walk");
	stop_lo = (uintptr_t)caller_x;
	stop_hi = stop_lo + 64; /* its call of leaf_pair is in its first bytes */
	for (int rep = 0; rep < 3; rep++) {
		struct walk c, u;
		caller_x(&c, &u);
		EXPECT(c.n == 3); /* walk_both's, leaf_pair's, caller_x's return */
		EXPECT(c.n >= 2 && c.pc[c.n - 1] > stop_lo && c.pc[c.n - 1] <= stop_hi);
		EXPECT(c.n <= u.n && !memcmp(c.pc + 1, u.pc + 1, sizeof(uintptr_t) * (size_t)(c.n - 1)));
	}
	stop_lo = stop_hi = 0;
	struct walk c, u;
	caller_x(&c, &u);
	check_same(&c, &u, "after a stopped walk");
}

/* From a frame further out (the shim's hooks pass their own): the walk
 * starts at that frame's return address, libunwind's frames past it. */
static __attribute__((noinline)) void
walk_from(struct walk *c, struct walk *u, uintptr_t fp) {
	c->n = mt_cfi_walk(c->pc, MAXF, stk_hi, stop_lo, stop_hi, fp);
	u->n = unw_backtrace((void **)u->pc, MAXF);
	__asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void
hook_like(struct walk *c, struct walk *u) {
	walk_from(c, u, (uintptr_t)__builtin_frame_address(0));
	sink++;
}

TEST(walk_from_a_frame) {
	for (int d = 0; d < 12; d += 5)
		for (int rep = 0; rep < 2; rep++) { /* the second reuses the first */
			struct walk c, u;
			descend(d, hook_like, &c, &u);
			/* libunwind: walk_from's call, hook_like's, then hook_like's caller */
			cases++;
			int ok = c.n >= d + 2 && c.n == u.n - 2 &&
				 !memcmp(c.pc, u.pc + 2, sizeof(uintptr_t) * (size_t)c.n);
			same += ok;
			EXPECT(ok);
		}
	/* a stop at the first frame: that frame alone */
	struct walk c, u;
	stop_lo = (uintptr_t)descend;
	stop_hi = stop_lo + 256;
	descend(0, hook_like, &c, &u);
	EXPECT(c.n == 1 && c.pc[0] > stop_lo && c.pc[0] <= stop_hi);
	stop_lo = stop_hi = 0;
}

/* Threads walking at once, through the shared rule table (inserts racing
 * on the same entries), while another keeps forgetting every rule (as
 * dlclose does; past two wraps of the generation the keys hold, each of
 * which clears the table under the walkers): every walk still equals
 * libunwind's. */
static volatile int forgetting;
static long forgets;
static void *
forgetter(void *arg) {
	(void)arg;
	/* past 32768 at least: the keys' generation wraps, the table is cleared */
	while (forgetting || forgets < 70000) {
		mt_cfi_forget();
		forgets++;
	}
	return NULL;
}
struct racer { uintptr_t lo, hi; int walks, bad; };
static __thread uintptr_t my_hi;
static __attribute__((noinline)) void
race_walk(int d, struct racer *r) {
	if (d > 0) {
		race_walk(d - 1, r);
		sink++;
		return;
	}
	struct walk c, u;
	c.n = mt_cfi_walk(c.pc, MAXF, my_hi, 0, 0, 0);
	u.n = unw_backtrace((void **)u.pc, MAXF);
	r->walks++;
	if (c.n < 2 || c.n != u.n || memcmp(c.pc + 1, u.pc + 1, sizeof(uintptr_t) * (size_t)(c.n - 1)))
		r->bad++;
}
static void *
racer_main(void *arg) {
	struct racer *r = arg;
	my_hi = stack_top();
	for (int i = 0; i < 3000; i++)
		race_walk(i % 17, r);
	return NULL;
}

TEST(threads_and_forgetting) {
	struct racer r[4] = {{0}};
	pthread_t t[4], f;
	forgetting = 1;
	pthread_create(&f, NULL, forgetter, NULL);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, racer_main, &r[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	forgetting = 0;
	pthread_join(f, NULL);
	EXPECT(forgets >= 70000);
	for (int i = 0; i < 4; i++) {
		EXPECT(r[i].walks == 3000);
		EXPECT(r[i].bad == 0);
		if (r[i].bad)
			printf("  thread %d: %d of %d walks differ\n", i, r[i].bad, r[i].walks);
	}
}

/* On a coroutine's stack (makecontext, the stack an mmap of its own):
 * the outermost return address is glibc's __start_context's first byte,
 * which no FDE covers (the walker looks up the byte before a return
 * address), so the CFI walker hands these stacks on (-1) and mt_unwind
 * gives libunwind's frames, also after 600 switches back and forth (past
 * the reads of the maps a thread may make). */
static ucontext_t co_main, co_ctx;
static struct walk co_m[2], co_c, co_u;
static uintptr_t co_hi;
static int co_rounds, co_bad;
static __attribute__((noinline)) void
co_leaf(void) {
	for (int how = 0; how < 3; how += 2) /* one call instruction for both */
		co_m[how / 2].n = mt_unwind(co_m[how / 2].pc, 32, how, 0, 0, 0);
	co_c.n = mt_cfi_walk(co_c.pc, MAXF, co_hi, 0, 0, 0);
	co_u.n = unw_backtrace((void **)co_u.pc, MAXF);
	__asm__ volatile("" ::: "memory");
}
static void
co_body(void) {
	for (;;) {
		co_leaf();
		/* mt_unwind leaves out this binary's frames (its "shim") */
		if (co_m[0].n != co_m[1].n || co_m[0].n < 1 ||
		    memcmp(co_m[0].pc, co_m[1].pc, sizeof(uintptr_t) * (size_t)co_m[0].n) ||
		    (co_c.n != -1 && (co_c.n != co_u.n ||
				      memcmp(co_c.pc + 1, co_u.pc + 1, sizeof(uintptr_t) * (size_t)(co_c.n - 1)))))
			co_bad++;
		co_rounds++;
		swapcontext(&co_ctx, &co_main);
	}
}

TEST(coroutine_stack) {
	size_t sz = 256 << 10;
	void *stk = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(stk != MAP_FAILED);
	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = stk;
	co_ctx.uc_stack.ss_size = sz;
	co_hi = (uintptr_t)stk + sz;
	co_ctx.uc_link = &co_main;
	makecontext(&co_ctx, co_body, 0);
	for (int i = 0; i < 600; i++) {
		struct walk c, u;
		swapcontext(&co_main, &co_ctx); /* a walk there */
		chain(3, &c, &u);               /* and one here, on the main stack */
		if (i % 100 == 0)
			check_same(&c, &u, "main stack between switches");
	}
	EXPECT(co_rounds == 600);
	EXPECT(co_bad == 0);
	if (co_bad)
		printf("  %d of %d walks on the coroutine's stack differ\n", co_bad, co_rounds);
	munmap(stk, sz);
}

/* A library whose FDEs point at a CIE 2 GiB away (lib_cfibad.so, made so
 * by the build): the walker refuses the frame (-1: libunwind's to try)
 * without reading there. */
static int bad_n = -2;
static int
bad_cb(void) {
	uintptr_t pc[MAXF];
	bad_n = mt_cfi_walk(pc, MAXF, stk_hi, 0, 0, 0);
	return 1;
}

TEST(corrupt_unwind_info) {
	void *h = dlopen("build/test/lib_cfibad.so", RTLD_NOW);
	EXPECT(h != NULL);
	if (!h)
		return;
	int (*call)(int (*)(void)) = (int (*)(int (*)(void)))dlsym(h, "cfibad_call");
	EXPECT(call && call(bad_cb) == 2);
	EXPECT(bad_n == -1);
}

/* Bounds: a stack range that ends just above the walker's frame stops the
 * walk there instead of reading past it. */
TEST(walk_stays_inside_bounds) {
	struct walk c, u;
	uintptr_t save = stk_hi;
	stk_hi = ((uintptr_t)__builtin_frame_address(0) & ~(uintptr_t)15) - 64;
	chain(10, &c, &u);
	stk_hi = save;
	EXPECT(c.n >= 0 && c.n < u.n);
}

static struct walk sig_c, sig_u, sig_m[3];
static void
on_sig(int s) {
	(void)s;
	walk_both(&sig_c, &sig_u);
	for (int how = 0; how < 3; how++) /* one call instruction for all */
		sig_m[how].n = mt_unwind(sig_m[how].pc, 32, how, 0, 0, 0);
}

TEST(signal_frame_goes_to_libunwind) {
	signal(SIGUSR1, on_sig);
	raise(SIGUSR1);
	signal(SIGUSR1, SIG_DFL);
	EXPECT(sig_c.n == -1);  /* the kernel's frame: not read */
	EXPECT(sig_u.n > 3);    /* libunwind walks through it */
	EXPECT(sig_m[MT_UNWIND_CFI].n == sig_m[MT_UNWIND_LIBUNWIND].n);
	EXPECT(!memcmp(sig_m[MT_UNWIND_CFI].pc, sig_m[MT_UNWIND_LIBUNWIND].pc,
		       sizeof(uintptr_t) * (size_t)sig_m[MT_UNWIND_CFI].n));
}

/* Rules at addresses where no code is (the walks never ask for them). */
#define FAKE_PC(i) ((uintptr_t)0x100000000000ull + (uintptr_t)(i) * 64)

static int
all_found(int from, int to, uint64_t g) {
	for (int i = from; i < to; i++) {
		uint64_t r = 0;
		if (!mt_cfitab_get(FAKE_PC(i), g, &r) || r != (uint64_t)i * 3 + 1)
			return 0;
	}
	return 1;
}

static void
rule_table_grows(void) {
	uint64_t g = mt_cfi_gen & MT_CFI_GEN_MASK;
	for (int i = 0; i < 1000; i++)
		mt_cfitab_put(FAKE_PC(i), g, (uint64_t)i * 3 + 1);
	EXPECT(all_found(0, 1000, g));
	EXPECT(mt_cfi_memory() <= 64 << 10); /* the small table */
	for (int i = 1000; i < 6000; i++)
		mt_cfitab_put(FAKE_PC(i), g, (uint64_t)i * 3 + 1);
	EXPECT(mt_cfi_memory() > 64 << 10); /* the full one */
	for (int i = 0; i < 6000; i++) /* those put in the small one: again */
		mt_cfitab_put(FAKE_PC(i), g, (uint64_t)i * 3 + 1);
	EXPECT(all_found(0, 6000, g));
}

int
main(void) {
	mt_unwind_init(dlsym);
	EXPECT(mt_cfi_init(dlsym) == 1); /* glibc 2.35+: _dl_find_object */
	stk_hi = stack_top();
	RUN(rule_table_grows);
	RUN(recursion_matches_libunwind);
	RUN(through_libc_qsort);
	RUN(alloca_frame_cfa_on_rbp);
	RUN(return_address_past_function_end);
	RUN(thread_stack_ends_at_clone);
	RUN(cached_rules_and_forget);
	RUN(reuse_checks_the_outer_frames);
	RUN(reuse_under_a_depth_limit);
	RUN(stop_range_ends_the_walk);
	RUN(walk_from_a_frame);
	RUN(threads_and_forgetting);
	RUN(coroutine_stack);
	RUN(corrupt_unwind_info);
	RUN(walk_stays_inside_bounds);
	RUN(signal_frame_goes_to_libunwind);
	printf("%d of %d walks the same as libunwind's\n", same, cases);
	return TEST_DONE();
}
