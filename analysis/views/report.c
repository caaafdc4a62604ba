/* report.c — `memtally report`: per process, a timeline of RSS and live
 * bytes by kind, then the top call sites at the last snapshot and at the
 * peak.  Text fits 100 columns; --json carries the same figures. */
#include "cmd/cmd.h"
#include "answer/torchfig.h"
#include "answer/answer.h"
#include "answer/procs.h"
#include "answer/sites.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* "kept alive by: ..." under a row whose sites the Python hook's search
 * explained (answer_kept). */
static void
kept_text(struct mfile *f, struct opts *o, const struct site_row *r, const char *indent) {
	if (!f->nkept)
		return;
	struct row w = {.name = r->name, .kind = r->kind, .stack = r->stack};
	const struct kept *k = answer_kept(f, &o->ask, &w);
	if (!k)
		return;
	struct sb b = {0};
	kept_chain_text(&b, k);
	printf("%skept alive by: %s\n", indent, b.p);
	free(b.p);
}

static void
timeline_text(const struct mfile *f) {
	char a[16], b[16], c[16], d[16], e[16];
	printf("  %5s %-9s %9s %11s %11s %11s %11s\n", "seq", "reason", "elapsed", "rss", "heap",
	       "mmap", "mmap_file");
	size_t n = f->nsnaps, step = n > 24 ? (n + 23) / 24 : 1;
	for (size_t i = 0; i < n; i++) {
		if (i % step && i != n - 1)
			continue;
		const struct snap *s = &f->snaps[i];
		printf("  %5lld %-9s %9s %11s %11s %11s %11s%s%s\n", (long long)s->seq, s->reason,
		       human_ms(s->elapsed_ms, a), s->rss_bytes >= 0 ? human(s->rss_bytes, b) : "-",
		       human(s->tot[K_HEAP].live_bytes, c), human(s->tot[K_MMAP].live_bytes, d),
		       human(s->tot[K_MMAP_FILE].live_bytes, e), s->label ? "  " : "",
		       s->label ? s->label : "");
	}
	if (step > 1)
		printf("  (%zu snapshots; every %zu%s shown)\n", n, step,
		       step % 100 / 10 == 1 ? "th" : step % 10 == 1 ? "st" : step % 10 == 2 ? "nd"
					     : step % 10 == 3 ? "rd" : "th");
}

static void
sites_text(struct mfile *f, const struct snap *s, struct opts *o, const char *title) {
	size_t n, nr;
	struct site *v = sites_sorted(f, s, &n);
	if (o->ask.only_gpu) /* --device: that GPU's call sites */
		n = sites_on_device(f, v, n, o->ask.only_gpu - 1);
	struct site_row *r = site_rows(f, v, n, o->kind, o->stacks, 4 * o->top + 64, 0, &nr);
	char a[16], b[16], name[1100];
	char ph[96] = "";
	if (s->phase) /* the phase the snapshot was taken in */
		snprintf(ph, sizeof ph, ", %s", phase_during(f, s->phase, snap_step(s, "step"), name,
							     sizeof name));
	printf("  top call sites by live bytes %s (snapshot %lld, %s%s):\n", title, (long long)s->seq,
	       s->reason, ph);
	printf("  %11s %9s %9s %11s %-9s %s\n", "live", "count", "allocs", "allocated", "kind",
	       "where");
	int shown = 0;
	for (size_t i = 0; i < nr && shown < o->top; i++) {
		if (!r[i].v[0] && shown)
			break;
		site_row_name(&r[i], 56, o->stacks, name, sizeof name);
		printf("  %11s %9lld %9lld %11s %-9s %s\n", human(r[i].v[0], a), (long long)r[i].v[1],
		       (long long)r[i].v[2], human(r[i].v[3], b), kind_names[r[i].kind], name);
		if (o->stacks && r[i].asked != r[i].v[3]) /* mmap(2048) maps 4 KiB */
			printf("        asked for %s of the %s mapped (whole pages)\n", human(r[i].asked, a),
			       human(r[i].v[3], b));
		if (o->stacks)
			site_print_stack(stdout, f, r[i].stack, "        ");
		kept_text(f, o, &r[i], "              ");
		shown++;
	}
	if (!shown)
		printf("  (no call sites)\n");
	site_rows_free(r, nr);
	free(v);
}

