/* prog_fdrace — races the program's descriptors against the shim's
 * snapshots (test_fdrace, issue 51): with a soft RLIMIT_NOFILE above 4096
 * the shim's file sits at 900, inside the program's range.
 *   prog_fdrace DIR ROUNDS
 * One thread allocates and frees (MEMTALLY_EVERY's snapshots are written
 * by it); one sends the process the snapshot signal now and then; the main
 * thread, ROUNDS times: closes descriptors LO-HI (the shim's among
 * them), opens its own file DIR/own.<round % 4> and dup2s it onto each of
 * them (closing and taking each again 20 times), writes "own\n" through
 * every one, and closes them.  At the end it
 * reads its files back: each must hold "own\n" lines alone.  Prints
 * "foreign N" (the files with bytes that are not its own) and exits 0. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* the descriptors the program takes over, the shim's among them (at 900,
 * or wherever it opened its file again: the lowest free from 900) */
#define LO 896
static int HI = 1200; /* or the soft limit, if lower */

static volatile int stop;

static void *
churn(void *arg) {
	(void)arg;
	void *mine[64] = {0};
	for (unsigned long n = 0; !stop; n++) {
		int i = (int)(n % 64);
		free(mine[i]);
		mine[i] = malloc(32 + n % 2000);
	}
	for (int i = 0; i < 64; i++)
		free(mine[i]);
	return NULL;
}

static volatile int usr1;

static void
on_usr1(int sig) {
	(void)sig;
	usr1++;
}

static void *
poke(void *arg) {
	(void)arg;
	while (!stop) {
		kill(getpid(), SIGUSR1);
		usleep(2000);
	}
	return NULL;
}

int
main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: prog_fdrace DIR ROUNDS\n");
		return 2;
	}
	int rounds = atoi(argv[2]);
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)HI)
		HI = (int)rl.rlim_cur;
	/* its own handler for the snapshot signal (the shim calls it after
	 * asking for its snapshot): the bare run lives on too */
	signal(SIGUSR1, on_usr1);
	pthread_t a, b;
	pthread_create(&a, NULL, churn, NULL);
	pthread_create(&b, NULL, poke, NULL);
	char path[4][4096];
	for (int k = 0; k < 4; k++)
		snprintf(path[k], sizeof path[k], "%s/own.%d", argv[1], k);
	for (int r = 0; r < rounds; r++) {
		for (int fd = LO; fd < HI; fd++)
			close(fd);
		int f = open(path[r % 4], O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (f < 0) {
			perror("open");
			return 2;
		}
		for (int fd = LO; fd < HI; fd++)
			if (fd != f)
				dup2(f, fd);
		for (int k = 0; k < 20; k++) /* closed and taken again, at once */
			for (int fd = LO; fd < HI; fd++)
				if (fd != f) {
					close(fd);
					dup2(f, fd);
				}
		for (int fd = LO; fd < HI; fd++)
			if (write(fd, "own\n", 4) != 4)
				return 3;
		for (int fd = LO; fd < HI; fd++)
			close(fd);
		if (f < LO || f >= HI)
			close(f);
	}
	stop = 1;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	int foreign = 0;
	for (int k = 0; k < 4; k++) {
		FILE *f = fopen(path[k], "r");
		if (!f)
			continue;
		char line[256];
		int bad = 0;
		while (fgets(line, sizeof line, f))
			if (strcmp(line, "own\n"))
				bad = 1;
		if (!feof(f))
			bad = 1;
		fclose(f);
		foreign += bad;
	}
	printf("foreign %d\n", foreign);
	return 0;
}
