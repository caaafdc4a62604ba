/* leaks.c — `memtally leaks`: rows ranked by sustained growth, as
 * answer_leaks (answer/growth.c) finds them on the growth window
 * (answer/window.c); this file only prints them. */
#include "cmd/cmd.h"
#include "answer/torchfig.h"
#include "answer/answer.h"
#include "answer/sites.h"
#include "answer/procs.h"
#include "base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void follow_json(struct mfile *f, struct sb *j, const struct leaks *l);

static void
leaks_json(struct mfile *f, struct opts *o, struct sb *j, int first, const struct leaks *l) {
	char name[512];
	if (!first)
		sb_putc(j, ',');
	file_json_head(j, f);
	sb_printf(j, ",\"snapshots_used\":%zu,\"rows_examined\":%zu,\"step_mark\":", l->npts,
		  l->examined);
	if (l->mark)
		sb_json_str(j, l->mark);
	else
		sb_puts(j, "null");
	sb_printf(j, ",\"window\":{\"from_seq\":%lld,\"to_seq\":%lld,\"by_step\":%s",
		  l->npts ? (long long)l->pts[0]->seq : -1LL,
		  l->npts ? (long long)l->pts[l->npts - 1]->seq : -1LL, l->win.by_step ? "true" : "false");
	sb_puts(j, ",\"from_step\":");
	sb_json_num(j, "%.0f", l->npts && l->mark ? l->win.step_lo : NAN);
	sb_puts(j, ",\"to_step\":");
	sb_json_num(j, "%.0f", l->npts && l->mark ? l->win.step_hi : NAN);
	sb_putc(j, '}');
	if (l->n) {
		sb_printf(j, ",\"window_ms\":%lld,\"suspects_bytes_per_hour\":%.0f,"
			     "\"tracked_bytes_per_hour\":%.0f,\"heap_bytes_per_hour\":%.0f,"
			     "\"rss_bytes_per_hour\":",
			  (long long)l->win_ms, l->sus_h, l->tracked_h, l->heap_h);
		sb_json_num(j, "%.0f", l->rss_h);
		sb_puts(j, ",\"allocator_bytes_per_hour\":");
		sb_json_num(j, "%.0f", l->foot_h);
		sb_printf(j, ",\"fragmentation\":%s", l->frag ? "true" : "false");
	}
	follow_json(f, j, l);
	sb_puts(j, ",\"suspects\":[");
	for (size_t i = 0; i < l->n && (int)i < o->top; i++) {
		const struct leak *t = &l->v[i];
		if (i)
			sb_putc(j, ',');
		sb_printf(j, "{\"rank\":%zu,\"stack\":%lld,\"kind\":\"%s\",\"sites\":%d,\"function\":",
			  i + 1, stack_file_id(f, t->r.stack), kind_names[t->r.kind], t->r.nsites);
		sb_json_str(j, site_func(f, t->r.stack, name, sizeof name));
		sb_puts(j, ",\"where\":");
		sb_json_str(j, t->r.name);
		sb_printf(j, ",\"bytes_per_hour\":%.0f,\"bytes_per_step\":", t->per_hour);
		sb_json_num(j, "%.1f", l->mark ? t->per_step : NAN);
		sb_printf(j, ",\"fit\":%.3f,\"growth_bytes\":%.0f,\"share\":%.4f,\"live_bytes\":%lld,"
			     "\"grows_from_ms\":%lld,\"frames\":",
			  t->tau, t->growth, t->share, (long long)t->r.live, (long long)t->from_ms);
		site_json_stack(j, f, t->r.stack);
		/* why it is still alive: the Python hook's chain, or null */
		const struct kept *k = answer_kept(f, &o->ask, &t->r);
		sb_puts(j, ",\"kept_by\":");
		if (k)
			kept_chain_json(j, k);
		else
			sb_puts(j, "null");
		char why[300];
		const char *c = k ? NULL : answer_unkept(f, l, t, why, sizeof why);
		if (c) { /* why not: which case, and the sentence */
			sb_printf(j, ",\"kept_why\":{\"case\":\"%s\",\"text\":", c);
			sb_json_str(j, why);
			sb_putc(j, '}');
		}
		sb_putc(j, '}');
	}
	sb_putc(j, ']');
	struct torchfig tf[MAX_DEVS];
	size_t ntf = answer_torchfigs(f, l->win.lo, l->win.end, tf, MAX_DEVS);
	if (ntf) { /* PyTorch's caching allocator over the window */
		sb_puts(j, ",\"torch\":");
		torchfig_json(j, tf, ntf);
	}
	sb_putc(j, '}');
}

