/* prog_signal — SIGUSR1 sent 100 times to itself while the main thread
 * allocates.  argv[1]: "sigaction" or "signal" installs the program's own
 * counting handler after start; "before" relies on lib_sigfirst.so (a
 * preloaded library that installed one in its constructor); "none" has no
 * handler (the process must survive).  Prints how many times it ran. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t count;
static volatile sig_atomic_t *counter = &count;
static volatile int done;

static void on_usr1(int sig) {
	(void)sig;
	count++;
}

static void *sender(void *arg) {
	int wait = arg != NULL;
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	for (int i = 0; i < 100; i++) {
		int before = *counter;
		kill(getpid(), SIGUSR1);
		struct timespec ts = {0, 1000000};
		for (int k = 0; k < 5000 && wait && *counter == before; k++)
			nanosleep(&(struct timespec){0, 100000}, NULL);
		if (!wait)
			nanosleep(&ts, NULL);
	}
	done = 1;
	return NULL;
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "sigaction";
	if (!strcmp(mode, "sigaction")) {
		struct sigaction a;
		memset(&a, 0, sizeof a);
		a.sa_handler = on_usr1;
		sigaction(SIGUSR1, &a, NULL);
		struct sigaction q;
		sigaction(SIGUSR1, NULL, &q);
		if (q.sa_handler != on_usr1)
			return 20; /* the program sees its own handler */
	} else if (!strcmp(mode, "signal")) {
		signal(SIGUSR1, on_usr1);
		if (signal(SIGUSR1, on_usr1) != on_usr1)
			return 21;
	} else if (!strcmp(mode, "before")) {
		counter = (volatile sig_atomic_t *)dlsym(RTLD_DEFAULT, "sigfirst_count");
		if (!counter)
			return 22;
	}
	pthread_t t;
	pthread_create(&t, NULL, sender, strcmp(mode, "none") ? (void *)1 : NULL);
	void *keep[64] = {0};
	unsigned long n = 0;
	while (!done) {
		int i = n++ % 64;
		free(keep[i]);
		keep[i] = malloc(16 + n % 1000);
	}
	pthread_join(t, NULL);
	printf("handled %d\n", (int)*counter);
	return 0;
}
