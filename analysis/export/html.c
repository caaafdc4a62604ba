/* html.c — `memtally html RUN_DIR -o report.html`: one self-contained page
 * (data, CSS and JS inline; nothing fetched).  On a run of several
 * processes it opens on a summary, one row per process as `memtally ranks`
 * compares them (answer/ranks.h), the outliers named, and the detail of
 * the first outlier (else of the process that peaked highest).  Per
 * process: a timeline of RSS, PSS, heap, mmap, file mappings, CUDA per
 * device and cgroup usage with snapshot reasons and marks; the timeline by
 * row; the leak suspects (answer_leaks, as `leaks` ranks them) and spikes
 * (answer_spikes, as `report` lists them); the flame graph and the
 * call-site table at the peak (answer.h's moment; a file's FILE@N wins),
 * the table grouped by the user's line (answer_rows) and movable through
 * the kept snapshots; for each OOM dump a segment map coloured by call
 * site and the events before it.  Large runs are cut down here, and the
 * page says so: at most 1000 snapshots a process on the timelines (evenly
 * spaced, the first, last and peak kept), 100 of them in the table's
 * control (TABLE_SNAPS), 1000 rows at the peak and 200 at each snapshot
 * (the rest summed), one flame graph a process (at the opening moment),
 * 20000 segments and events a dump.  Views and exports do not call each
 * other: what a view prints comes from answer/.  Here: the page and each
 * process's data put together, the findings, the flame graph, the dumps
 * and the summary; the time series are html_timeline.c's, the data by
 * call site html_tables.c's (html_int.h). */
#include "cmd/cmd.h"
#include "export/html_int.h"
#include "export/html_join.h"
#include "export/flame.h"
#include "export/html_page.h"
#include "answer/ranks.h"
#include "answer/sites.h"
#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define MAX_SEGS 20000

/* ---- what report and leaks name: spikes and leak suspects ---- */
#define PAGE_SPIKES 20
#define PAGE_LEAKS 10

static void
findings_json(struct sb *j, struct mfile *f, struct opts *o, const struct leaks *l) {
	struct spike sp[PAGE_SPIKES];
	size_t n = answer_spikes(f, &o->ask, sp, PAGE_SPIKES);
	sb_puts(j, ",\"spikes\":[");
	for (size_t i = 0; i < n; i++) {
		sb_puts(j, i ? ",{\"w\":" : "{\"w\":");
		sb_json_str(j, sp[i].r.name);
		sb_printf(j, ",\"k\":\"%s\",\"sites\":%d,\"peak\":%lld,\"live\":%lld,\"ms\":",
			  kind_names[sp[i].r.kind], sp[i].r.nsites, (long long)sp[i].r.peak,
			  (long long)sp[i].r.live);
		sb_json_num(j, "%.0f", sp[i].peak_ms >= 0 ? (double)sp[i].peak_ms : NAN);
		sb_puts(j, ",\"step\":");
		sb_json_num(j, "%.0f", sp[i].step);
		if (sp[i].phase) { /* the phase it was reached in */
			char ph[96];
			sb_puts(j, ",\"ph\":");
			sb_json_str(j, phase_during(f, sp[i].phase, sp[i].step, ph, sizeof ph));
		}
		sb_putc(j, '}');
	}
	spikes_free(sp, n);
	char a[16], g[48], win[96];
	sb_printf(j, "],\"leaks\":{\"points\":%zu,\"examined\":%zu,\"window\":", l->npts, l->examined);
	if (l->mark)
		snprintf(win, sizeof win, "steps %.0f-%.0f, %zu snapshots", l->win.step_lo,
			 l->win.step_hi, l->npts);
	else
		snprintf(win, sizeof win, "%zu snapshots after start-up, before teardown", l->npts);
	sb_json_str(j, win);
	sb_puts(j, ",\"suspects\":[");
	for (size_t i = 0; i < l->n && i < PAGE_LEAKS; i++) {
		const struct leak *t = &l->v[i];
		sb_puts(j, i ? ",{\"w\":" : "{\"w\":");
		sb_json_str(j, t->r.name);
		sb_printf(j, ",\"k\":\"%s\",\"sites\":%d,\"growth\":", kind_names[t->r.kind],
			  t->r.nsites);
		sb_json_str(j, rate_text(t->per_hour, NAN, l->pts[l->npts - 1]->elapsed_ms - t->from_ms,
					 1, g, sizeof g));
		sb_puts(j, ",\"per_step\":");
		sb_json_str(j, l->mark ? human((int64_t)llround(t->per_step), a) : "");
		sb_printf(j, ",\"fit\":%.2f,\"share\":%.4f,\"live\":%lld", t->tau, t->share,
			  (long long)t->r.live);
		const struct kept *k = answer_kept(f, &o->ask, &t->r);
		if (k) { /* why it is still alive, as leaks prints it */
			struct sb b = {0};
			kept_chain_text(&b, k);
			sb_puts(j, ",\"kept\":");
			sb_json_str(j, b.p);
			free(b.p);
		} else { /* why not, as leaks says it */
			char why[300];
			if (answer_unkept(f, l, t, why, sizeof why)) {
				sb_puts(j, ",\"unkept\":");
				sb_json_str(j, why);
			}
		}
		sb_putc(j, '}');
	}
	sb_printf(j, "],\"more\":%zu}", l->n > PAGE_LEAKS ? l->n - PAGE_LEAKS : 0);
}

