/* ranks.c — `memtally ranks`: the ranks (or processes) side by side, as
 * answer_ranks (answer/ranks.c) compares them: exact peaks per kind, what
 * each held at its window's end, peak RSS, growth on one window for all,
 * the outliers named.  This file only prints them.  From 256 ranks the
 * table is a summary (min, median, max of each column) with the outliers'
 * rows first; --all prints every row. */
#include "cmd/cmd.h"
#include "answer/answer.h"
#include "answer/ranks.h"
#include "answer/torchfig.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUMMARY_FROM 256

static const char *
growth_text(const struct rank_row *k, int per_step, char *buf, size_t n) {
	return rate_text(k->growth, per_step ? k->per_step : NAN, (int64_t)k->window_ms, 1, buf, n);
}

static void
row_text(const struct rank_row *k, int per_step) {
	char a[16], b[16], c[16], d[16], e[16], lab[128], gt[48];
	printf("%-22s %10s %10s %10s %10s %10s %18s  %s%s\n", file_label(k->f, lab, sizeof lab),
	       human((int64_t)k->peak_heap, a), human((int64_t)k->peak_mmap, b),
	       human((int64_t)k->final_host, c), human((int64_t)k->peak_dev, d),
	       human((int64_t)k->peak_rss, e), growth_text(k, per_step, gt, sizeof gt),
	       k->out ? "<< outlier: " : "", k->out ? k->why : "");
}

