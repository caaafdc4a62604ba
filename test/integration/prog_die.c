/* prog_die — dies by a signal, the way a test asks, and prints what it
 * sees of its signal dispositions (so a run under the shim can be
 * compared with one without).
 *   prog_die SIG HOW [THREADS]
 *     SIG   term, int, hup, quit, abrt, segv, bus, usr1 (the snapshot
 *           signal: own alone), abort (abort()), fault
 *           (a null store: SIGSEGV from the kernel), buserr (a store past
 *           a truncated file's end: SIGBUS from the kernel)
 *     HOW   self: the program sends it to itself (kill);
 *           wait: it prints "ready" and waits for the test to send it;
 *           churn: it prints "ready" and allocates and frees on its main
 *             thread until the test sends it (under MEMTALLY_EVERY=1 it
 *             is nearly always writing a snapshot when it comes);
 *           own: it installs its own handler with sigaction (it prints and
 *             exits 7), checks what sigaction and signal report, then
 *             sends the signal to itself;
 *           reset: as own, then puts SIG_DFL back with signal() and sends
 *             it (the default action must kill it);
 *           ignore: SIG_IGN with signal(), then sends it (it lives on);
 *           family: goes through sysv_signal, sigset, bsd_signal,
 *             sigignore and ssignal, printing what each returns, ends at
 *             SIG_DFL and sends it (the default action must kill it)
 *     THREADS  threads that allocate meanwhile (default 0)
 * Before dying it keeps 64 blocks of 10000 bytes (the final snapshot's
 * live heap). */
#include <fcntl.h>
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* sigset, sigignore */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void (*bsd_signal(int, void (*)(int)))(int); /* not declared since POSIX 2008 */

static void *keep[64];
static volatile int stop;

static void *
churn(void *arg) {
	(void)arg;
	void *mine[32] = {0};
	for (unsigned long n = 0; !stop; n++) {
		int i = n % 32;
		free(mine[i]);
		mine[i] = malloc(16 + n % 4000);
	}
	return NULL;
}

static const char *
name_of(void (*h)(int)) {
	return h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : "a handler";
}

/* What sigaction says of sig, in words that do not change between runs. */
static void
show(const char *when, int sig) {
	struct sigaction q;
	if (sigaction(sig, NULL, &q)) {
		printf("%s: sigaction failed\n", when);
		return;
	}
	int masked = 0;
	for (int s = 1; s < 32; s++)
		masked += sigismember(&q.sa_mask, s);
	/* SA_RESTORER and the restorer are glibc's, as the kernel keeps them:
	 * the same with and without the shim (issue 51: lost after SIG_DFL
	 * was set under it) */
	printf("%s: %s flags %#x mask %d restorer %s\n", when, name_of(q.sa_handler),
	       (unsigned)q.sa_flags, masked, q.sa_restorer ? "set" : "none");
}

static void
own(int sig) {
	printf("own handler: %d\n", sig);
	fflush(stdout);
	_exit(7);
}

static int
parse(const char *s) {
	static const struct { const char *n; int sig; } t[] = {
		{"term", SIGTERM}, {"int", SIGINT},   {"hup", SIGHUP},   {"quit", SIGQUIT},
		{"abrt", SIGABRT}, {"segv", SIGSEGV}, {"bus", SIGBUS},   {"abort", SIGABRT},
		{"fault", SIGSEGV}, {"buserr", SIGBUS}, {"usr1", SIGUSR1},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(s, t[i].n))
			return t[i].sig;
	return 0;
}

static void
die(const char *what, int sig) {
	fflush(stdout);
	if (!strcmp(what, "abort"))
		abort();
	if (!strcmp(what, "fault"))
		*(volatile int *)(uintptr_t)8 = 1;
	if (!strcmp(what, "buserr")) {
		char path[] = "/tmp/prog_die.XXXXXX";
		int fd = mkstemp(path);
		unlink(path);
		if (fd < 0 || ftruncate(fd, 4096))
			return;
		char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return;
		p[4096] = 1; /* past the file's end */
	}
	kill(getpid(), sig);
}

int
main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	int sig = parse(argv[1]);
	const char *how = argv[2];
	int threads = argc > 3 ? atoi(argv[3]) : 0;
	if (!sig)
		return 2;
	for (int i = 0; i < 64; i++)
		keep[i] = malloc(10000);
	pthread_t t[8];
	for (int i = 0; i < threads && i < 8; i++)
		pthread_create(&t[i], NULL, churn, NULL);
	show("at start", sig);
	if (!strcmp(how, "own") || !strcmp(how, "reset")) {
		struct sigaction a, old;
		memset(&a, 0, sizeof a);
		a.sa_handler = own;
		sigaction(sig, &a, &old);
		printf("sigaction's oldact: %s\n", name_of(old.sa_handler));
		show("after sigaction", sig);
		void (*prev)(int) = signal(sig, own);
		printf("signal's previous: %s\n", prev == own ? "own" : name_of(prev));
		if (!strcmp(how, "reset")) {
			prev = signal(sig, SIG_DFL);
			printf("signal's previous: %s\n", prev == own ? "own" : name_of(prev));
			show("after reset", sig);
		}
	} else if (!strcmp(how, "ignore")) {
		void (*prev)(int) = signal(sig, SIG_IGN);
		printf("signal's previous: %s\n", name_of(prev));
		show("after ignore", sig);
	}
	if (!strcmp(how, "family")) {
		void (*p)(int) = sysv_signal(sig, own);
		printf("sysv_signal's previous: %s\n", p == own ? "own" : name_of(p));
		show("after sysv_signal", sig);
		p = sigset(sig, SIG_DFL);
		printf("sigset's previous: %s\n", p == own ? "own" : name_of(p));
		p = bsd_signal(sig, own);
		printf("bsd_signal's previous: %s\n", p == own ? "own" : name_of(p));
		sigignore(sig);
		show("after sigignore", sig);
		p = ssignal(sig, SIG_DFL);
		printf("ssignal's previous: %s\n", p == own ? "own" : name_of(p));
		p = sigset(sig, SIG_HOLD);
		printf("sigset hold's previous: %s\n", p == own ? "own" : name_of(p));
		p = sigset(sig, SIG_DFL);
		printf("sigset's previous: %s\n", p == SIG_HOLD ? "SIG_HOLD" : name_of(p));
		show("after the family", sig);
	}
	if (!strcmp(how, "wait")) {
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (!strcmp(how, "churn")) {
		printf("ready\n");
		fflush(stdout);
		churn(NULL);
	}
	die(argv[1], sig);
	stop = 1;
	for (int i = 0; i < threads && i < 8; i++)
		pthread_join(t[i], NULL);
	printf("alive\n");
	return 0;
}
