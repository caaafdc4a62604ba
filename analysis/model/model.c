/* model.c — questions asked of the loaded model (model.h): a snapshot's
 * figures, the peak, a module by address, labels, and every call site as
 * of a snapshot (delta snapshots replayed); and freeing a file's model.
 * The reader that builds the model is read/. */
#include "model/model.h"
#include "base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t
snap_live(const struct snap *s, int kind) {
	if (kind >= 0)
		return s->tot[kind].live_bytes;
	int64_t t = 0;
	for (int k = 0; k < NKINDS; k++)
		t += s->tot[k].live_bytes;
	return t;
}

static int64_t
peak_value(const struct snap *s, int kind) {
	return kind >= 0 ? s->tot[kind].live_bytes
			 : s->tot[K_HEAP].live_bytes + s->tot[K_MMAP].live_bytes;
}

const struct snap *
file_peak(const struct mfile *f, int kind) {
	const struct snap *best = NULL;
	for (size_t i = 0; i < f->nsnaps; i++) {
		const struct snap *s = &f->snaps[i];
		if (!best || peak_value(s, kind) > peak_value(best, kind))
			best = s;
	}
	return best;
}

/* The module holding pc: the last listed whose range holds it. Where no two
 * modules' ranges overlap that is the only one, found by a binary search on
 * the index the reader keeps (file_index_modules); else the scan from the
 * last listed. A symbolization asks it for every frame of every stack. */
const struct module *
file_module(const struct mfile *f, uint64_t pc) {
	if (f->nmodord && f->nmodord == f->nmods) {
		size_t lo = 0, hi = f->nmodord;
		while (lo < hi) { /* the first whose start is above pc */
			size_t mid = lo + (hi - lo) / 2;
			if (f->mods[f->modord[mid]].start <= pc)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!lo)
			return NULL;
		const struct module *m = &f->mods[f->modord[lo - 1]];
		return pc < m->end ? m : NULL;
	}
	for (size_t i = f->nmods; i-- > 0;)
		if (pc >= f->mods[i].start && pc < f->mods[i].end)
			return &f->mods[i];
	return NULL;
}

static const struct mfile *sorting;
static int
by_start(const void *a, const void *b) {
	uint64_t x = sorting->mods[*(const uint32_t *)a].start, y = sorting->mods[*(const uint32_t *)b].start;
	return x < y ? -1 : x > y;
}

void
file_index_modules(struct mfile *f) {
	f->modord = xrealloc(f->modord, (f->nmods ? f->nmods : 1) * sizeof *f->modord);
	for (size_t i = 0; i < f->nmods; i++)
		f->modord[i] = (uint32_t)i;
	sorting = f;
	xqsort(f->modord, f->nmods, sizeof *f->modord, by_start);
	f->nmodord = f->nmods;
	for (size_t i = 1; i < f->nmods; i++)
		if (f->mods[f->modord[i - 1]].end > f->mods[f->modord[i]].start) {
			f->nmodord = 0; /* overlapping: the scan decides */
			break;
		}
}

const char *
file_label(const struct mfile *f, char *buf, size_t n) {
	if (f->rank >= 0)
		snprintf(buf, n, "%s r%lld p%lld", f->host ? f->host : "?", (long long)f->rank,
			 (long long)f->pid);
	else
		snprintf(buf, n, "%s p%lld", f->host ? f->host : "?", (long long)f->pid);
	return buf;
}

void
file_title(const struct mfile *f) {
	char lab[128];
	file_label(f, lab, sizeof lab);
	int room = 100 - 5 - (int)strlen(lab);
	int n = (int)strlen(f->argv);
	if (n <= room)
		printf("== %s  %s\n", lab, f->argv);
	else
		printf("== %s  %.*s...\n", lab, room > 3 ? room - 3 : 0, f->argv);
}

