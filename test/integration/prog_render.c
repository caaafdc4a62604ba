/* prog_render DIR — two host OOMs, the second while the writer thread is
 * still rendering the first (MEMTALLY_OOM_RENDER=1): it waits until the
 * first dump's page exists (a host dump has no torch pickle; the page comes before the flame graph).  Both dumps
 * must get all three pictures (the renderer once reset its queue after a
 * pass and lost the second). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
exists(const char *dir, const char *suffix) {
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	size_t n = strlen(suffix);
	while (d && (e = readdir(d)))
		if (strlen(e->d_name) > n && !strcmp(e->d_name + strlen(e->d_name) - n, suffix))
			found = 1;
	if (d)
		closedir(d);
	return found;
}

/* Live blocks from many call sites, so the dump takes the renderers a
 * while (a tiny one was rendered before the second OOM could land). */
static void *volatile keep[40000];
static void __attribute__((noinline))
grow(int depth, int i) {
	if (depth > 0) {
		grow(depth - 1, i);
		return;
	}
	keep[i] = malloc(64 + (size_t)(i % 7) * 16);
}

int
main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	for (int i = 0; i < 40000; i++)
		grow(i % 300, i);
	void *volatile p = malloc((size_t)1 << 62);
	int waited = 0;
	while (!exists(argv[1], ".oom1.html") && waited < 20000) {
		usleep(1000);
		waited++;
	}
	int rendering = !exists(argv[1], ".oom1.svg");
	p = malloc((size_t)1 << 62);
	printf("{\"first_failed\":%d,\"waited_ms\":%d,\"second_during_render\":%d}\n",
	       p == NULL, waited, rendering);
	return 0;
}