/* Why there is nothing to judge: how many snapshots there were and where
 * they went. */
static void
too_few(const struct mfile *f, const struct opts *o, const struct leaks *l) {
	printf("  too few snapshots to judge growth: %zu in all, %zu in start-up (the first %.0f%% "
	       "of the %s), %zu in teardown (%s), %zu left; need 3: take snapshots with "
	       "MEMTALLY_EVERY, MEMTALLY_INTERVAL or MEMTALLY_STEPS\n\n",
	       f->nsnaps, l->win.warm, o->warmup * 100, l->win.by_step ? "steps" : "run",
	       l->win.tear, l->win.by_step ? "after the last step began" : "the fall at the end",
	       l->npts);
}

static void
window_text(const struct leaks *l, char *buf, size_t n) {
	if (l->mark)
		snprintf(buf, n, "steps %.0f-%.0f, %zu snapshots", l->win.step_lo, l->win.step_hi,
			 l->npts);
	else
		snprintf(buf, n, "%zu snapshots after start-up, before teardown", l->npts);
}

/* PyTorch's caching allocator over the growth window: tensors told from
 * the cache and its fragmentation. */
static void
torch_text(const struct mfile *f, const struct leaks *l) {
	struct torchfig t[MAX_DEVS];
	char line[256];
	size_t n = answer_torchfigs(f, l->win.lo, l->win.end, t, MAX_DEVS);
	for (size_t i = 0; i < n; i++)
		printf("  PyTorch caching allocator over the window, %s\n",
		       torchfig_text(&t[i], line, sizeof line));
}

/* Rows that grew with the step's workload (answer/growth.c: follows),
 * each with its fit: not suspects. */
static void
follow_text(const struct leaks *l, const struct opts *o) {
	char name[1100], a[16], b[16], c[16];
	if (!l->nfollow)
		return;
	printf("  follows the workload, not a leak: %zu row%s whose live bytes follow the "
	       "step's workload:\n", l->nfollow, l->nfollow == 1 ? "" : "s");
	for (size_t i = 0; i < l->nfollow && (int)i < o->top; i++) {
		const struct leak *t = &l->follow[i];
		site_row_name(&(struct site_row){.name = t->r.name, .nsites = t->r.nsites}, 66,
			      o->stacks, name, sizeof name);
		printf("  %10s %-5s %s\n", human(t->r.live, a),
		       t->r.kind == K_MMAP_FILE ? "mfile" : kind_names[t->r.kind], name);
		printf("       follows the workload: live = %s x %s %s %s (R^2 %.2f; "
		       "growth beyond it %s)\n", human((int64_t)llround(t->wf.per), b), t->wf.on,
		       t->wf.icpt < 0 ? "-" : "+", human((int64_t)llround(fabs(t->wf.icpt)), c),
		       t->wf.r2, human((int64_t)llround(fmax(0, t->wf.beyond)), a));
	}
}

