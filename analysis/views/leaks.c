/* leaks.c — `memtally leaks`: call sites ranked by sustained growth.
 *
 * Method (README "How leaks are found"): per process, snapshots in the
 * first --warmup fraction of the run are ignored; of the rest, up to 80
 * evenly spaced snapshots are used.  For each call site, live bytes over
 * time get a Theil-Sen slope (the median of pairwise slopes: robust to a
 * few odd snapshots) and Kendall's tau (how consistently it rises).  A
 * suspect has a positive slope, tau >= 0.6, fitted growth of at least
 * 64 KiB over the window, and is still growing in the window's second half
 * (slope there >= 30% of the whole window's), so a cache that filled and
 * stopped is not one; churn has tau near 0.  The window is the whole run
 * after warm-up, else its second half, else its last quarter, so a leak
 * that only starts after a long start-up is judged where it grows.  Suspects are ranked by bytes
 * per hour; with marks (memtally_mark), growth per unit of the first mark
 * (e.g. bytes per step) is given too. */
#include "cmd.h"
#include "answer/sites.h"
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXPTS 80
#define MIN_GROWTH (64 << 10)

struct suspect {
	uint32_t stack;
	int kind;
	double per_hour, per_step, tau, growth, share;
	int64_t live;
	int64_t from_ms; /* the window where it grows starts here */
	size_t w0;       /* ... at this point */
};

struct ser {
	uint32_t stack;
	int kind;
	double y[MAXPTS];
};

static int
cmp_suspect(const void *a, const void *b) {
	const struct suspect *x = a, *y = b;
	return x->per_hour < y->per_hour ? 1 : x->per_hour > y->per_hour ? -1 : 0;
}

/* Series index for (stack, kind), via an open-addressing map. */
struct smap {
	struct ser *v;
	size_t n, cap;
	int64_t *slot; /* index + 1 */
	size_t scap;
};

static struct ser *
series(struct smap *m, uint32_t stack, int kind) {
	if (m->n * 2 >= m->scap) {
		size_t ncap = m->scap ? m->scap * 2 : 1024;
		int64_t *ns = xcalloc(ncap, sizeof *ns);
		for (size_t i = 0; i < m->n; i++) {
			uint64_t h = ((uint64_t)m->v[i].stack * 8 + (uint64_t)m->v[i].kind) *
				     0x9e3779b97f4a7c15ull;
			size_t j = (size_t)(h >> 17) & (ncap - 1);
			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = (int64_t)i + 1;
		}
		free(m->slot);
		m->slot = ns;
		m->scap = ncap;
	}
	uint64_t h = ((uint64_t)stack * 8 + (uint64_t)kind) * 0x9e3779b97f4a7c15ull;
	size_t j = (size_t)(h >> 17) & (m->scap - 1);
	while (m->slot[j]) {
		struct ser *s = &m->v[m->slot[j] - 1];
		if (s->stack == stack && s->kind == kind)
			return s;
		j = (j + 1) & (m->scap - 1);
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->v = xrealloc(m->v, m->cap * sizeof *m->v);
	}
	struct ser *s = &m->v[m->n];
	memset(s, 0, sizeof *s);
	s->stack = stack;
	s->kind = kind;
	m->slot[j] = (int64_t)++m->n;
	return s;
}

/* The first mark name in the last snapshot, if every used one has it. */
static const char *
step_mark(const struct snap **pts, size_t n, double *steps) {
	const struct snap *last = pts[n - 1];
	if (!last->nmarks)
		return NULL;
	const char *name = last->marks[0].name;
	for (size_t i = 0; i < n; i++) {
		int found = 0;
		for (int k = 0; k < pts[i]->nmarks; k++)
			if (!strcmp(pts[i]->marks[k].name, name)) {
				steps[i] = pts[i]->marks[k].value;
				found = 1;
			}
		if (!found)
			return NULL;
	}
	return name;
}

/* collect: rank the suspects into it (up to max) and print nothing
 * (memtally top); else print them (text or --json). */