static void
replay(struct mfile *f, const struct snap *s) {
	if (s->mode != SITES_DELTA) {
		f->ncur = 0;
		if (f->curmap)
			memset(f->curmap, 0, f->mapcap * sizeof *f->curmap);
	}
	for (size_t i = 0; i < s->nsites; i++) {
		const struct site *t = &s->sites[i];
		if ((f->ncur + 1) * 2 > f->mapcap) {
			f->mapcap = f->mapcap ? f->mapcap * 2 : 1024;
			free(f->curmap);
			f->curmap = xcalloc(f->mapcap, sizeof *f->curmap);
			for (size_t k = 0; k < f->ncur; k++) {
				uint64_t h = ((uint64_t)f->cur[k].stack * 8 + f->cur[k].kind) *
					     0x9e3779b97f4a7c15ull;
				size_t j = (size_t)(h >> 17) & (f->mapcap - 1);
				while (f->curmap[j])
					j = (j + 1) & (f->mapcap - 1);
				f->curmap[j] = (int64_t)k + 1;
			}
		}
		uint64_t h = ((uint64_t)t->stack * 8 + t->kind) * 0x9e3779b97f4a7c15ull;
		size_t j = (size_t)(h >> 17) & (f->mapcap - 1);
		while (f->curmap[j]) {
			struct site *c = &f->cur[f->curmap[j] - 1];
			if (c->stack == t->stack && c->kind == t->kind)
				break;
			j = (j + 1) & (f->mapcap - 1);
		}
		if (f->curmap[j]) {
			f->cur[f->curmap[j] - 1] = *t;
			continue;
		}
		if (f->ncur == f->capcur) {
			f->capcur = f->capcur ? f->capcur * 2 : 256;
			f->cur = xrealloc(f->cur, f->capcur * sizeof *f->cur);
		}
		f->cur[f->ncur] = *t;
		f->curmap[j] = (int64_t)++f->ncur;
	}
}

const struct site *
snap_sites_view(struct mfile *f, const struct snap *s, size_t *n) {
	long idx = (long)(s - f->snaps);
	if (idx < f->cur_idx)
		f->cur_idx = -1; /* replay from the start */
	long from = f->cur_idx + 1;
	/* A full or top snapshot resets the state: start at the last one. */
	for (long i = idx; i > from; i--)
		if (f->snaps[i].mode != SITES_DELTA) {
			from = i;
			break;
		}
	for (long i = from; i <= idx; i++)
		replay(f, &f->snaps[i]);
	f->cur_idx = idx;
	*n = f->ncur;
	return f->cur;
}

struct site *
snap_sites(struct mfile *f, const struct snap *s, size_t *n) {
	const struct site *cur = snap_sites_view(f, s, n);
	struct site *v = xmalloc((*n + 1) * sizeof *v);
	if (*n) /* memcpy(v, NULL, 0) is undefined */
		memcpy(v, cur, *n * sizeof *v);
	return v;
}

const struct snap *
pick_snapshot(const struct mfile *f, long seq, int kind) {
	if (!f->nsnaps)
		die(EXIT_BAD_INPUT, "%s: no snapshots", f->path);
	if (seq == SNAP_PEAK)
		return file_peak(f, kind);
	if (seq < 0) /* SNAP_LAST, SNAP_DEFAULT */
		return &f->snaps[f->nsnaps - 1];
	for (size_t i = 0; i < f->nsnaps; i++)
		if (f->snaps[i].seq == seq)
			return &f->snaps[i];
	die(EXIT_BAD_INPUT, "%s: no snapshot %ld", f->path, seq);
}

void
file_json_head(struct sb *j, const struct mfile *f) {
	sb_puts(j, "{\"file\":");
	sb_json_str(j, f->path);
	sb_printf(j, ",\"pid\":%lld,\"rank\":", (long long)f->pid);
	if (f->rank >= 0)
		sb_printf(j, "%lld", (long long)f->rank);
	else
		sb_puts(j, "null");
}

struct site *
sites_for(struct mfile *f, long seq, int kind, const struct snap **s, int *at_peak, size_t *n) {
	*at_peak = 0;
	if (seq != SNAP_PEAK) {
		*s = pick_snapshot(f, seq, kind);
		return snap_sites(f, *s, n);
	}
	*s = pick_snapshot(f, SNAP_LAST, kind);
	struct site *v = snap_sites(f, *s, n);
	int have = 0;
	for (size_t i = 0; i < *n && !have; i++)
		have = v[i].at_peak_bytes >= 0;
	if (!have) {
		free(v);
		*s = pick_snapshot(f, SNAP_PEAK, kind);
		return snap_sites(f, *s, n);
	}
	for (size_t i = 0; i < *n; i++) {
		v[i].live_bytes = v[i].at_peak_bytes > 0 ? v[i].at_peak_bytes : 0;
		v[i].live_count = 0;
	}
	*at_peak = 1;
	return v;
}

