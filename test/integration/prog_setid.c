/* prog_setid UID — a root program that starts threads (each allocates),
 * then becomes UID (setgroups, setresgid, setresuid: glibc runs each on
 * every thread), then allocates 1 MiB in after_drop() and exits.  Prints
 * "dropped to UID".  Under the shim its file must hold what came after
 * the drop, written where root could write (issue 33, items 1 and 2). */
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t ready, done;

static void *
worker(void *arg) {
	(void)arg;
	for (int i = 0; i < 1000; i++)
		free(malloc(64 + i));
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&done); /* alive across the drop */
	return NULL;
}

__attribute__((noinline)) static char *
after_drop(void) {
	char *p = malloc(1 << 20);
	memset(p, 1, 1 << 20);
	return p;
}

int
main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	uid_t id = (uid_t)atoi(argv[1]);
	pthread_t t[4];
	pthread_barrier_init(&ready, NULL, 5);
	pthread_barrier_init(&done, NULL, 5);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	pthread_barrier_wait(&ready);
	if (setgroups(0, NULL) || setresgid(id, id, id) || setresuid(id, id, id)) {
		perror("prog_setid");
		return 3;
	}
	pthread_barrier_wait(&done);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	char *p = after_drop();
	printf("dropped to %u\n", (unsigned)getuid());
	return p[100] == 1 ? 0 : 4;
}
