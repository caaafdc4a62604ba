/* html.c — `memtally html RUN_DIR -o report.html`: one self-contained page
 * (data, CSS and JS inline; nothing fetched): per process a timeline of
 * RSS, PSS, heap, mmap, file mappings, CUDA per device and cgroup usage
 * with snapshot reasons and marks; the call-site table (sortable,
 * searchable, stacks expandable); the flame graph; for each OOM dump a
 * segment map coloured by call site and the events before it; a process
 * (rank) selector.  Large runs are cut down here, and the page says so:
 * at most 1000 snapshots a process (evenly spaced, the first, last and
 * peak kept), the 2000 largest call sites (the rest summed), 20000
 * segments and events a dump. */
#include "cmd/cmd.h"
#include "export/flame.h"
#include "export/html_page.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define MAX_SNAPS 1000
#define MAX_SITES 2000
#define MAX_SEGS 20000

static void
num_or_null(struct sb *j, int64_t v, int present) {
	if (present)
		sb_printf(j, "%lld", (long long)v);
	else
		sb_puts(j, "null");
}

/* "Growth starts at step N": the split of live heap + mmap bytes (a running
 * median of 5) over the snapshots into a flat part and a rising straight
 * line that fits best
 * (least squares over every split), reported when the line rises by more
 * than 10% of where it starts, at the first mark value of the rising part. */
static void
growth_start(struct sb *j, const struct mfile *f) {
	size_t n = f->nsnaps;
	if (n < 6 || !f->snaps[n - 1].nmarks)
		return;
	double *y = xmalloc(n * sizeof *y), *x = xmalloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++) {
		/* a running median of 5 first: a checkpoint's transient
		 * mapping in one snapshot must not bend the line */
		double w[5];
		size_t m = 0;
		for (size_t q = i >= 2 ? i - 2 : 0; q <= i + 2 && q < n; q++)
			w[m++] = (double)(f->snaps[q].tot[K_HEAP].live_bytes +
					  f->snaps[q].tot[K_MMAP].live_bytes);
		y[i] = median(w, m);
		x[i] = (double)f->snaps[i].elapsed_ms;
	}
	/* Every split k: flat mean before, least-squares line from k on; the
	 * split with the least squared error wins.  Prefix and suffix sums
	 * make it linear (it was quadratic: 18 s for 100 k snapshots), on
	 * values centred first so the sums of squares keep their precision. */
	double x0 = 0, y0 = 0, xs = 1, ys = 1, xlo = x[0], xhi = x[0], ylo = y[0], yhi = y[0];
	for (size_t i = 0; i < n; i++) {
		x0 += x[i] / (double)n, y0 += y[i] / (double)n;
		xlo = fmin(xlo, x[i]), xhi = fmax(xhi, x[i]), ylo = fmin(ylo, y[i]), yhi = fmax(yhi, y[i]);
	}
	if (xhi > xlo)
		xs = xhi - xlo;
	if (yhi > ylo)
		ys = yhi - ylo;
	double *py = xmalloc((n + 1) * sizeof *py), *pyy = xmalloc((n + 1) * sizeof *pyy);
	double *sx = xmalloc((n + 1) * sizeof *sx), *sy = xmalloc((n + 1) * sizeof *sy);
	double *sxx = xmalloc((n + 1) * sizeof *sxx), *sxy = xmalloc((n + 1) * sizeof *sxy);
	double *syy = xmalloc((n + 1) * sizeof *syy);
	py[0] = pyy[0] = 0;
	for (size_t i = 0; i < n; i++) {
		double yc = (y[i] - y0) / ys;
		py[i + 1] = py[i] + yc;
		pyy[i + 1] = pyy[i] + yc * yc;
	}
	sx[n] = sy[n] = sxx[n] = sxy[n] = syy[n] = 0;
	for (size_t i = n; i-- > 0;) {
		double xc = (x[i] - x0) / xs, yc = (y[i] - y0) / ys;
		sx[i] = sx[i + 1] + xc;
		sy[i] = sy[i + 1] + yc;
		sxx[i] = sxx[i + 1] + xc * xc;
		sxy[i] = sxy[i + 1] + xc * yc;
		syy[i] = syy[i + 1] + yc * yc;
	}
	double best = -1, slope_b = 0, icpt_b = 0;
	size_t k_b = 0;
	for (size_t k = 0; k + 3 <= n; k++) {
		double sse = k ? pyy[k] - py[k] * py[k] / (double)k : 0;
		double c = (double)(n - k);
		double den = c * sxx[k] - sx[k] * sx[k];
		double b = den > 0 ? (c * sxy[k] - sx[k] * sy[k]) / den : 0, a = (sy[k] - b * sx[k]) / c;
		sse += syy[k] - 2 * a * sy[k] - 2 * b * sxy[k] + c * a * a + 2 * a * b * sx[k] +
		       b * b * sxx[k];
		if (best < 0 || sse < best)
			best = sse, k_b = k, slope_b = b, icpt_b = a;
	}
	/* back from centred, scaled values: y = icpt + slope * x */
	slope_b = slope_b * ys / xs;
	icpt_b = icpt_b * ys + y0 - slope_b * x0;
	free(py), free(pyy), free(sx), free(sy), free(sxx), free(sxy), free(syy);
	double from = icpt_b + slope_b * x[k_b], to = icpt_b + slope_b * x[n - 1];
	free(x);
	free(y);
	if (slope_b <= 0 || to <= from * 1.1 || from < 0)
		return;
	const char *name = f->snaps[n - 1].marks[0].name;
	for (size_t i = k_b; i < n; i++)
		for (int k = 0; k < f->snaps[i].nmarks; k++)
			if (!strcmp(f->snaps[i].marks[k].name, name)) {
				char a[16], b[16];
				struct sb t = {0};
				sb_printf(&t, "Growth starts at %s %g: live heap and mmap bytes rise "
					      "steadily from about %s to %s after it.",
					  name, f->snaps[i].marks[k].value, human((int64_t)from, a),
					  human((int64_t)to, b));
				sb_puts(j, ",\"marks_start\":");
				sb_json_str(j, t.p);
				sb_free(&t);
				sb_puts(j, ",\"growth_step\":");
				sb_json_num(j, "%g", f->snaps[i].marks[k].value);
				return;
			}
}

