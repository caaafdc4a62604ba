/* files.c — which files a command reads: the paths named, directories
 * searched for the shim's files (memtally.*.jsonl[.zst]; OOM dumps apart),
 * and reading them one at a time (memory bounded by the largest file, not
 * the directory) or all at once for the commands that compare them. */
#include "model/model.h"
#include "read/reader.h"
#include "base/util.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *
jsonl_ext(const char *name) {
	size_t n = strlen(name);
	if (n > 6 && !strcmp(name + n - 6, ".jsonl"))
		return name + n - 6;
	if (n > 10 && !strcmp(name + n - 10, ".jsonl.zst"))
		return name + n - 10;
	return NULL;
}

static int
is_snapshot_file(const char *name, int dumps) {
	size_t n = strlen(name);
	if (n > 12 && !strcmp(name + n - 12, ".torch.jsonl"))
		return 0; /* PyTorch's snapshot beside a dump (read/torchsnap.c) */
	return !strncmp(name, "memtally.", 9) && jsonl_ext(name) &&
	       (strstr(name, ".oom") != NULL) == dumps;
}

static int
cmp_str(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
add(struct run *r, char *path, int named, long sel) {
	r->list = xgrow(r->list, r->nlist + 1, &r->cap_list, sizeof *r->list);
	r->named = xrealloc(r->named, r->cap_list);
	r->sels = xrealloc(r->sels, r->cap_list * sizeof *r->sels);
	r->named[r->nlist] = (unsigned char)named;
	r->sels[r->nlist] = sel;
	r->list[r->nlist++] = path;
}

/* The phase names FILE@phase:NAME gave, SNAP_PHASE0 - k for the k-th. */
#define MAX_PHASE_SELS 16
static char *phase_sels[MAX_PHASE_SELS];
static int nphase_sels;

long
phase_selector(const struct mfile *f, long sel) {
	if (sel > SNAP_PHASE0 || SNAP_PHASE0 - sel >= nphase_sels)
		return sel;
	const char *want = phase_sels[SNAP_PHASE0 - sel];
	const struct snap *best = NULL;
	int64_t most = -1;
	for (size_t i = 0; i < f->nsnaps; i++) {
		const struct snap *s = &f->snaps[i];
		if (!s->phase || strcmp(f->phase_names[s->phase - 1], want))
			continue;
		int64_t live = 0;
		for (int k = 0; k < NKINDS; k++)
			live += s->tot[k].live_bytes;
		if (live > most)
			most = live, best = s;
	}
	if (!best) {
		struct sb t = {0};
		for (int i = 0; i < f->nphase_names; i++)
			sb_printf(&t, "%s%s", i ? ", " : "", f->phase_names[i]);
		die(EXIT_BAD_INPUT, "%s: no snapshot was taken during phase '%s' (its phases: %s)",
		    f->path, want, t.len ? t.p : "none");
	}
	return best->seq;
}

/* FILE@N, FILE@peak, FILE@last, FILE@phase:NAME (a snapshot of a file or
 * of every file of a directory) where FILE exists and FILE@... does not:
 * the snapshot goes to *sel and the path is cut there (in place).  Else
 * SNAP_DEFAULT. */
long
path_selector(char *path) {
	char *at = strrchr(path, '@');
	struct stat st;
	if (!at || at == path || !stat(path, &st))
		return SNAP_DEFAULT;
	const char *v = at + 1;
	long sel;
	if (!strcmp(v, "peak"))
		sel = SNAP_PEAK;
	else if (!strcmp(v, "last"))
		sel = SNAP_LAST;
	else if (*v && strspn(v, "0123456789") == strlen(v) && strlen(v) < 16)
		sel = atol(v);
	else if (!strncmp(v, "phase:", 6) && v[6] && nphase_sels < MAX_PHASE_SELS) {
		phase_sels[nphase_sels] = xstrdup(v + 6);
		for (char *p = phase_sels[nphase_sels]; *p; p++)
			if (*p == ' ') /* "checkpoint save" as the views print it */
				*p = '_';
		sel = SNAP_PHASE0 - nphase_sels++;
	} else
		die(EXIT_BAD_INPUT, "%s: no such file, and '@%s' is not a snapshot (N, peak, last "
				    "or phase:NAME)", path, v);
	*at = 0;
	if (stat(path, &st)) {
		int e = errno;
		*at = '@';
		die(EXIT_BAD_INPUT, "%s: %s", path, strerror(e));
	}
	return sel;
}

/* A directory's files, sorted; returns how many. */
static size_t
add_dir(struct run *r, const char *dir, int dumps, long sel) {
	DIR *d = opendir(dir);
	if (!d)
		die(EXIT_BAD_INPUT, "%s: %s", dir, strerror(errno));
	size_t before = r->nlist;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_snapshot_file(e->d_name, dumps))
			continue;
		struct sb s = {0};
		sb_printf(&s, "%s/%s", dir, e->d_name);
		add(r, s.p, 0, sel);
	}
	closedir(d);
	xqsort(r->list + before, r->nlist - before, sizeof *r->list, cmp_str);
	return r->nlist - before;
}

