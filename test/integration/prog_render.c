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

int
main(int argc, char **argv) {
	if (argc < 2)
		return 2;
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