/* The timeline by call site: live bytes of the sites that held the most
 * at any kept snapshot (STACK_SITES of them), the rest as "other", at
 * each kept snapshot; leak suspects (as `leaks` ranks them) marked. */
#define STACK_SITES 12
struct stk { uint32_t stack; int kind; int64_t max; };

static void
stack_json(struct sb *j, struct mfile *f, const size_t *idx, size_t m) {
	struct stk top[STACK_SITES];
	size_t nt = 0;
	/* pass 1: each site's most live bytes over the kept snapshots (the
	 * replay goes forward, so this is one pass over the file's deltas) */
	struct stk *all = NULL;
	size_t na = 0, cap = 0;
	struct keyix ix = {0}; /* (stack, kind) -> index in all + 1 */
	for (size_t q = 0; q < m; q++) {
		size_t n;
		struct site *v = snap_sites(f, &f->snaps[idx[q]], &n);
		for (size_t i = 0; i < n; i++) {
			size_t k = i;
			/* sites come back in the replay's stable order, so the last
			 * snapshot's position is tried first; else the index (a
			 * scan of all here was quadratic in a PyTorch process's
			 * hundreds of thousands of sites) */
			if (!(i < na && all[i].stack == v[i].stack && all[i].kind == v[i].kind)) {
				uint32_t key[2] = {v[i].stack, (uint32_t)v[i].kind};
				int fresh;
				uint64_t *slot = keyix_slot(&ix, (const char *)key, sizeof key, &fresh);
				if (fresh) {
					all = xgrow(all, na + 1, &cap, sizeof *all);
					all[na++] = (struct stk){v[i].stack, v[i].kind, 0};
					*slot = na;
				}
				k = (size_t)*slot - 1;
			}
			if (v[i].live_bytes > all[k].max)
				all[k].max = v[i].live_bytes;
		}
		free(v);
	}
	keyix_free(&ix);
	for (size_t k = 0; k < na; k++) { /* the STACK_SITES largest */
		if (all[k].max <= 0)
			continue;
		size_t at = nt < STACK_SITES ? nt++ : STACK_SITES;
		if (at == STACK_SITES) {
			if (all[k].max <= top[STACK_SITES - 1].max)
				continue;
			at = STACK_SITES - 1;
		}
		top[at] = all[k];
		while (at > 0 && top[at].max > top[at - 1].max) {
			struct stk x = top[at];
			top[at] = top[at - 1];
			top[--at] = x;
		}
	}
	free(all);
	struct ask ask = {.kind = -1, .warmup = 0.2, .snapshot = SNAP_DEFAULT};
	struct leaks lk;
	answer_leaks(f, &ask, &lk);
	struct namer nm = {0};
	/* pass 2: the series */
	int64_t *y = xcalloc((nt + 1) * (m ? m : 1), sizeof *y);
	for (size_t q = 0; q < m; q++) {
		size_t n;
		struct site *v = snap_sites(f, &f->snaps[idx[q]], &n);
		for (size_t i = 0; i < n; i++) {
			size_t k = 0;
			while (k < nt && !(top[k].stack == v[i].stack && top[k].kind == v[i].kind))
				k++;
			y[k * m + q] += v[i].live_bytes > 0 ? v[i].live_bytes : 0; /* k == nt: other */
		}
		free(v);
	}
	char name[512];
	sb_puts(j, ",\"stack\":{\"sites\":[");
	for (size_t k = 0; k <= nt; k++) {
		if (k)
			sb_putc(j, ',');
		int suspect = 0;
		if (k < nt)
			site_group_name(f, top[k].stack, name, sizeof name, &nm);
		for (size_t l = 0; l < lk.n && l < 10 && k < nt; l++)
			suspect |= !strcmp(lk.v[l].r.name, name) && lk.v[l].r.kind == top[k].kind;
		sb_puts(j, "{\"where\":");
		sb_json_str(j, k < nt ? site_name(f, top[k].stack, 2, name, sizeof name) : "other");
		sb_printf(j, ",\"kind\":\"%s\",\"suspect\":%s,\"frames\":[", k < nt ? kind_names[top[k].kind] : "",
			  suspect ? "true" : "false");
		struct frame fr[256];
		int nf = k < nt ? site_frames(f, top[k].stack, fr, 256) : 0;
		for (int q = 0; q < nf; q++) {
			if (q)
				sb_putc(j, ',');
			sb_json_str(j, sym_text(&fr[q], name, sizeof name, 1));
		}
		sb_puts(j, "],\"y\":[");
		for (size_t q = 0; q < m; q++)
			sb_printf(j, "%s%lld", q ? "," : "", (long long)y[k * m + q]);
		sb_puts(j, "]}");
	}
	sb_puts(j, "]}");
	free(y);
	leaks_free(&lk);
	namer_free(&nm);
}

