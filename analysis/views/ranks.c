/* ranks.c — `memtally ranks`: per rank (or process), peak and final live
 * host bytes (heap + mmap), device bytes, RSS and growth rate side by
 * side; a rank whose final live bytes, growth or peak RSS has a robust
 * z-score (median and MAD over all ranks) beyond 3.5 is named.  Growth is
 * the Theil-Sen slope over the second half of the run, teardown left out.  With two
 * ranks there is no spread to measure: one is named when it grows 4 times
 * as fast as the other (and 64 MiB/h more) or ends holding twice as much
 * (and 64 MiB more). */
#include "cmd.h"
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rk {
	const struct mfile *f;
	double peak_host, final_host, peak_dev, final_dev, peak_rss, final_rss, growth;
	double per_step;   /* growth per unit of the step mark; NAN: no mark */
	double window_h;   /* the window growth is measured on, in hours */
};

static int
cmp_rank(const void *x, const void *y) {
	const struct rk *a = x, *b = y;
	if (a->f->rank != b->f->rank)
		return a->f->rank < b->f->rank ? -1 : 1;
	return a->f->pid < b->f->pid ? -1 : a->f->pid > b->f->pid;
}

static double
host_live(const struct snap *s) {
	return (double)(s->tot[K_HEAP].live_bytes + s->tot[K_MMAP].live_bytes);
}

static double
dev_live(const struct snap *s) {
	return (double)(s->tot[K_CUDA].live_bytes + s->tot[K_CUDA_MANAGED].live_bytes +
			s->tot[K_CUDA_VMM].live_bytes);
}