static int
cmp_dbl(const void *x, const void *y) {
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* min, median, max of each column over all ranks */
static void
summary_text(const struct rank_row *v, size_t m) {
	double *c = xmalloc(m * sizeof *c);
	const char *names[] = {"min", "median", "max"};
	for (int q = 0; q < 3; q++) {
		char cells[6][16];
		for (int col = 0; col < 6; col++) {
			for (size_t i = 0; i < m; i++) {
				const struct rank_row *k = &v[i];
				double x[6] = {k->peak_heap, k->peak_mmap, k->final_host, k->peak_dev,
					       k->peak_rss, k->growth};
				c[i] = x[col];
			}
			xqsort(c, m, sizeof *c, cmp_dbl);
			double x = q == 0 ? c[0] : q == 1 ? c[m / 2] : c[m - 1];
			if (col == 5) {
				char t[48];
				snprintf(cells[col], sizeof cells[col], "%s", rate_text(x, NAN, 3600000, 1, t, sizeof t));
			} else {
				human((int64_t)x, cells[col]);
			}
		}
		printf("%-22s %10s %10s %10s %10s %10s %18s\n", names[q], cells[0], cells[1], cells[2],
		       cells[3], cells[4], cells[5]);
	}
	free(c);
}

static void
ranks_json(const struct rank_row *v, size_t m) {
	struct sb j = {0};
	sb_puts(&j, "{\"ranks\":[");
	for (size_t i = 0; i < m; i++) {
		const struct rank_row *k = &v[i];
		if (i)
			sb_putc(&j, ',');
		sb_printf(&j, "{\"rank\":%lld,\"pid\":%lld,\"host\":", (long long)k->f->rank,
			  (long long)k->f->pid);
		sb_json_str(&j, k->f->host);
		sb_puts(&j, ",\"file\":");
		sb_json_str(&j, k->f->path);
		sb_printf(&j, ",\"snapshots\":%zu", k->f->nsnaps);
		sb_printf(&j, ",\"peak_heap_bytes\":%.0f,\"peak_mmap_bytes\":%.0f,\"held_host_bytes\":%.0f,"
			      "\"peak_device_bytes\":%.0f,\"peak_rss_bytes\":%.0f,"
			      "\"growth_bytes_per_hour\":%.0f,\"growth_window_ms\":%.0f,"
			      "\"growth_bytes_per_step\":",
			  k->peak_heap, k->peak_mmap, k->final_host, k->peak_dev, k->peak_rss, k->growth,
			  k->window_ms);
		sb_json_num(&j, "%.0f", k->per_step);
		sb_puts(&j, ",\"window_steps\":");
		sb_json_num(&j, "%.0f", isnan(k->per_step) ? NAN : k->win.step_lo);
		sb_puts(&j, ",\"window_steps_to\":");
		sb_json_num(&j, "%.0f", isnan(k->per_step) ? NAN : k->win.step_hi);
		sb_printf(&j, ",\"z_final\":%.2f,\"z_growth\":%.2f,\"z_rss\":%.2f,\"outlier\":%s",
			  fmax(fmin(k->zf, 1e6), -1e6), fmax(fmin(k->zg, 1e6), -1e6),
			  fmax(fmin(k->zr, 1e6), -1e6), k->out ? "true" : "false");
		struct torchfig tf[MAX_DEVS];
		size_t ntf = answer_torchfigs(k->f, k->win.lo, k->win.end, tf, MAX_DEVS);
		if (ntf) { /* PyTorch's caching allocator over the window */
			sb_puts(&j, ",\"torch\":");
			torchfig_json(&j, tf, ntf);
		}
		sb_putc(&j, '}');
	}
	sb_puts(&j, "],\"outliers\":[");
	int first = 1;
	for (size_t i = 0; i < m; i++)
		if (v[i].out) {
			sb_printf(&j, "%s%lld", first ? "" : ",", (long long)v[i].f->rank);
			first = 0;
		}
	sb_puts(&j, "]}\n");
	fputs(j.p, stdout);
	sb_free(&j);
}

/* PyTorch's caching allocator of each rank over its window: tensors, cache
 * and fragmentation side by side (outliers only past SUMMARY_FROM ranks). */
static void
torch_text(const struct rank_row *v, size_t m, int outliers_only) {
	int head = 0;
	for (size_t i = 0; i < m; i++) {
		struct torchfig t[MAX_DEVS];
		char line[256], lab[128];
		if (outliers_only && !v[i].out)
			continue;
		size_t n = answer_torchfigs(v[i].f, v[i].win.lo, v[i].win.end, t, MAX_DEVS);
		for (size_t q = 0; q < n; q++) {
			if (!head++)
				printf("PyTorch caching allocator on the same window:\n");
			printf("  %-20s %s\n", file_label(v[i].f, lab, sizeof lab),
			       torchfig_text(&t[q], line, sizeof line));
		}
	}
}

static void
ranks_text(const struct rank_row *v, size_t m, size_t skipped, int all) {
	int per_step = 1, outliers = 0;
	for (size_t i = 0; i < m; i++) {
		per_step &= !isnan(v[i].per_step);
		outliers += v[i].out;
	}
	if (m && per_step)
		printf("growth on steps %.0f-%.0f (the steps every rank has, after warm-up)\n",
		       v[0].win.step_lo, v[0].win.step_hi);
	else if (m)
		printf("growth on each rank's run after start-up, before teardown (no step mark)\n");
	printf("%-22s %10s %10s %10s %10s %10s %18s\n", "rank", "peak heap", "peak mmap",
	       "held", "peak dev", "peak rss", "growth");
	if (m >= SUMMARY_FROM && !all) {
		for (size_t i = 0; i < m; i++)
			if (v[i].out)
				row_text(&v[i], per_step);
		summary_text(v, m);
		printf("(%zu ranks: outliers, then min, median and max of each column; --all for every "
		       "rank)\n", m);
	} else {
		for (size_t i = 0; i < m; i++)
			row_text(&v[i], per_step);
	}
	torch_text(v, m, m >= SUMMARY_FROM && !all);
	if (!outliers)
		printf("no rank stands out%s\n", m < 2 ? " (one rank: no comparison)" : "");
	if (skipped)
		printf("(%zu process%s not compared: launchers and helpers such as DataLoader "
		       "workers)\n", skipped,
		       skipped == 1 ? "" : "es");
}

int
cmd_ranks(struct opts *o) {
	struct run r;
	/* totals and marks are all it needs: summaries, read in parallel */
	run_load_summaries(&r, o->paths, o->npaths);
	cmd_native(o, &r);
	struct ranks k;
	size_t m = answer_ranks(&r, o->warmup, &k);
	if (!m)
		die(EXIT_BAD_INPUT, "ranks: no process has a snapshot");
	if (o->json)
		ranks_json(k.v, m);
	else
		ranks_text(k.v, m, k.skipped, o->all);
	ranks_free(&k);
	return 0;
}