static void
process_json(struct sb *j, struct mfile *f) {
	char lab[128];
	sb_puts(j, "{\"label\":");
	sb_json_str(j, file_label(f, lab, sizeof lab));
	sb_puts(j, ",\"argv\":");
	sb_json_str(j, f->argv);
	/* which snapshots: all, or evenly spaced with the first, last, peak */
	size_t n = f->nsnaps, *idx = xmalloc((n + 1) * sizeof *idx), m = 0;
	const struct snap *pk = file_peak(f, -1);
	for (size_t i = 0; i < n; i++) {
		int keep = n <= MAX_SNAPS || i == 0 || i == n - 1 || &f->snaps[i] == pk ||
			   (i * (MAX_SNAPS - 3) / n != (i + 1) * (MAX_SNAPS - 3) / n);
		if (keep)
			idx[m++] = i;
	}
	sb_printf(j, ",\"nsnaps\":%zu,\"downsampled\":%s,\"snapshots\":{", n, m < n ? "true" : "false");
	static const char *const keys[] = {"t", "reason", "label", "mark", "rss", "pss", "heap", "mmap",
					   "mmap_file", "cgroup"};
	for (int k = 0; k < 10; k++) {
		sb_printf(j, "%s\"%s\":[", k ? "," : "", keys[k]);
		for (size_t q = 0; q < m; q++) {
			const struct snap *s = &f->snaps[idx[q]];
			if (q)
				sb_putc(j, ',');
			switch (k) {
			case 0: sb_printf(j, "%lld", (long long)s->elapsed_ms); break;
			case 1: sb_json_str(j, s->reason); break;
			case 2: if (s->label) sb_json_str(j, s->label); else sb_puts(j, "null"); break;
			case 3: sb_json_num(j, "%g", s->nmarks ? s->marks[0].value : NAN); break;
			case 4: num_or_null(j, s->rss_bytes, s->rss_bytes >= 0); break;
			case 5: num_or_null(j, s->pss_bytes, s->pss_bytes >= 0); break;
			case 6: num_or_null(j, s->tot[K_HEAP].live_bytes, s->tot[K_HEAP].present); break;
			case 7: num_or_null(j, s->tot[K_MMAP].live_bytes, s->tot[K_MMAP].present); break;
			case 8: num_or_null(j, s->tot[K_MMAP_FILE].live_bytes, s->tot[K_MMAP_FILE].present); break;
			case 9: num_or_null(j, s->cg_current, s->cg_current >= 0); break;
			}
		}
		sb_putc(j, ']');
	}
	sb_puts(j, ",\"dev\":{");
	int firstdev = 1;
	for (int d = 0; d < MAX_DEVS; d++) {
		int used = 0;
		for (size_t q = 0; q < m && !used; q++)
			used = f->snaps[idx[q]].dev_live[d] >= 0;
		if (!used)
			continue;
		sb_printf(j, "%s\"%d\":[", firstdev ? "" : ",", d);
		firstdev = 0;
		for (size_t q = 0; q < m; q++) {
			int64_t v = f->snaps[idx[q]].dev_live[d];
			if (q)
				sb_putc(j, ',');
			num_or_null(j, v, v >= 0);
		}
		sb_putc(j, ']');
	}
	sb_puts(j, "}}");
	stack_json(j, f, idx, m);
	free(idx);
	growth_start(j, f);
	/* call sites at the last snapshot */
	size_t ns = 0;
	struct site *v = f->nsnaps ? sites_sorted(f, &f->snaps[f->nsnaps - 1], &ns) : NULL;
	int64_t rest = 0;
	sb_puts(j, ",\"sites\":[");
	char name[512];
	for (size_t i = 0; i < ns; i++) {
		if (i >= MAX_SITES) {
			rest += v[i].live_bytes;
			continue;
		}
		/* peak: its bytes at its kind's high-water mark (-1: the file
		 * does not keep them) */
		sb_printf(j, "%s{\"live\":%lld,\"peak\":%lld,\"count\":%lld,\"allocs\":%lld,"
			     "\"abytes\":%lld,\"kind\":\"%s\",\"where\":",
			  i ? "," : "", (long long)v[i].live_bytes, (long long)v[i].at_peak_bytes,
			  (long long)v[i].live_count, (long long)v[i].allocs, (long long)v[i].alloc_bytes,
			  kind_names[v[i].kind]);
		sb_json_str(j, site_name(f, v[i].stack, 2, name, sizeof name));
		sb_puts(j, ",\"frames\":[");
		struct frame fr[256];
		int nf = site_frames(f, v[i].stack, fr, 256);
		for (int q = 0; q < nf; q++) {
			if (q)
				sb_putc(j, ',');
			sb_json_str(j, sym_text(&fr[q], name, sizeof name, 1));
		}
		sb_puts(j, "]}");
	}
	sb_printf(j, "],\"sites_total\":%zu,\"sites_rest\":%lld", ns, (long long)rest);
	free(v);
	/* the flame graph of the last snapshot */
	struct fnode *root = flame_new();
	if (f->nsnaps)
		flame_add(root, f, &f->snaps[f->nsnaps - 1], "live", NULL, -1);
	struct sb svg = {0};
	char title[200];
	snprintf(title, sizeof title, "%s: live memory by call site at the last snapshot", lab);
	flame_svg(&svg, root, title, "live", 1100, 0);
	sb_puts(j, ",\"flame\":");
	sb_json_str(j, svg.p);
	sb_free(&svg);
	flame_free(root);
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
		process_json(&j, &r.files[i]);
	}
	sb_puts(&j, "],\"dumps\":[");
	for (size_t i = 0; i < d.nfiles; i++) {
		if (i)
			sb_putc(&j, ',');
		dump_json(&j, &d.files[i]);
	}
	sb_puts(&j, "]}");
	struct sb page = {0};
	sb_puts(&page, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memtally report</title>"
		       "<style>");
	sb_puts(&page, html_css);
	sb_puts(&page, "</style></head><body>\n<h1>memtally report</h1>\n<pre id=\"errors\"></pre>\n"
		       "<select id=\"proc\"></select>\n<h2>Timeline</h2><div id=\"timeline\"></div>\n"
		       "<h2>Live memory by call site</h2><div class=\"note\">Stacked: the call sites "
		       "that held the most, the rest as other; leak suspects outlined in red. Hover "
		       "for the site and bytes, click for its stack.</div><div id=\"stacked\"></div>\n"
		       "<h2>Call sites at the last snapshot</h2><div class=\"note\">Click a row for its "
		       "stack, a column header to sort.</div><div id=\"table\"></div>\n"
		       "<h2>Flame graph</h2><div class=\"note\">Click a frame to zoom; Search "
		       "highlights.</div><div id=\"flame\"></div>\n<h2>OOM dumps</h2><div id=\"dumps\"></div>\n"
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
	sb_puts(&page, "</script>\n</body></html>\n");
	write_output(o->out, page.p, page.len);
	fprintf(stderr, "memtally: wrote %s\n", o->out);
	sb_free(&j);
	sb_free(&page);
	return 0;
}