static void
follow_json(struct mfile *f, struct sb *j, const struct leaks *l) {
	char name[512];
	sb_puts(j, ",\"follows_workload\":[");
	for (size_t i = 0; i < l->nfollow; i++) {
		const struct leak *t = &l->follow[i];
		sb_puts(j, i ? ",{\"function\":" : "{\"function\":");
		sb_json_str(j, site_func(f, t->r.stack, name, sizeof name));
		sb_puts(j, ",\"where\":");
		sb_json_str(j, t->r.name);
		sb_printf(j, ",\"stack\":%lld,\"kind\":\"%s\",\"live_bytes\":%lld,"
			     "\"growth_bytes\":%.0f,\"follows\":\"workload\",\"on\":",
			  stack_file_id(f, t->r.stack), kind_names[t->r.kind], (long long)t->r.live,
			  t->growth);
		sb_json_str(j, t->wf.on);
		sb_printf(j, ",\"bytes_per_unit\":%.3f,\"intercept_bytes\":%.0f,\"r2\":%.4f,"
			     "\"beyond_bytes\":%.0f}", t->wf.per, t->wf.icpt, t->wf.r2, t->wf.beyond);
	}
	sb_putc(j, ']');
}

static void
leaks_text(struct mfile *f, struct opts *o, const struct leaks *l) {
	char a[16], b[16], c[16], name[1100], win[96];
	file_title(f);
	if (l->npts < 3) {
		too_few(f, o, l);
		return;
	}
	window_text(l, win, sizeof win);
	if (!l->n) {
		printf("  no leak suspects: nothing grows steadily (%zu rows examined, %s)\n",
		       l->examined, win);
		follow_text(l, o);
		if (l->npts - l->npts / 2 < 6)
			printf("  a leak that starts late is judged on the last half of these "
			       "snapshots from 6 up (here %zu): snapshot more often to see one "
			       "(--interval, MEMTALLY_INTERVAL, MEMTALLY_STEPS)\n",
			       l->npts - l->npts / 2);
		torch_text(f, l);
		putchar('\n');
		return;
	}
	printf("  %zu leak suspect%s (%zu rows examined, %s):\n", l->n, l->n == 1 ? "" : "s",
	       l->examined, win);
	printf("  %2s %18s %11s %5s %6s %10s %-5s %s\n", "#", "growth", l->mark ? "per step" : "",
	       "fit", "share", "live", "kind", "where");
	for (size_t i = 0; i < l->n && (int)i < o->top; i++) {
		const struct leak *t = &l->v[i];
		site_row_name(&(struct site_row){.name = t->r.name, .nsites = t->r.nsites}, 66,
			      o->stacks, name, sizeof name);
		char g[48];
		printf("  %2zu %18s %11s %5.2f %5.1f%% %10s %-5s %s\n", i + 1,
		       rate_text(t->per_hour, NAN, l->pts[l->npts - 1]->elapsed_ms - t->from_ms, 1, g,
				 sizeof g),
		       l->mark ? human((int64_t)llround(t->per_step), b) : "", t->tau, t->share * 100,
		       human(t->r.live, c), t->r.kind == K_MMAP_FILE ? "mfile" : kind_names[t->r.kind],
		       name);
		if (o->stacks)
			site_print_stack(stdout, f, t->r.stack, "       ");
		const struct kept *k = answer_kept(f, &o->ask, &t->r);
		if (k) {
			struct sb chain = {0};
			kept_chain_text(&chain, k);
			printf("       kept alive by: %s\n", chain.p);
			free(chain.p);
		} else {
			char why[300];
			if (answer_unkept(f, l, t, why, sizeof why))
				printf("       no chain: %s\n", why);
		}
	}
	if (l->mark)
		printf("  (per step: growth per unit of the mark \"%s\")\n", l->mark);
	follow_text(l, o);
	char r1[48], r2[48], r3[48], r4[48];
	printf("  over the top suspect's last %s, %s: suspects %s, all tracked %s, "
	       "allocator footprint %s, RSS %s\n",
	       human_ms(l->win_ms, a), l->win_ms >= 3600000 ? "growth" : "grown",
	       rate_text(l->sus_h, NAN, l->win_ms, 0, r1, sizeof r1),
	       rate_text(l->tracked_h, NAN, l->win_ms, 0, r2, sizeof r2),
	       rate_text(l->foot_h, NAN, l->win_ms, 0, r3, sizeof r3),
	       rate_text(l->rss_h, NAN, l->win_ms, 0, r4, sizeof r4));
	if (l->frag)
		printf("  (the allocator's footprint grows %.1fx faster than the heap bytes "
		       "live in it: fragmentation)\n", l->foot_h / l->heap_h);
	torch_text(f, l);
	printf("\n");
}