/* The flame graph at the moment the page opens on (the peak, or the
 * file's own FILE@N); it does not follow the snapshot control. */
static void
flame_json(struct sb *j, struct mfile *f, struct opts *o, const char *lab) {
	struct fnode *root = flame_new();
	if (f->nsnaps) {
		const struct snap *s;
		int at_peak;
		size_t nv;
		struct site *v = answer_sites(f, &o->ask, &s, &at_peak, &nv);
		flame_add_sites(root, f, v, nv, "live", NULL, o->ask.kind);
		free(v);
	}
	struct sb svg = {0};
	char title[200];
	snprintf(title, sizeof title, "%s: live memory by call site %s", lab,
		 answer_moment_name(f, &o->ask));
	flame_svg(&svg, root, title, "live", 1100, 0);
	sb_puts(j, ",\"flame\":");
	sb_json_str(j, svg.p);
	sb_puts(j, ",\"flame_moment\":");
	sb_json_str(j, answer_moment_name(f, &o->ask));
	sb_free(&svg);
	flame_free(root);
}

static void
process_json(struct sb *j, struct mfile *f, struct opts *o) {
	char lab[128];
	sb_puts(j, "{\"label\":");
	sb_json_str(j, file_label(f, lab, sizeof lab));
	sb_puts(j, ",\"argv\":");
	sb_json_str(j, f->argv);
	sb_printf(j, ",\"rank\":%lld,\"pid\":%lld", (long long)f->rank, (long long)f->pid);
	size_t *idx = xmalloc((f->nsnaps + 1) * sizeof *idx), m = html_kept_snaps(f, idx);
	html_series_json(j, f, idx, m);
	struct leaks lk;
	answer_leaks(f, &o->ask, &lk);
	html_stack_json(j, f, &lk, idx, m);
	html_growth_start(j, f);
	html_phases_json(j, f);
	html_moments_json(j, f, o, idx, m);
	free(idx);
	findings_json(j, f, o, &lk);
	leaks_free(&lk);
	flame_json(j, f, o, lab);
	sb_putc(j, '}');
}

static void
dump_json(struct sb *j, struct mfile *f) {
	const struct oominfo *m = f->oom;
	char lab[128], a[16], b[16], name[512];
	if (!m)
		return;
	struct sb t = {0};
	sb_printf(&t, "%s: %s OOM, %s(%s) failed with %s at %.2f s", file_label(f, lab, sizeof lab),
		  m->kind, m->api, human_u64(m->requested, a), m->error, (double)m->elapsed_ms / 1000);
	sb_puts(j, "{\"title\":");
	sb_json_str(j, t.p);
	sb_free(&t);
	int64_t live = 0;
	for (size_t i = 0; i < f->nsegs; i++)
		if (!f->segs[i].mapped)
			live += (int64_t)f->segs[i].size;
	sb_printf(&t, "%zu segments, %s live", f->nsegs, human(live, a));
	if (m->drv_total > 0)
		sb_printf(&t, "; driver free %s of %s", human(m->drv_free, a), human(m->drv_total, b));
	if (f->nsegs > MAX_SEGS)
		sb_printf(&t, "; the %d largest segments shown", MAX_SEGS);
	sb_puts(j, ",\"what\":");
	sb_json_str(j, t.p);
	sb_free(&t);
	sb_puts(j, ",\"segments\":[");
	for (size_t i = 0, shown = 0; i < f->nsegs && shown < MAX_SEGS; i++, shown++) {
		const struct segment *s = &f->segs[i];
		sb_printf(j, "%s{\"addr\":\"0x%llx\",\"size\":%llu,\"dev\":%d,\"mapped\":%s,\"fn\":", i ? "," : "",
			  (unsigned long long)s->addr, (unsigned long long)s->size, s->device,
			  s->mapped ? "true" : "false");
		sb_json_str(j, site_func(f, s->stack, name, sizeof name));
		sb_putc(j, '}');
	}
	sb_puts(j, "],\"events\":[");
	size_t e0 = f->nevents > MAX_SEGS ? f->nevents - MAX_SEGS : 0;
	for (size_t i = e0; i < f->nevents; i++) {
		const struct event *e = &f->events[i];
		sb_printf(j, "%s{\"t\":%lld,\"op\":", i > e0 ? "," : "", (long long)e->time_ms);
		sb_json_str(j, e->op);
		sb_printf(j, ",\"size\":%llu}", (unsigned long long)e->size);
	}
	sb_puts(j, "]}");
}

/* ---- a multi-process run: one row per process, as `memtally ranks`
 * compares them (answer/ranks.h), the page opening on the first outlier,
 * else on the compared process that peaked highest ---- */
