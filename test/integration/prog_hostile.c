/* prog_hostile — programs that make a preloaded tracker's life hard; each
 * must behave exactly as without the shim.  argv[1] picks one:
 *   sigmalloc   a SIGALRM handler that mallocs and frees, 2 ms timer, while
 *               the main thread computes (signals blocked around its own
 *               malloc calls, as such programs must)
 *   closefds    closes every descriptor above 2 after some snapshots, opens
 *               its own files (taking the numbers) and writes to them
 *   resethand   its own SIGUSR1 handler with SA_RESETHAND, signalled twice
 *   execself N  execs itself N times
 *   vfork       vfork + exec, and posix_spawn
 *   tlsdtor     threads whose thread-local destructors allocate at exit
 *   rawmmap     a custom allocator carving blocks out of one raw mmap
 * Prints what it saw; exit code 0 unless something went wrong. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static volatile sig_atomic_t handled;

static void alrm(int s) {
	(void)s;
	void *p = malloc(100 + handled % 1000);
	free(p);
	handled++;
}

static void usr1(int s) { (void)s; handled++; }

static pthread_key_t key;
static void dtor(void *p) {
	free(p);
	void *q = malloc(333); /* allocates while the thread is going away */
	free(q);
}
static void *tls_thread(void *a) {
	(void)a;
	pthread_setspecific(key, malloc(100));
	return NULL;
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	if (!strcmp(mode, "sigmalloc")) {
		signal(SIGALRM, alrm);
		struct itimerval it = {{0, 2000}, {0, 2000}};
		setitimer(ITIMER_REAL, &it, NULL);
		sigset_t s, old;
		sigemptyset(&s);
		sigaddset(&s, SIGALRM);
		volatile double x = 0;
		while (handled < 200) {
			sigprocmask(SIG_BLOCK, &s, &old);
			void *p = malloc(1000);
			free(p);
			sigprocmask(SIG_SETMASK, &old, NULL);
			for (int i = 0; i < 20000; i++)
				x += i * 0.5;
		}
		struct itimerval off = {{0, 0}, {0, 0}};
		setitimer(ITIMER_REAL, &off, NULL);
		printf("handled %d\n", handled >= 200);
	} else if (!strcmp(mode, "closefds")) {
		if (snap)
			snap("before"); /* the shim's file is open now */
		syscall(SYS_close_range, 3, ~0u, 0);
		char name[64];
		int fds[8];
		for (int i = 0; i < 8; i++) {
			snprintf(name, sizeof name, "%s/own%d.txt", argc > 2 ? argv[2] : "/tmp", i);
			fds[i] = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		}
		if (snap)
			snap("after"); /* must not land in the program's files */
		for (int i = 0; i < 8; i++) {
			dprintf(fds[i], "own file %d\n", i);
			close(fds[i]);
		}
		printf("closefds ok\n");
	} else if (!strcmp(mode, "resethand")) {
		struct sigaction a;
		memset(&a, 0, sizeof a);
		a.sa_handler = usr1;
		a.sa_flags = SA_RESETHAND;
		sigaction(SIGUSR1, &a, NULL);
		raise(SIGUSR1);
		struct sigaction now;
		sigaction(SIGUSR1, NULL, &now);
		printf("handled %d, reset %d\n", (int)handled, now.sa_handler == SIG_DFL);
	} else if (!strcmp(mode, "execself")) {
		int n = argc > 2 ? atoi(argv[2]) : 0;
		void *p = malloc(1000 + n);
		(void)p;
		if (n > 0) {
			char num[16];
			snprintf(num, sizeof num, "%d", n - 1);
			/* an image that execs before the writer thread has run
			 * leaves no file (README: known limitations): ask for
			 * its snapshot, so every image has one to name */
			int (*snap)(const char *) =
				(int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
			if (snap)
				snap("before exec");
			execl("/proc/self/exe", argv[0], "execself", num, (char *)NULL);
			return 9;
		}
		printf("exec chain done\n");
	} else if (!strcmp(mode, "vfork")) {
		pid_t p = vfork();
		if (p == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		int st;
		waitpid(p, &st, 0);
		char *av[] = {"echo", "spawned", NULL};
		pid_t q;
		if (posix_spawn(&q, "/bin/echo", NULL, NULL, av, environ))
			return 10;
		waitpid(q, &st, 0);
		printf("vfork %d spawn %d\n", 0, WEXITSTATUS(st));
	} else if (!strcmp(mode, "tlsdtor")) {
		pthread_key_create(&key, dtor);
		for (int i = 0; i < 20; i++) {
			pthread_t t;
			pthread_create(&t, NULL, tls_thread, NULL);
			pthread_join(t, NULL);
		}
		printf("tls destructors ran\n");
	} else if (!strcmp(mode, "rawmmap")) {
		size_t n = 64 << 20;
		char *arena = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		size_t used = 0;
		for (int i = 0; i < 100000; i++) { /* a bump allocator of its own */
			char *p = arena + used;
			used += 512;
			p[0] = (char)i;
		}
		munmap(arena, n);
		printf("raw arena used %zu\n", used);
	} else {
		return 2;
	}
	return 0;
}