static void
sites_json(struct sb *j, struct mfile *f, const struct snap *s, struct opts *o) {
	size_t n;
	struct site *v = sites_sorted(f, s, &n);
	if (o->ask.only_gpu)
		n = sites_on_device(f, v, n, o->ask.only_gpu - 1);
	sb_printf(j, "{\"seq\":%lld,\"reason\":", (long long)s->seq);
	sb_json_str(j, s->reason);
	sb_printf(j, ",\"elapsed_ms\":%lld,\"callsites\":[", (long long)s->elapsed_ms);
	int shown = 0;
	for (size_t i = 0; i < n && shown < o->top; i++) {
		if (o->kind >= 0 && v[i].kind != o->kind)
			continue;
		if (shown++)
			sb_putc(j, ',');
		sb_printf(j, "{\"stack\":%lld,\"kind\":\"%s\",\"live_bytes\":%lld,\"live_count\":%lld,"
			     "\"allocs\":%lld,\"alloc_bytes\":%lld,\"frees\":%lld,\"peak_bytes\":%lld,",
			  stack_file_id(f, v[i].stack), kind_names[v[i].kind], (long long)v[i].live_bytes,
			  (long long)v[i].live_count, (long long)v[i].allocs,
			  (long long)v[i].alloc_bytes, (long long)v[i].frees,
			  (long long)v[i].peak_bytes);
		if (v[i].asked_bytes >= 0)
			sb_printf(j, "\"asked_bytes\":%lld,", (long long)v[i].asked_bytes);
		site_json_names(j, f, v[i].stack);
		sb_putc(j, '}');
	}
	sb_puts(j, "]}");
	free(v);
}

/* The exact peak: each call site's live bytes when its kind's total was at
 * its high-water mark, as the shim keeps them (doc/FORMAT.md at_peak_bytes):
 * the peak is there although no snapshot fell on it.  Sorted largest
 * first; NULL when the file has no such figures (older files). */
