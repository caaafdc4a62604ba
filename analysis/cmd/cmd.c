/* cmd.c — what every command does alike with its context (cmd.h). */
#include "cmd/cmd.h"
#include "base/util.h"
#include <stdio.h>
#include <stdlib.h>

void
cmd_native(struct opts *o, struct run *r) {
	for (size_t i = 0; i < r->nfiles; i++)
		r->files[i].native = o->native, r->files[i].by_site = o->by_site;
}

void
cmd_load_paths(struct opts *o, struct run *r, char **paths, int npaths) {
	run_load(r, paths, npaths);
	cmd_native(o, r);
}

void
cmd_load(struct opts *o, struct run *r) {
	cmd_load_paths(o, r, o->paths, o->npaths);
}

void
cmd_list(struct opts *o, struct run *r, int dumps) {
	run_list(r, o->paths, o->npaths, dumps, 0);
	r->native = o->native;
	r->by_site = o->by_site;
}

int
each_file(struct run *r, struct opts *o, const char *key,
	  void (*fn)(struct mfile *f, struct opts *o, struct sb *j, int first)) {
	struct sb j = {0};
	if (o->json)
		sb_printf(&j, "{\"%s\":[", key);
	if (r->files) { /* loaded (cmd_load) */
		for (size_t i = 0; i < r->nfiles; i++)
			fn(&r->files[i], o, &j, i == 0);
	} else { /* listed (cmd_list): one at a time, each freed after fn */
		struct mfile f;
		for (int first = 1; run_next(r, &f); first = 0) {
			f.native = r->native;
			f.by_site = r->by_site;
			fn(&f, o, &j, first);
			mfile_free(&f);
		}
		run_free(r);
	}
	if (o->json) {
		sb_puts(&j, "]}\n");
		fputs(j.p, stdout);
		sb_free(&j);
	}
	return 0;
}