void
snap_free(struct snap *s) {
	free(s->label);
	free(s->sites);
	free(s->torch);
	for (int i = 0; i < s->nmarks; i++)
		free(s->marks[i].name);
	for (int i = 0; i < s->work.n; i++)
		free(s->work.v[i].name);
	free(s->work.shapes);
}

/* Everything the reader allocated for f (a command reading files one at
 * a time frees each before the next). */
void
mfile_free(struct mfile *f) {
	free(f->path);
	free(f->host);
	free(f->job);
	free(f->exe);
	free(f->argv);
	for (size_t i = 0; i < f->nmods; i++)
		free(f->mods[i].path), free(f->mods[i].build_id);
	free(f->mods);
	free(f->modix);
	free(f->modord);
	for (size_t i = 0; i < f->nstacks; i++)
		free(f->stacks[i].pcs);
	free(f->stacks);
	free(f->python);
	for (size_t i = 0; i < f->npyframes; i++)
		free(f->pyframes[i].file), free(f->pyframes[i].func);
	free(f->pyframes);
	for (size_t i = 0; i < f->npystacks; i++)
		free(f->pystacks[i].frames), free(f->pystacks[i].entry);
	free(f->pystacks);
	struct idmap *maps[] = {&f->stackmap, &f->pyframemap, &f->pystackmap};
	for (int i = 0; i < 3; i++)
		free(maps[i]->id), free(maps[i]->ix);
	for (size_t i = 0; i < f->nsnaps; i++)
		snap_free(&f->snaps[i]);
	free(f->snaps);
	free(f->oom);
	free(f->segs);
	free(f->events);
	for (size_t i = 0; i < f->nkept; i++) {
		for (size_t j = 0; j < f->kept[i].nsteps; j++) {
			struct keptstep *k = &f->kept[i].steps[j];
			free(k->how), free(k->name), free(k->type), free(k->where);
		}
		free(f->kept[i].steps);
	}
	free(f->kept);
	for (int i = 0; i < f->nphase_names; i++)
		free(f->phase_names[i]);
	free(f->spans);
	free(f->searched);
	free(f->cur);
	free(f->curmap);
	memset(f, 0, sizeof *f);
}

static int
cmp_site_key(const void *a, const void *b) {
	const struct site *x = a, *y = b;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return (x->kind > y->kind) - (x->kind < y->kind);
}

/* Snapshot i left out: what it changed carries into the next (a delta
 * there takes i's rows it does not override, and i's mode when i was
 * complete in itself). */
static void
drop_snap(struct mfile *f, size_t i) {
	struct snap *a = &f->snaps[i], *b = &f->snaps[i + 1];
	if (b->mode == SITES_DELTA) {
		xqsort(b->sites, b->nsites, sizeof *b->sites, cmp_site_key);
		struct site *v = xmalloc((a->nsites + b->nsites + 1) * sizeof *v);
		memcpy(v, b->sites, b->nsites * sizeof *v);
		size_t n = b->nsites;
		for (size_t k = 0; k < a->nsites; k++)
			if (!b->nsites || !bsearch(&a->sites[k], b->sites, b->nsites, sizeof *b->sites,
						   cmp_site_key))
				v[n++] = a->sites[k];
		free(b->sites);
		b->sites = v;
		b->nsites = n;
		b->mode = a->mode;
	}
	snap_free(a);
	memmove(a, b, (f->nsnaps - i - 1) * sizeof *a);
	f->nsnaps--;
}

void
mfile_thin(struct mfile *f, int64_t recent_ms) {
	if (f->nsnaps < 3)
		return;
	size_t before = f->nsnaps;
	int64_t recent = f->snaps[f->nsnaps - 1].elapsed_ms - recent_ms;
	for (size_t i = 1; i + 1 < f->nsnaps && f->snaps[i].elapsed_ms < recent; i++)
		drop_snap(f, i); /* every other older one */
	if (f->nsnaps * 4 > before * 3) /* mostly recent: every other of all */
		for (size_t i = 1; i + 1 < f->nsnaps; i++)
			drop_snap(f, i);
	f->cur_idx = -1; /* the replay starts again */
	f->ncur = 0;
}