int
cmd_ranks(struct opts *o) {
	struct run r;
	run_load(&r, o->paths, o->npaths);
	size_t n = r.nfiles;
	struct rk *v = xcalloc(n, sizeof *v);
	size_t m = 0, ranked = 0, skipped = 0;
	for (size_t i = 0; i < n; i++)
		ranked += r.files[i].rank >= 0;
	for (size_t i = 0; i < n; i++) {
		const struct mfile *f = &r.files[i];
		if (!f->nsnaps || (ranked && f->rank < 0)) { /* launchers, helpers */
			skipped += ranked && f->rank < 0;
			continue;
		}
		struct rk *k = &v[m++];
		k->f = f;
		double *x = xmalloc(f->nsnaps * sizeof *x), *y = xmalloc(f->nsnaps * sizeof *y),
		       *st = xmalloc(f->nsnaps * sizeof *st);
		const char *mk = f->snaps[f->nsnaps - 1].nmarks ? f->snaps[f->nsnaps - 1].marks[0].name : NULL;
		for (size_t s = 0; s < f->nsnaps; s++) {
			const struct snap *sn = &f->snaps[s];
			double h = host_live(sn), d = dev_live(sn);
			k->peak_host = fmax(k->peak_host, h);
			k->peak_dev = fmax(k->peak_dev, d);
			k->peak_rss = fmax(k->peak_rss, (double)sn->rss_bytes);
			x[s] = (double)sn->elapsed_ms / 3.6e6;
			y[s] = h + d;
			st[s] = NAN;
			for (int q = 0; mk && q < sn->nmarks; q++)
				if (!strcmp(sn->marks[q].name, mk))
					st[s] = sn->marks[q].value;
		}
		const struct snap *last = &f->snaps[f->nsnaps - 1];
		k->final_host = host_live(last);
		k->final_dev = dev_live(last);
		k->final_rss = (double)last->rss_bytes;
		/* growth: over the second half of the run, without the teardown
		 * (teardown_end), so start-up and exit do not blur a rank's
		 * steady rate */
		size_t end = teardown_end(y, 0, f->nsnaps);
		size_t from = end / 2;
		k->growth = end - from >= 3 ? theil_sen(x + from, y + from, end - from) : 0;
		k->window_h = end > from ? x[end - 1] - x[from] : 0;
		int marked = mk && end - from >= 3;
		for (size_t q = from; q < end && marked; q++)
			marked = !isnan(st[q]);
		k->per_step = marked && st[end - 1] > st[from] ? theil_sen(st + from, y + from, end - from) : NAN;
		free(x);
		free(y);
		free(st);
	}
	if (!m)
		die(EXIT_BAD_INPUT, "ranks: no process has a snapshot");
	xqsort(v, m, sizeof *v, cmp_rank);
	double *fin = xmalloc(m * sizeof *fin), *gro = xmalloc(m * sizeof *gro),
	       *rss = xmalloc(m * sizeof *rss), *zf = xmalloc(m * sizeof *zf),
	       *zg = xmalloc(m * sizeof *zg), *zr = xmalloc(m * sizeof *zr);
	for (size_t i = 0; i < m; i++) {
		fin[i] = v[i].final_host + v[i].final_dev;
		gro[i] = v[i].growth;
		rss[i] = v[i].peak_rss;
	}
	robust_z(fin, m, zf);
	robust_z(gro, m, zg);
	robust_z(rss, m, zr);
	if (m == 2) {
		/* Two ranks give no spread to measure: one is named when it
		 * grows at least 4 times as fast as the other and by 64 MiB/h
		 * more, or ends holding twice as much and 64 MiB more. */
		for (int i = 0; i < 2; i++) {
			double g = gro[i], go = gro[1 - i], f = fin[i], fo = fin[1 - i];
			zg[i] = g > 4 * fmax(go, 0) && g - go > 64.0 * (1 << 20) ? 1e9 : 0;
			zf[i] = f > 2 * fo && f - fo > 64.0 * (1 << 20) ? 1e9 : 0;
			zr[i] = 0;
		}
	}
	struct sb j = {0};
	char a[16], b[16], c[16], d[16], e[16], g[16], lab[128];
	if (o->json)
		sb_puts(&j, "{\"ranks\":[");
	else
		printf("%-22s %10s %10s %10s %10s %10s %18s  %s\n", "rank", "peak host", "final host",
		       "peak dev", "final dev", "peak rss", "growth", "");
	int outliers = 0, per_step = 1;
	for (size_t i = 0; i < m; i++)
		per_step &= !isnan(v[i].per_step);
	for (size_t i = 0; i < m; i++) {
		struct rk *k = &v[i];
		double z = fabs(zf[i]) > fabs(zg[i]) ? zf[i] : zg[i];
		if (fabs(zr[i]) > fabs(z))
			z = zr[i];
		int out = m >= 2 && fabs(z) > 3.5;
		outliers += out;
		const char *why = fabs(zg[i]) > 3.5 ? "growth" : fabs(zf[i]) > 3.5 ? "final live" : "peak rss";
		if (!isnan(k->per_step))
			snprintf(g, sizeof g, "%.0f", k->per_step);
		if (o->json) {
			if (i)
				sb_putc(&j, ',');
			sb_printf(&j, "{\"rank\":%lld,\"pid\":%lld,\"host\":", (long long)k->f->rank,
				  (long long)k->f->pid);
			sb_json_str(&j, k->f->host);
			sb_puts(&j, ",\"file\":");
			sb_json_str(&j, k->f->path);
			sb_printf(&j, ",\"peak_host_bytes\":%.0f,\"final_host_bytes\":%.0f,"
				      "\"peak_device_bytes\":%.0f,\"final_device_bytes\":%.0f,"
				      "\"peak_rss_bytes\":%.0f,\"growth_bytes_per_hour\":%.0f,"
				      "\"growth_window_ms\":%.0f,\"growth_bytes_per_step\":%s,"
				      "\"z_final\":%.2f,\"z_growth\":%.2f,\"z_rss\":%.2f,\"outlier\":%s}",
				  k->peak_host, k->final_host, k->peak_dev, k->final_dev, k->peak_rss,
				  k->growth, k->window_h * 3.6e6, isnan(k->per_step) ? "null" : g, fmax(fmin(zf[i], 1e6), -1e6), fmax(fmin(zg[i], 1e6), -1e6),
				  fmax(fmin(zr[i], 1e6), -1e6), out ? "true" : "false");
		} else {
			char gt[48];
			printf("%-22s %10s %10s %10s %10s %10s %18s  %s%s\n",
			       file_label(k->f, lab, sizeof lab), human((int64_t)k->peak_host, a),
			       human((int64_t)k->final_host, b), human((int64_t)k->peak_dev, c),
			       human((int64_t)k->final_dev, d), human((int64_t)k->peak_rss, e),
			       rate_text(k->growth, per_step ? k->per_step : NAN,
					 (int64_t)(k->window_h * 3.6e6), 1, gt, sizeof gt), out ? "<< outlier: " : "", out ? why : "");
		}
	}
	if (o->json) {
		sb_puts(&j, "],\"outliers\":[");
		int first = 1;
		for (size_t i = 0; i < m; i++) {
			double z = fmax(fabs(zf[i]), fmax(fabs(zg[i]), fabs(zr[i])));
			if (m >= 2 && z > 3.5) {
				sb_printf(&j, "%s%lld", first ? "" : ",", (long long)v[i].f->rank);
				first = 0;
			}
		}
		sb_puts(&j, "]}\n");
		fputs(j.p, stdout);
		sb_free(&j);
	} else {
		if (!outliers)
			printf("no rank stands out%s\n", m < 2 ? " (one rank: no comparison)" : "");
		if (skipped)
			printf("(%zu process%s without a rank, e.g. the launcher, not compared)\n",
			       skipped, skipped == 1 ? "" : "es");
	}
	free(fin), free(gro), free(rss), free(zf), free(zg), free(zr), free(v);
	return 0;
}
