/* prog_peak — a heap whose peak no snapshot sees (issue 15), one thread:
 *   S: 5 MiB, freed                    peak 5 MiB    snapshot "1"
 *   T: 8 MiB                           peak 8 MiB    snapshot "2"
 *   T freed; A, B: 10 MiB each         peak 20 MiB
 *   A, B freed; C: 15 MiB, freed       (no new peak) snapshot "3", exit
 * Each site's live bytes at the heap's peak, as the last snapshot must
 * say: S 0, T 0, A 10 MiB, B 10 MiB, C 0 (and in "1": S 5 MiB; in "2":
 * S 0 although S has not changed since "1", T 8 MiB). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1 << 20)
static int (*snap)(const char *);

#define SITE(name)                                                             \
	__attribute__((noinline)) static void *name(size_t n) {               \
		void *p = malloc(n);                                          \
		memset(p, 1, n);                                              \
		return p;                                                     \
	}
SITE(site_s)
SITE(site_t)
SITE(site_a)
SITE(site_b)
SITE(site_c)

int main(void) {
	snap = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	free(site_s(5 * MIB));
	if (snap)
		snap("1");
	void *t = site_t(8 * MIB);
	if (snap)
		snap("2");
	free(t);
	void *a = site_a(10 * MIB), *b = site_b(10 * MIB);
	free(a);
	free(b);
	free(site_c(15 * MIB));
	if (snap)
		snap("3");
	return 0;
}