void
run_list(struct run *r, char **paths, int npaths, int dumps, int optional) {
	memset(r, 0, sizeof *r);
	for (int i = 0; i < npaths; i++) {
		struct stat st;
		char *path = xstrdup(paths[i]); /* cut at FILE@N's '@' */
		long sel = path_selector(path);
		if (stat(path, &st))
			die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
		if (!S_ISDIR(st.st_mode)) {
			if (optional && !strstr(path, ".oom"))
				free(path); /* a snapshot file named among dumps */
			else
				add(r, path, 1, sel);
			continue;
		}
		if (!add_dir(r, path, dumps, sel) && !optional)
			die(EXIT_BAD_INPUT, dumps ? "%s: no OOM dumps (memtally.*.oom*.jsonl) in this directory"
						  : "%s: no memtally.*.jsonl[.zst] files in this directory",
			    path);
		free(path);
	}
	r->optional = optional;
}

static int
run_read(struct run *r, size_t i, struct mfile *f) {
	struct load_why why;
	if (!load_file(f, r->list[i], &why)) {
		f->sel = phase_selector(f, r->sels[i]);
		f->has_sel = f->sel != SNAP_DEFAULT;
		return 0;
	}
	/* nothing usable: named alone, bad input; in a directory, left
	 * out (a process that exec'd or died before its first line leaves
	 * an empty file, or one cut inside its first frame) */
	if (r->named[i])
		die(EXIT_BAD_INPUT, "%s", why.text);
	if (why.damage) {
		load_refused();
		fprintf(stderr, "memtally: %s; left out\n", why.text);
	} else {
		warnx("%s; left out", why.text);
	}
	return -1;
}

int
run_next(struct run *r, struct mfile *f) {
	while (r->next < r->nlist)
		if (!run_read(r, r->next++, f)) {
			r->nread++;
			/* how its rows are named: the command's choice (cmd_list) */
			f->native = r->native;
			f->by_site = r->by_site;
			return 1;
		}
	if (!r->nread && r->nlist && !r->optional)
		die(EXIT_BAD_INPUT, "no file with a usable record among the %zu named", r->nlist);
	return 0;
}

static void
load_all(struct run *r, char **paths, int npaths, int dumps, int optional) {
	run_list(r, paths, npaths, dumps, optional);
	r->files = xcalloc(r->nlist + 1, sizeof *r->files);
	while (run_next(r, &r->files[r->nfiles]))
		r->nfiles++;
}

void
run_load(struct run *r, char **paths, int npaths) {
	load_all(r, paths, npaths, 0, 0);
}

void
run_load_dumps(struct run *r, char **paths, int npaths) {
	load_all(r, paths, npaths, 1, 0);
}

void
run_load_dumps_if_any(struct run *r, char **paths, int npaths) {
	load_all(r, paths, npaths, 1, 1);
}

void
run_free(struct run *r) {
	for (size_t i = 0; i < r->nfiles; i++)
		mfile_free(&r->files[i]);
	for (size_t i = 0; i < r->nlist; i++)
		free(r->list[i]);
	free(r->files);
	free(r->list);
	free(r->named);
	free(r->sels);
	memset(r, 0, sizeof *r);
}
