/* lib_sigfirst.so — installs a SIGUSR1 counting handler from its
 * constructor, before memtally's when preloaded after it. */
#include <signal.h>
#include <string.h>
volatile sig_atomic_t sigfirst_count;
static void h(int s) { (void)s; sigfirst_count++; }
__attribute__((constructor)) static void install(void) {
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_handler = h;
	sigaction(SIGUSR1, &a, NULL);
}