static void
summary_json(struct sb *j, struct run *r, struct opts *o) {
	struct ranks k;
	size_t m = answer_ranks(r, o->warmup, &k);
	char a[48];
	sb_puts(j, ",\"summary\":{\"window\":");
	if (m && k.per_step) {
		snprintf(a, sizeof a, "steps %.0f-%.0f", k.v[0].win.step_lo, k.v[0].win.step_hi);
		sb_json_str(j, a);
	} else {
		sb_json_str(j, "each process's run after start-up, before teardown (no step mark)");
	}
	sb_printf(j, ",\"compared\":%zu,\"skipped\":%zu,\"rows\":[", m, k.skipped);
	size_t open = 0;
	double most = -1;
	int outlier = 0;
	for (size_t i = 0; i < k.n; i++) {
		const struct rank_row *w = &k.v[i];
		char lab[128];
		if (w->compared && !outlier && (w->out || w->peak_heap + w->peak_mmap + w->peak_dev > most)) {
			open = w->file;
			most = w->peak_heap + w->peak_mmap + w->peak_dev;
			outlier = w->out;
		}
		sb_printf(j, "%s{\"p\":%zu,\"label\":", i ? "," : "", w->file);
		sb_json_str(j, file_label(w->f, lab, sizeof lab));
		sb_puts(j, ",\"argv\":");
		sb_json_str(j, w->f->argv);
		sb_printf(j, ",\"rank\":%lld,\"compared\":%s,\"heap\":%.0f,\"mmap\":%.0f,\"dev\":%.0f,"
			     "\"held\":%.0f,\"rss\":%.0f,\"growth\":",
			  (long long)w->f->rank, w->compared ? "true" : "false", w->peak_heap,
			  w->peak_mmap, w->peak_dev, w->final_host, fmax(w->peak_rss, 0));
		sb_json_str(j, w->compared ? rate_text(w->growth, k.per_step ? w->per_step : NAN,
						       (int64_t)w->window_ms, 1, a, sizeof a)
					   : "");
		sb_printf(j, ",\"out\":%s,\"why\":", w->out ? "true" : "false");
		sb_json_str(j, w->out ? w->why : "");
		sb_putc(j, '}');
	}
	sb_printf(j, "],\"open\":%zu}", open);
	ranks_free(&k);
}

int
cmd_html(struct opts *o) {
	struct run r, d;
	cmd_load(o, &r);
	run_load_dumps_if_any(&d, o->paths, o->npaths);
	cmd_native(o, &d);
	struct sb j = {0};
	sb_puts(&j, "{\"processes\":[");
	for (size_t i = 0; i < r.nfiles; i++) {
		if (i)
			sb_putc(&j, ',');
		process_json(&j, &r.files[i], o);
	}
	sb_puts(&j, "],\"dumps\":[");
	for (size_t i = 0; i < d.nfiles; i++) {
		if (i)
			sb_putc(&j, ',');
		dump_json(&j, &d.files[i]);
	}
	sb_puts(&j, "]");
	if (r.nfiles > 1)
		summary_json(&j, &r, o);
	sb_puts(&j, "}");
	struct sb page = {0};
	sb_puts(&page, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memtally report</title>"
		       "<style>");
	sb_puts(&page, html_css);
	sb_puts(&page, "</style></head><body>\n<h1>memtally report</h1>\n<pre id=\"errors\"></pre>\n"
		       "<div id=\"summary\"></div>\n"
		       "<h2 id=\"detail\">Process</h2><select id=\"proc\"></select>\n"
		       "<h2>Timeline</h2><div id=\"timeline\"></div>\n"
		       "<h2>Live memory by call site</h2><div class=\"note\">Stacked: the call sites "
		       "that held the most, the rest as other; leak suspects outlined in red. Hover "
		       "for the site and bytes, click for its stack.</div><div id=\"stacked\"></div>\n"
		       "<h2>Leak suspects and spikes</h2><div id=\"findings\"></div>\n"
		       "<h2>Flame graph</h2><div class=\"note\" id=\"flame-note\"></div><div id=\"flame\"></div>\n"
		       "<h2>Call sites</h2><div id=\"moment\"></div><div id=\"table\"></div>\n"
		       "<h2>OOM dumps</h2><div id=\"dumps\"></div>\n"
		       "<script id=\"mt-data\" type=\"application/json\">");
	/* Every '<' (only ever inside a JSON string) as \u003c: "</script>"
	 * would end the data, and "<!--<script>" anywhere swallowed the
	 * page's own script (HTML's script-data escape states). */
	for (size_t i = 0; i < j.len; i++) {
		if (j.p[i] == '<')
			sb_puts(&page, "\\u003c");
		else
			sb_putc(&page, j.p[i]);
	}
	sb_puts(&page, "</script>\n<script>\n");
	sb_puts(&page, flame_js);
	sb_puts(&page, "\n");
	sb_puts(&page, html_js);
	sb_puts(&page, "</script>\n");
	html_join(&page, &d); /* CUDA dumps with PyTorch's snapshot beside them */
	sb_puts(&page, "</body></html>\n");
	write_output(o->out, page.p, page.len);
	fprintf(stderr, "memtally: wrote %s\n", o->out);
	sb_free(&j);
	sb_free(&page);
	return 0;
}