static size_t
analyse_into(struct mfile *f, struct opts *o, struct sb *j, int first, struct leak_row *collect,
	     size_t max) {
	char a[16], b[16], c[16], name[512];
	const struct snap *pts[MAXPTS];
	size_t npts = 0, warm = 0, tear = 0;
	int marked = 0;
	size_t *in_warmup = &warm, *in_teardown = &tear;
	int *by_mark = &marked;
	if (f->nsnaps) {
		int64_t t0 = f->snaps[0].elapsed_ms, t1 = f->snaps[f->nsnaps - 1].elapsed_ms;
		double from = (double)t0 + o->warmup * (double)(t1 - t0);
		size_t lo = 0;
		while (lo < f->nsnaps && (double)f->snaps[lo].elapsed_ms < from)
			lo++;
		/* Teardown: what a process frees on its way out (an interpreter's
		 * exit) would hide every leak.  With a step mark it is what comes
		 * after the last step began; without, a fall that runs to the
		 * end (teardown_end).  A spike before either is part of the run. */
		size_t end = f->nsnaps;
		if (lo < f->nsnaps) {
			const struct snap *last = &f->snaps[f->nsnaps - 1];
			const char *mk = last->nmarks ? last->marks[0].name : NULL;
			double final = mk ? last->marks[0].value : 0;
			/* only a counter (a value that never falls) marks steps */
			double prev = -INFINITY;
			for (size_t i = 0; mk && i < f->nsnaps; i++) {
				const struct snap *p = &f->snaps[i];
				if (!p->nmarks || strcmp(p->marks[0].name, mk))
					continue;
				if (p->marks[0].value < prev)
					mk = NULL;
				else
					prev = p->marks[0].value;
			}
			*by_mark = mk != NULL;
			if (mk) {
				for (size_t i = lo; i < f->nsnaps; i++) {
					const struct snap *p = &f->snaps[i];
					if (p->nmarks && !strcmp(p->marks[0].name, mk) &&
					    p->marks[0].value == final) {
						end = i + 1; /* the first at the last step */
						break;
					}
				}
			} else {
				double *y = xmalloc(f->nsnaps * sizeof *y);
				for (size_t i = 0; i < f->nsnaps; i++)
					y[i] = (double)(f->snaps[i].tot[K_HEAP].live_bytes +
							f->snaps[i].tot[K_MMAP].live_bytes);
				end = teardown_end(y, lo, f->nsnaps);
				free(y);
			}
		}
		*in_warmup = lo;
		*in_teardown = f->nsnaps - (end > lo ? end : lo);
		size_t cnt = end > lo ? end - lo : 0;
		for (size_t i = 0; i < cnt && npts < MAXPTS; i++) {
			size_t k = cnt <= MAXPTS ? i : i * (cnt - 1) / (MAXPTS - 1);
			pts[npts++] = &f->snaps[lo + k];
			if (cnt > MAXPTS && i == MAXPTS - 1)
				break;
		}
	}
	struct suspect *sus = NULL;
	size_t nsus = 0, capsus = 0, examined = 0;
	double x[MAXPTS], steps[MAXPTS];
	const char *mark = NULL;
	if (npts >= 3) {
		mark = step_mark(pts, npts, steps);
		for (size_t i = 0; i < npts; i++)
			x[i] = (double)pts[i]->elapsed_ms / 3.6e6; /* hours */
		struct smap m = {0};
		for (size_t i = 0; i < npts; i++) {
			size_t nv;
			struct site *v = snap_sites(f, pts[i], &nv);
			for (size_t k = 0; k < nv; k++) {
				const struct site *s = &v[k];
				if (o->kind >= 0 && s->kind != o->kind)
					continue;
				series(&m, s->stack, s->kind)->y[i] = (double)s->live_bytes;
			}
			free(v);
		}
		examined = m.n;
		/* all growth over the window, for each suspect's share */
		double total_growth = 0;
		for (size_t i = 0; i < m.n; i++)
			if (m.v[i].y[npts - 1] > m.v[i].y[0])
				total_growth += m.v[i].y[npts - 1] - m.v[i].y[0];
		for (size_t i = 0; i < m.n; i++) {
			struct ser *s = &m.v[i];
			struct leak_fit fit;
			if (!leak_fit(x, s->y, npts, MIN_GROWTH, &fit))
				continue;
			size_t w0 = fit.w0, n = npts - w0;
			struct suspect best = {
				.stack = s->stack, .kind = s->kind, .per_hour = fit.slope,
				.tau = fit.tau, .growth = fit.growth,
				.share = total_growth > 0 ? fmin(1, fit.growth / total_growth) : 0,
				.live = (int64_t)s->y[npts - 1],
				.per_step = mark ? theil_sen(steps + w0, s->y + w0, n) : NAN,
				.from_ms = pts[w0]->elapsed_ms, .w0 = w0};
			sus = xgrow(sus, nsus + 1, &capsus, sizeof *sus);
			sus[nsus++] = best;
		}
		free(m.v);
		free(m.slot);
		if (nsus)
			xqsort(sus, nsus, sizeof *sus, cmp_suspect);
	}
	if (collect) {
		size_t k = 0;
		for (; k < nsus && k < max; k++)
			collect[k] = (struct leak_row){.stack = sus[k].stack, .kind = sus[k].kind,
						       .per_hour = sus[k].per_hour,
						       .per_step = sus[k].per_step, .live = sus[k].live,
						       .window_ms = npts ? pts[npts - 1]->elapsed_ms -
										  sus[k].from_ms
									 : 0};
		free(sus);
		return k;
	}
	/* The process over the top suspect's window: the suspects' growth
	 * beside the tracked total's and RSS's (Theil-Sen), to tell how much
	 * of the process's growth the suspects explain. */
	double rss_h = NAN, tracked_h = NAN, foot_h = NAN, heap_h = NAN, sus_h = 0;
	int64_t win_ms = 0;
	if (nsus) {
		size_t w0 = sus[0].w0, n = npts - w0;
		double yr[MAXPTS], yt[MAXPTS], yf[MAXPTS], yh[MAXPTS];
		int have_rss = 1, have_foot = 1;
		for (size_t i = 0; i < n; i++) {
			const struct snap *p = pts[w0 + i];
			yr[i] = (double)p->rss_bytes;
			have_rss &= p->rss_bytes >= 0;
			yf[i] = (double)p->alloc_footprint;
			have_foot &= p->alloc_footprint >= 0;
			yt[i] = 0;
			yh[i] = (double)p->tot[K_HEAP].live_bytes;
			for (int k = 0; k < NKINDS; k++)
				if (o->kind < 0 || o->kind == k)
					yt[i] += (double)p->tot[k].live_bytes;
		}
		if (have_rss)
			rss_h = theil_sen(x + w0, yr, n);
		if (have_foot)
			foot_h = theil_sen(x + w0, yf, n);
		tracked_h = theil_sen(x + w0, yt, n);
		heap_h = theil_sen(x + w0, yh, n);
		for (size_t i = 0; i < nsus; i++)
			if (sus[i].w0 == w0)
				sus_h += sus[i].per_hour;
		win_ms = pts[npts - 1]->elapsed_ms - pts[w0]->elapsed_ms;
	}
	if (o->json) {
		if (!first)
			sb_putc(j, ',');
		file_json_head(j, f);
		sb_printf(j, ",\"snapshots_used\":%zu,\"sites_examined\":%zu,\"step_mark\":", npts,
			  examined);
		if (mark)
			sb_json_str(j, mark);
		else
			sb_puts(j, "null");
		if (nsus) {
			sb_printf(j, ",\"window_ms\":%lld,\"suspects_bytes_per_hour\":%.0f,"
				     "\"tracked_bytes_per_hour\":%.0f,\"heap_bytes_per_hour\":%.0f,"
				     "\"rss_bytes_per_hour\":",
				  (long long)win_ms, sus_h, tracked_h, heap_h);
			sb_json_num(j, "%.0f", rss_h);
			sb_puts(j, ",\"allocator_bytes_per_hour\":");
			sb_json_num(j, "%.0f", foot_h);
		}
		sb_puts(j, ",\"suspects\":[");
		for (size_t i = 0; i < nsus && (int)i < o->top; i++) {
			struct suspect *t = &sus[i];
			if (i)
				sb_putc(j, ',');
			sb_printf(j, "{\"rank\":%zu,\"stack\":%lld,\"kind\":\"%s\",\"function\":", i + 1,
				  stack_file_id(f, t->stack), kind_names[t->kind]);
			sb_json_str(j, site_func(f, t->stack, name, sizeof name));
			sb_puts(j, ",\"where\":");
			sb_json_str(j, site_name(f, t->stack, 2, name, sizeof name));
			sb_printf(j, ",\"bytes_per_hour\":%.0f,\"bytes_per_step\":", t->per_hour);
			sb_json_num(j, "%.1f", mark ? t->per_step : NAN);
			sb_printf(j, ",\"fit\":%.3f,\"growth_bytes\":%.0f,\"share\":%.4f,\"live_bytes\":%lld,"
				     "\"grows_from_ms\":%lld,\"frames\":",
				  t->tau, t->growth, t->share, (long long)t->live, (long long)t->from_ms);
			site_json_stack(j, f, t->stack);
			sb_putc(j, '}');
		}
		sb_puts(j, "]}");
	} else {
		file_title(f);
		if (npts < 3) {
			/* say why: how many there were and where they went */
			printf("  too few snapshots to judge growth: %zu in all, %zu in warm-up (the "
			       "first %.0f%% of the run), %zu in teardown (%s), %zu left; need 3: take "
			       "snapshots with MEMTALLY_EVERY or MEMTALLY_INTERVAL\n\n",
			       f->nsnaps, warm, o->warmup * 100, tear,
			       marked ? "after the last step began" : "the fall at the end", npts);
		} else if (!nsus) {
			printf("  no leak suspects: no call site grows steadily (%zu examined, %zu "
			       "snapshots after the first %.0f%%)\n", examined, npts, o->warmup * 100);
			/* leak_fit judges a late start on the window's second
			 * half from 6 snapshots up: with fewer, a leak that
			 * begins after a long start-up (import torch) is
			 * diluted by the flat part and goes unnamed */
			if (npts - npts / 2 < 6)
				printf("  a leak that starts late is judged on the last half of these "
				       "snapshots from 6 up (here %zu): snapshot more often to see one "
				       "(--interval, MEMTALLY_INTERVAL)\n",
				       npts - npts / 2);
			putchar('\n');
		} else {
			printf("  %zu leak suspect%s (%zu call sites, %zu snapshots after the first %.0f%%):\n",
			       nsus, nsus == 1 ? "" : "s", examined, npts, o->warmup * 100);
			printf("  %2s %18s %11s %5s %6s %10s %-5s %s\n", "#", "growth",
			       mark ? "per step" : "", "fit", "share", "live", "kind", "where");
			for (size_t i = 0; i < nsus && (int)i < o->top; i++) {
				struct suspect *t = &sus[i];
				site_name(f, t->stack, 2, name, sizeof name);
				if (!o->stacks)
					site_fit(name, 66);
				char g[48];
				printf("  %2zu %18s %11s %5.2f %5.1f%% %10s %-5s %s\n", i + 1,
				       rate_text(t->per_hour, NAN, pts[npts - 1]->elapsed_ms - t->from_ms, 1, g, sizeof g),
				       mark ? human((int64_t)llround(t->per_step), b) : "", t->tau,
				       t->share * 100, human(t->live, c),
				       t->kind == K_MMAP_FILE ? "mfile" : kind_names[t->kind], name);
				if (o->stacks)
					site_print_stack(stdout, f, t->stack, "       ");
			}
			if (mark)
				printf("  (per step: growth per unit of the mark \"%s\")\n", mark);
			char r1[48], r2[48], r3[48], r4[48];
			printf("  over the top suspect's last %s, %s: suspects %s, all tracked %s, "
			       "allocator footprint %s, RSS %s\n",
			       human_ms(win_ms, a), win_ms >= 3600000 ? "growth" : "grown",
			       rate_text(sus_h, NAN, win_ms, 0, r1, sizeof r1),
			       rate_text(tracked_h, NAN, win_ms, 0, r2, sizeof r2),
			       rate_text(foot_h, NAN, win_ms, 0, r3, sizeof r3),
			       rate_text(rss_h, NAN, win_ms, 0, r4, sizeof r4));
			if (!isnan(foot_h) && foot_h > 1.5 * heap_h && heap_h > 0)
				printf("  (the allocator's footprint grows %.1fx faster than the heap bytes "
				       "live in it: fragmentation)\n", foot_h / heap_h);
			printf("\n");
		}
	}
	free(sus);
	return 0;
}

static void
analyse(struct mfile *f, struct opts *o, struct sb *j, int first) {
	analyse_into(f, o, j, first, NULL, 0);
}

size_t
leak_suspects(struct mfile *f, struct opts *o, struct leak_row *out, size_t max) {
	return analyse_into(f, o, NULL, 1, out, max);
}

int
cmd_leaks(struct opts *o) {
	struct run r;
	run_list(&r, o->paths, o->npaths, 0, 0);
	return each_file(&r, o, "processes", analyse);
}