static int
cmp_at_peak(const void *a, const void *b) {
	const struct site *x = a, *y = b;
	if (x->at_peak_bytes != y->at_peak_bytes)
		return x->at_peak_bytes < y->at_peak_bytes ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

static struct site *
at_peak_sites(struct mfile *f, const struct snap *s, struct opts *o, size_t *n) {
	struct site *v = snap_sites(f, s, n);
	int have = 0;
	for (size_t i = 0; i < *n && !have; i++)
		have = v[i].at_peak_bytes >= 0;
	if (!have) {
		free(v);
		return NULL;
	}
	if (o->ask.only_gpu)
		*n = sites_on_device(f, v, *n, o->ask.only_gpu - 1);
	xqsort(v, *n, sizeof *v, cmp_at_peak);
	return v;
}

/* The GPUs whose call sites a table of v[0..n) shows, into on[]: each
 * device's sites are at that device's own peak (the shim keeps a peak a
 * device).  Returns whether any site is on a GPU. */
static int
peak_devices(const struct mfile *f, const struct site *v, size_t n, int on[MAX_DEVS]) {
	int any = 0;
	memset(on, 0, MAX_DEVS * sizeof *on);
	for (size_t i = 0; i < n; i++) {
		int d = stack_device(f, v[i].stack);
		if (d >= 0 && d < MAX_DEVS && v[i].at_peak_bytes > 0)
			any = on[d] = 1;
	}
	return any;
}

/* One table of the sites of v[0..n) on device dev (-1: on none; ALL:
 * every site, a file with no GPU's), under a heading that printed
 * total_peak (and whose kinds hold total_now at the last snapshot): rows
 * the table leaves out (--top, or call sites the file does not hold:
 * MEMTALLY_TOP) end it as one "other" row, so the rows add up to it. */
#define ALL (-2)
static void
at_peak_table(struct mfile *f, struct site *v, size_t n, int dev, struct opts *o,
	      int64_t total_peak, int64_t total_now) {
	char a[16], b[16], name[1100];
	struct site *w = xmalloc((n ? n : 1) * sizeof *w);
	memcpy(w, v, n * sizeof *w);
	size_t m = dev == ALL ? n : sites_on_device(f, w, n, dev), nr;
	printf("  %11s %11s %-9s %s\n", "at peak", "live now", "kind", "where");
	struct site_row *r = site_rows(f, w, m, o->kind, o->stacks, 4 * o->top + 64, 1, &nr);
	int shown = 0;
	int64_t sum_peak = 0, sum_now = 0;
	for (size_t i = 0; i < nr && shown < o->top; i++) {
		site_row_name(&r[i], 36, o->stacks, name, sizeof name);
		printf("  %11s %11s %-9s %s\n", human(r[i].v[0], a), human(r[i].v[1], b),
		       kind_names[r[i].kind], name);
		if (o->stacks)
			site_print_stack(stdout, f, r[i].stack, "        ");
		kept_text(f, o, &r[i], "              ");
		sum_peak += r[i].v[0], sum_now += r[i].v[1];
		shown++;
	}
	if (total_peak - sum_peak > 0 || (shown && total_now - sum_now > 0))
		printf("  %11s %11s %-9s other (%s)\n", human(total_peak - sum_peak, a),
		       human(total_now - sum_now > 0 ? total_now - sum_now : 0, b), "",
		       (size_t)shown < nr ? "the rows below" : "call sites not in the file");
	else if (!shown)
		printf("  (no call sites)\n");
	site_rows_free(r, nr);
	free(w);
}

/* The exact peak as tables: the host's (each kind at its high-water
 * mark), then each GPU's at that GPU's own peak. */
static void
at_peak_text(struct mfile *f, const struct snap *s, struct site *v, size_t n, struct opts *o) {
	char a[16];
	int on[MAX_DEVS], gpus = peak_devices(f, v, n, on);
	if (!o->ask.only_gpu) {
		struct sb h = {0};
		int64_t tp = 0, tn = 0;
		for (int k = 0; k < NKINDS; k++)
			if ((o->kind < 0 || o->kind == k) && s->tot[k].present &&
			    s->tot[k].peak_bytes > 0 && !(gpus && kind_on_device(k))) {
				sb_printf(&h, "%s%s %s", h.len ? ", " : "", kind_names[k],
					  human(s->tot[k].peak_bytes, a));
				if (s->tot[k].peak_phase) { /* the phase it was reached in */
					char ph[96];
					sb_printf(&h, " %s", phase_during(f, s->tot[k].peak_phase,
									s->tot[k].peak_step, ph, sizeof ph));
				}
				tp += s->tot[k].peak_bytes, tn += s->tot[k].live_bytes;
			}
		printf("  top call sites at the peak (each kind at its high-water mark: %s):\n",
		       h.len ? h.p : "none");
		sb_free(&h);
		at_peak_table(f, v, n, gpus ? -1 : ALL, o, tp, tn);
	}
	for (int d = 0; d < MAX_DEVS; d++) {
		if (!(on[d] || o->ask.only_gpu == d + 1))
			continue;
		printf("  top call sites at GPU %d's peak (%s: cuda, cuda_managed and cuda_vmm on it "
		       "together):\n",
		       d, s->dev_peak[d] >= 0 ? human(s->dev_peak[d], a) : "?");
		at_peak_table(f, v, n, d, o, s->dev_peak[d] > 0 ? s->dev_peak[d] : 0,
			      s->dev_live[d] > 0 ? s->dev_live[d] : 0);
	}
}

static void
at_peak_json(struct sb *j, struct mfile *f, const struct snap *s, const struct site *v, size_t n,
	     struct opts *o) {
	sb_puts(j, ",\"at_peak\":{\"peak_bytes\":{");
	int first = 1;
	for (int k = 0; k < NKINDS; k++)
		if (s->tot[k].present && s->tot[k].peak_bytes > 0) {
			sb_printf(j, "%s\"%s\":%lld", first ? "" : ",", kind_names[k],
				  (long long)s->tot[k].peak_bytes);
			first = 0;
		}
	int on[MAX_DEVS];
	if (peak_devices(f, v, n, on) || o->ask.only_gpu) {
		sb_puts(j, "},\"device_peak_bytes\":{");
		first = 1;
		for (int d = 0; d < MAX_DEVS; d++)
			if ((on[d] || o->ask.only_gpu == d + 1) && s->dev_peak[d] >= 0) {
				sb_printf(j, "%s\"%d\":%lld", first ? "" : ",", d,
					  (long long)s->dev_peak[d]);
				first = 0;
			}
	}
	sb_puts(j, "},\"callsites\":[");
	int shown = 0;
	for (size_t i = 0; i < n && shown < o->top; i++) {
		if ((o->kind >= 0 && v[i].kind != o->kind) || v[i].at_peak_bytes <= 0)
			continue;
		if (shown++)
			sb_putc(j, ',');
		sb_printf(j, "{\"stack\":%lld,\"kind\":\"%s\",",
			  stack_file_id(f, v[i].stack), kind_names[v[i].kind]);
		int d = stack_device(f, v[i].stack);
		if (d >= 0)
			sb_printf(j, "\"device\":%d,", d);
		sb_printf(j, "\"at_peak_bytes\":%lld,\"live_bytes\":%lld,",
			  (long long)v[i].at_peak_bytes, (long long)v[i].live_bytes);
		site_json_names(j, f, v[i].stack);
		sb_putc(j, '}');
	}
	sb_puts(j, "]}");
}

/* Spikes (answer_spikes): call sites whose own high-water mark is far
 * above what they held at the process peak, so the peak tables miss them
 * (a transient 128 MiB buffer freed at once). */
#define MAX_SPIKES 64

static const char *
spike_when(const struct spike *t, char *buf, size_t n) {
	char a[16];
	if (t->peak_ms < 0)
		snprintf(buf, n, "?");
	else if (!isnan(t->step))
		snprintf(buf, n, "step %.0f (%s)", t->step, human_ms(t->peak_ms, a));
	else
		snprintf(buf, n, "%s", human_ms(t->peak_ms, a));
	return buf;
}

static void
spikes_text(struct mfile *f, struct opts *o) {
	struct spike v[MAX_SPIKES];
	size_t n = answer_spikes(f, &o->ask, v, o->top < MAX_SPIKES ? (size_t)o->top : MAX_SPIKES);
	if (!n)
		return;
	char a[16], b[16], w[48], name[1100];
	printf("  spikes (a call site's own high-water mark, far above what it held at the peak):\n");
	printf("  %11s %11s %-22s %-9s %s\n", "own peak", "at peak", "when", "kind", "where");
	for (size_t i = 0; i < n; i++) {
		site_row_name(&(struct site_row){.name = v[i].r.name, .nsites = 1}, 60, o->stacks,
			      name, sizeof name);
		printf("  %11s %11s %-22s %-9s %s\n", human(v[i].r.peak, a), human(v[i].r.live, b),
		       spike_when(&v[i], w, sizeof w), kind_names[v[i].r.kind], name);
		if (v[i].phase) /* the phase it was reached in (answer/phase.c) */
			printf("  %23s %s\n", "",
			       phase_during(f, v[i].phase, v[i].step, name, sizeof name));
		if (o->stacks)
			site_print_stack(stdout, f, v[i].r.stack, "        ");
	}
	spikes_free(v, n);
}

static void
spikes_json(struct sb *j, struct mfile *f, struct opts *o) {
	struct spike v[MAX_SPIKES];
	size_t n = answer_spikes(f, &o->ask, v, o->top < MAX_SPIKES ? (size_t)o->top : MAX_SPIKES);
	sb_puts(j, ",\"spikes\":[");
	for (size_t i = 0; i < n; i++) {
		sb_printf(j, "%s{\"stack\":%lld,\"kind\":\"%s\",\"peak_bytes\":%lld,\"at_peak_bytes\":%lld,"
			     "\"peak_ms\":",
			  i ? "," : "", stack_file_id(f, v[i].r.stack), kind_names[v[i].r.kind],
			  (long long)v[i].r.peak, (long long)v[i].r.live);
		if (v[i].peak_ms >= 0)
			sb_printf(j, "%lld", (long long)v[i].peak_ms);
		else
			sb_puts(j, "null");
		sb_puts(j, ",\"step\":");
		sb_json_num(j, "%.0f", v[i].step);
		if (v[i].phase) {
			char ph[64];
			sb_puts(j, ",\"phase\":");
			sb_json_str(j, f->phase_names[v[i].phase - 1]);
			(void)ph;
		}
		sb_puts(j, ",");
		site_json_names(j, f, v[i].r.stack);
		sb_puts(j, ",\"row\":");
		sb_json_str(j, v[i].r.name);
		sb_putc(j, '}');
	}
	sb_putc(j, ']');
	spikes_free(v, n);
}

/* PyTorch's caching allocator over the run (devices[].torch): tensors,
 * cache and fragmentation from the first snapshot that has them. */
static void
torch_text(const struct mfile *f) {
	struct torchfig t[MAX_DEVS];
	char line[256];
	size_t n = answer_torchfigs(f, 0, f->nsnaps, t, MAX_DEVS);
	for (size_t i = 0; i < n; i++)
		printf("  PyTorch caching allocator, %s\n", torchfig_text(&t[i], line, sizeof line));
}

/* One process as a JSON object, into j. */
static void
report_json(struct mfile *f, struct opts *o, struct sb *j, int first) {
	if (!first)
		sb_putc(j, ',');
	file_json_head(j, f);
	sb_printf(j, ",\"ppid\":%lld", (long long)f->ppid);
	sb_puts(j, ",\"host\":");
	sb_json_str(j, f->host);
	sb_puts(j, ",\"exe\":");
	sb_json_str(j, f->exe);
	sb_puts(j, ",\"argv\":");
	sb_json_str(j, f->argv);
	sb_printf(j, ",\"sample_bytes\":%lld,\"truncated\":%s,\"snapshots\":[",
		  (long long)f->sample_bytes, f->truncated ? "true" : "false");
	for (size_t k = 0; k < f->nsnaps; k++) {
		const struct snap *s = &f->snaps[k];
		if (k)
			sb_putc(j, ',');
		sb_printf(j, "{\"seq\":%lld,\"reason\":", (long long)s->seq);
		sb_json_str(j, s->reason);
		sb_printf(j, ",\"elapsed_ms\":%lld,\"rss_bytes\":%lld",
			  (long long)s->elapsed_ms, (long long)s->rss_bytes);
		for (int kk = 0; kk < NKINDS; kk++)
			if (s->tot[kk].present)
				sb_printf(j, ",\"%s_live_bytes\":%lld", kind_names[kk],
					  (long long)s->tot[kk].live_bytes);
		sb_putc(j, '}');
	}
	sb_puts(j, "]");
	if (f->nsnaps) {
		long sel = f->has_sel ? f->sel : o->snapshot;
		sb_puts(j, ",\"last\":"); /* or the snapshot asked for */
		sites_json(j, f, sel >= 0 ? pick_snapshot(f, sel, o->kind) : &f->snaps[f->nsnaps - 1], o);
		sb_puts(j, ",\"peak\":");
		sites_json(j, f, file_peak(f, o->kind), o);
		size_t np;
		const struct snap *last = &f->snaps[f->nsnaps - 1];
		struct site *vp = at_peak_sites(f, last, o, &np);
		if (vp)
			at_peak_json(j, f, last, vp, np, o);
		free(vp);
		spikes_json(j, f, o);
		struct torchfig tf[MAX_DEVS];
		size_t ntf = answer_torchfigs(f, 0, f->nsnaps, tf, MAX_DEVS);
		if (ntf) {
			sb_puts(j, ",\"torch\":");
			torchfig_json(j, tf, ntf);
		}
	}
	sb_putc(j, '}');
}

/* The line under the title: snapshots, time, mode, the shim's memory,
 * and what the figures lack (tables full, a file cut or damaged,
 * requests merged, address space reserved apart). */
static void
summary_text(const struct mfile *f, const struct snap *last) {
	char lab[128], a[16], merged[64] = "";
	int64_t dropped = last->dropped_live + last->dropped_stacks;
	if (last->coalesced) /* asked while one was pending: one snapshot for both */
		snprintf(merged, sizeof merged, " (and %lld asked for while one was pending)",
			 (long long)last->coalesced);
	printf("  %zu snapshot%s%s over %s; %s; shim memory %s%s%s\n", f->nsnaps,
	       f->nsnaps == 1 ? "" : "s", merged, human_ms(last->elapsed_ms, a),
	       f->sample_bytes > 0 ? "heap sampled" : "heap exact", human(last->shim_bytes, lab),
	       dropped ? "; DROPPED: tables full, figures incomplete" : "",
	       f->damaged     ? "; DAMAGED: read up to the damage named above"
	       : f->truncated ? "; last line truncated"
			      : "");
	if (last->reserved_bytes) /* Go's arenas, a JIT's heap: not memory */
		printf("  %s of address space reserved (PROT_NONE) at the last snapshot: in no kind\n",
		       human(last->reserved_bytes, lab));
}

/* One process as text, on stdout. */
static void
report_text(struct mfile *f, struct opts *o) {
	file_title(f);
	if (!f->nsnaps) {
		printf("  no snapshots (the process wrote only its header)\n\n");
		return;
	}
	const struct snap *last = &f->snaps[f->nsnaps - 1];
	summary_text(f, last);
	timeline_text(f);
	torch_text(f);
	long sel = f->has_sel ? f->sel : o->snapshot;
	if (sel >= 0) {
		char t[48];
		snprintf(t, sizeof t, "at snapshot %ld", sel);
		sites_text(f, pick_snapshot(f, sel, o->kind), o, t);
	} else if (sel != SNAP_PEAK) { /* the peak's table follows anyway */
		sites_text(f, last, o, "at the last snapshot");
	}
	size_t np;
	struct site *vp = at_peak_sites(f, last, o, &np);
	const struct snap *pk = file_peak(f, o->kind);
	if (vp) /* exact, whatever the snapshots caught */
		at_peak_text(f, last, vp, np, o);
	else if (pk != last) /* older files: the snapshot that held most */
		sites_text(f, pk, o, "at the peak");
	free(vp);
	spikes_text(f, o);
	printf("\n");
}

static void
report_one(struct mfile *f, struct opts *o, struct sb *j, int first) {
	if (o->json)
		report_json(f, o, j, first);
	else
		report_text(f, o);
}

/* Text: each process's section printed into memory (stdout swapped for
 * the while: main.c's escaping applies when it is printed); the processes
 * that matter in full, helpers (answer/procs.c) one line a group unless
 * --all-processes, as leaks does. */
static int
report_run(struct run *r, struct opts *o) {
	struct sec {
		char *text;
		size_t len;
	} *v = NULL;
	struct proc_facts *facts = NULL;
	size_t n = 0, cap = 0, capf = 0;
	struct mfile f;
	while (run_next(r, &f)) {
		v = xgrow(v, n + 1, &cap, sizeof *v);
		facts = xgrow(facts, n + 1, &capf, sizeof *facts);
		proc_facts(&f, &facts[n]);
		if (!facts[n].steps && (facts[n].dataloader || facts[n].pool || facts[n].spawned)) {
			struct leaks l; /* a helper's growth, for its group's line */
			answer_leaks(&f, &o->ask, &l);
			proc_growth(&l, &facts[n]);
			leaks_free(&l);
		}
		FILE *saved = stdout, *mem = open_memstream(&v[n].text, &v[n].len);
		if (!mem)
			die(EXIT_BAD_INPUT, "open_memstream: out of memory");
		stdout = mem; /* glibc: stdout is an assignable FILE * */
		report_text(&f, o);
		fclose(mem);
		stdout = saved;
		n++;
		mfile_free(&f);
	}
	int *role = xmalloc((n ? n : 1) * sizeof *role);
	procs_classify(facts, n, role);
	for (size_t i = 0; i < n; i++)
		if (o->all_processes || role[i] == ROLE_MAIN)
			fwrite(v[i].text, 1, v[i].len, stdout);
	for (int g = ROLE_DATALOADER; g < NROLES && !o->all_processes; g++) {
		char line[256], grow[400];
		int any = 0;
		for (size_t i = 0; i < n; i++)
			any |= role[i] == g;
		if (any)
			printf("%s%s (--all-processes: each in full)\n",
			       role_summary(facts, role, n, g, line, sizeof line),
			       role_growth(facts, role, n, g, grow, sizeof grow));
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(v), free(facts), free(role);
	return 0;
}

int
cmd_report(struct opts *o) {
	struct run r;
	cmd_list(o, &r, 0); /* read one at a time: memory bounded by the largest file */
	if (!o->json)
		return report_run(&r, o);
	return each_file(&r, o, "processes", report_one);
}