static void
one_file(struct mfile *f, struct opts *o, struct sb *j, int first) {
	struct leaks l;
	answer_leaks(f, &o->ask, &l);
	if (o->json)
		leaks_json(f, o, j, first, &l);
	else
		leaks_text(f, o, &l);
	leaks_free(&l);
}

/* A helper's growth that is worth its own section: a suspect grew this
 * much over the window. */
#define HELPER_GROWTH (4ll << 20)

/* One process's section, printed into memory (stdout swapped for the
 * while: text_safe's escaping applies when it is printed). */
struct section {
	struct proc_facts facts;
	char *text;
	size_t len;
	size_t suspects;
	double growth; /* the largest suspect's growth, bytes */
};

static void
section_of(struct mfile *f, struct opts *o, struct section *sec) {
	struct leaks l;
	answer_leaks(f, &o->ask, &l);
	proc_facts(f, &sec->facts);
	proc_growth(&l, &sec->facts);
	sec->suspects = l.n;
	sec->growth = 0;
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].growth > sec->growth)
			sec->growth = l.v[i].growth;
	FILE *saved = stdout, *mem = open_memstream(&sec->text, &sec->len);
	if (!mem)
		die(EXIT_BAD_INPUT, "open_memstream: out of memory");
	stdout = mem; /* glibc: stdout is an assignable FILE * */
	leaks_text(f, o, &l);
	fclose(mem);
	stdout = saved;
	leaks_free(&l);
}

/* Text: the processes that matter, each its section; helpers (answer/
 * procs.c) a line a group, unless one grows by a material amount or
 * --all-processes asks for every one in full. */
static int
leaks_run(struct run *r, struct opts *o) {
	struct section *v = NULL;
	size_t n = 0, cap = 0;
	struct mfile f;
	while (run_next(r, &f)) {
		v = xgrow(v, n + 1, &cap, sizeof *v);
		section_of(&f, o, &v[n++]);
		mfile_free(&f);
	}
	struct proc_facts *facts = xmalloc((n ? n : 1) * sizeof *facts);
	int *role = xmalloc((n ? n : 1) * sizeof *role);
	for (size_t i = 0; i < n; i++)
		facts[i] = v[i].facts;
	procs_classify(facts, n, role);
	for (size_t i = 0; i < n; i++)
		if (o->all_processes || (role[i] != ROLE_MAIN && v[i].growth >= HELPER_GROWTH))
			role[i] = ROLE_MAIN;
	for (size_t i = 0; i < n; i++)
		if (role[i] == ROLE_MAIN)
			fwrite(v[i].text, 1, v[i].len, stdout);
	for (int g = ROLE_DATALOADER; g < NROLES; g++) {
		size_t m = 0, growing = 0;
		for (size_t i = 0; i < n; i++)
			if (role[i] == g) {
				m++;
				growing += v[i].suspects > 0;
			}
		if (!m)
			continue;
		char line[256], grow[400];
		role_summary(facts, role, n, g, line, sizeof line);
		if (growing)
			printf("%s%s; nothing material (--all-processes: each in full)\n", line,
			       role_growth(facts, role, n, g, grow, sizeof grow));
		else
			printf("%s; nothing grows (--all-processes: each in full)\n", line);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(v);
	free(facts);
	free(role);
	return 0;
}

int
cmd_leaks(struct opts *o) {
	struct run r;
	cmd_list(o, &r, 0); /* read one at a time */
	if (!o->json)
		return leaks_run(&r, o);
	return each_file(&r, o, "processes", one_file);
}
