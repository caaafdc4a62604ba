/* metrics.c — `memtally metrics`: a run's files as the Prometheus text
 * exposition MEMTALLY_PROMETHEUS writes while it runs (README,
 * "Prometheus and Grafana"), for the Pushgateway after a batch job:
 * one series set per process, from its last snapshot (--at peak: the
 * snapshot with the most live bytes, the call sites at their kinds'
 * high-water marks), each family's HELP and TYPE once with every
 * process's samples under it.  The call sites are the rows `report`
 * prints, named by their first frame ("func (file:line)"), the --top
 * (5, at most 10) largest of each process.  Files are read one at a
 * time: memory is each family's text and the largest file. */
#include "cmd/cmd.h"
#include "answer/answer.h"
#include "answer/procs.h"
#include "base/sb.h"
#include "base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	F_HEAP_LIVE, F_HEAP_PEAK, F_MMAP_LIVE, F_DEV_LIVE, F_DEV_TOTAL, F_RSS, F_CG_USE, F_CG_MAX, F_STEP,
	F_SNAPS, F_DROPPED, F_SEQ, F_TIME, F_RUNNING, F_LINE, NFAM
};

static const struct family {
	const char *name, *type, *help;
} fams[NFAM] = {
	{"memtally_heap_live_bytes", "gauge", "Heap bytes allocated and not freed (malloc family), at the last snapshot."},
	{"memtally_heap_peak_bytes", "gauge", "Highest heap live bytes of the process so far, at the last snapshot."},
	{"memtally_mmap_live_bytes", "gauge", "Anonymous mmap bytes mapped and not unmapped, at the last snapshot."},
	{"memtally_device_live_bytes", "gauge", "Bytes allocated through the CUDA driver on the device and not freed."},
	{"memtally_device_total_bytes", "gauge", "The device's memory as the driver last said it (cuMemGetInfo total)."},
	{"memtally_rss_bytes", "gauge", "Resident set size of the process (VmRSS)."},
	{"memtally_cgroup_usage_bytes", "gauge", "Memory usage of the process's cgroup."},
	{"memtally_cgroup_limit_bytes", "gauge", "Memory limit of the process's cgroup (absent: none)."},
	{"memtally_step", "gauge", "The \"step\" mark (memtally_mark; PyTorch's optimizer steps under memtally run)."},
	{"memtally_snapshots_total", "counter", "Snapshots taken by the process."},
	{"memtally_dropped_snapshots_total", "counter", "Snapshots that could not be written to the memtally file."},
	{"memtally_last_snapshot_seq", "gauge", "The number (seq) of the snapshot these figures are from in the process's memtally file."},
	{"memtally_last_snapshot_timestamp_seconds", "gauge", "Wall-clock time of the snapshot these figures are from."},
	{"memtally_running", "gauge", "1 while the process runs; 0 in the file its last snapshot (exit, or a death by signal) left."},
	{"memtally_line_live_bytes", "gauge", "Live bytes of the call sites with the most (at most 10 a process); where: the call site's first frame."},
};

#define LINES_MAX 10

/* A label value, quoted: backslash, double quote and newline escaped. */
static void
label_value(struct sb *s, const char *v) {
	sb_putc(s, '"');
	for (; v && *v; v++) {
		if (*v == '\n') {
			sb_puts(s, "\\n");
			continue;
		}
		if (*v == '\\' || *v == '"')
			sb_putc(s, '\\');
		sb_putc(s, *v);
	}
	sb_putc(s, '"');
}

static void
labels(struct sb *s, const struct mfile *f, int worker) {
	sb_puts(s, "job=");
	label_value(s, f->job ? f->job : "");
	if (f->rank >= 0)
		sb_printf(s, ",rank=\"%lld\"", (long long)f->rank);
	if (f->local_rank >= 0)
		sb_printf(s, ",local_rank=\"%lld\"", (long long)f->local_rank);
	sb_puts(s, ",host=");
	label_value(s, f->host ? f->host : "");
	sb_printf(s, ",pid=\"%lld\",role=\"%s\"", (long long)f->pid, worker ? "worker" : "main");
}

/* name{labels[,extra]} value, into family fam's text. */
static void
sample(struct sb *fam, int which, const char *lab, const char *extra, const char *value) {
	sb_printf(fam, "%s{%s%s%s} %s\n", fams[which].name, lab, extra ? "," : "", extra ? extra : "",
		  value);
}

static void
sample_i(struct sb *fam, int which, const char *lab, const char *extra, int64_t v) {
	char t[32];
	snprintf(t, sizeof t, "%lld", (long long)v);
	sample(fam, which, lab, extra, t);
}

/* The first frame of a row's name (report's "f (file:line) < caller <
 * ..."), into buf. */
static const char *
where_of(const char *name, char *buf, size_t n) {
	const char *lt = strstr(name, " < ");
	size_t k = lt ? (size_t)(lt - name) : strlen(name);
	size_t j = 0;
	for (size_t i = 0; i < k && j + 1 < n; i++) /* "   via " as " via " */
		if (name[i] != ' ' || (j && buf[j - 1] != ' '))
			buf[j++] = name[i];
	buf[j] = 0;
	return buf;
}

struct line {
	char where[256];
	int kind;
	int64_t live;
};

/* The process's own figures at snapshot s (last: its last snapshot, to
 * say whether it still runs). */
static void
process_samples(struct sb *fam, const char *L, const struct snap *s, const struct snap *last) {
	sample_i(&fam[F_HEAP_LIVE], F_HEAP_LIVE, L, NULL, s->tot[K_HEAP].live_bytes);
	sample_i(&fam[F_HEAP_PEAK], F_HEAP_PEAK, L, NULL, s->tot[K_HEAP].peak_bytes);
	sample_i(&fam[F_MMAP_LIVE], F_MMAP_LIVE, L, NULL, s->tot[K_MMAP].live_bytes);
	for (int d = 0; d < MAX_DEVS; d++)
		if (s->dev_live[d] >= 0) {
			char ex[32];
			snprintf(ex, sizeof ex, "device=\"%d\"", d);
			sample_i(&fam[F_DEV_LIVE], F_DEV_LIVE, L, ex, s->dev_live[d]);
			if (s->dev_total[d] > 0)
				sample_i(&fam[F_DEV_TOTAL], F_DEV_TOTAL, L, ex, s->dev_total[d]);
		}
	if (s->rss_bytes >= 0)
		sample_i(&fam[F_RSS], F_RSS, L, NULL, s->rss_bytes);
	if (s->cg_current >= 0)
		sample_i(&fam[F_CG_USE], F_CG_USE, L, NULL, s->cg_current);
	if (s->cg_max >= 0)
		sample_i(&fam[F_CG_MAX], F_CG_MAX, L, NULL, s->cg_max);
	double step = snap_step(s, "step");
	if (!isnan(step)) {
		char t[48];
		snprintf(t, sizeof t, "%.17g", step);
		sample(&fam[F_STEP], F_STEP, L, NULL, t);
	}
	sample_i(&fam[F_SNAPS], F_SNAPS, L, NULL, s->seq + 1);
	sample_i(&fam[F_DROPPED], F_DROPPED, L, NULL, s->dropped_snaps);
	sample_i(&fam[F_SEQ], F_SEQ, L, NULL, s->seq);
	char t[48];
	snprintf(t, sizeof t, "%lld.%09lld", (long long)(s->wall_ns / 1000000000),
		 (long long)(s->wall_ns % 1000000000));
	sample(&fam[F_TIME], F_TIME, L, NULL, t);
	int ended = !strcmp(last->reason, "exit") || snap_killed(last);
	sample_i(&fam[F_RUNNING], F_RUNNING, L, NULL, !ended);
}

/* The rows at snapshot seq, merged by their first frame (two rows that
 * differ by their callers are one series), the largest o->top (5). */
static void
line_samples(struct mfile *f, const struct opts *o, long seq, struct sb *fam, const char *L) {
	int want = o->top > 0 ? o->top : 5;
	if (want > LINES_MAX)
		want = LINES_MAX;
	struct ask a = o->ask;
	a.snapshot = seq;
	const struct snap *rs;
	int at_peak;
	size_t nr = 0;
	struct row *rows = answer_rows_at(f, &a, &rs, &at_peak, &nr);
	struct line *ln = xcalloc(nr ? nr : 1, sizeof *ln);
	size_t nl = 0;
	for (size_t i = 0; i < nr; i++) {
		if (rows[i].live <= 0)
			continue;
		char w[256];
		where_of(rows[i].name, w, sizeof w);
		size_t k = 0;
		while (k < nl && (ln[k].kind != rows[i].kind || strcmp(ln[k].where, w)))
			k++;
		if (k == nl) {
			snprintf(ln[nl].where, sizeof ln[nl].where, "%s", w);
			ln[nl++].kind = rows[i].kind;
		}
		ln[k].live += rows[i].live;
	}
	/* largest first (rows came largest first; merging may reorder) */
	for (size_t i = 1; i < nl; i++)
		for (size_t j = i; j > 0 && ln[j - 1].live < ln[j].live; j--) {
			struct line x = ln[j];
			ln[j] = ln[j - 1];
			ln[j - 1] = x;
		}
	for (size_t i = 0; i < nl && i < (size_t)want; i++) {
		struct sb ex = {0};
		sb_puts(&ex, "where=");
		label_value(&ex, ln[i].where);
		sb_printf(&ex, ",kind=\"%s\"", kind_names[ln[i].kind]);
		sample_i(&fam[F_LINE], F_LINE, L, ex.p, ln[i].live);
		sb_free(&ex);
	}
	free(ln);
	rows_free(rows, nr);
}

static void
one_file(struct mfile *f, const struct opts *o, struct sb *fam) {
	if (!f->nsnaps)
		return; /* a header alone: nothing to say */
	long seq = f->sel != SNAP_DEFAULT ? f->sel
		   : o->ask.snapshot == SNAP_DEFAULT ? SNAP_LAST : o->ask.snapshot;
	const struct snap *s = pick_snapshot(f, seq, -1);
	const struct snap *last = &f->snaps[f->nsnaps - 1];
	struct proc_facts pf;
	proc_facts(f, &pf);
	struct sb lab = {0};
	labels(&lab, f, pf.dataloader || pf.pool);
	const char *L = lab.p;
	process_samples(fam, L, s, last);
	line_samples(f, o, seq, fam, L);
	sb_free(&lab);
}

/* A process's samples, each family's apart, and who it is: two files of
 * one pid on one host (an image and the one it exec'd) would give the
 * same series twice, which Prometheus and the Pushgateway refuse; the
 * later image's are kept, as its .prom file replaced the earlier one's. */
struct proc_out {
	char *host;
	int64_t pid, start;
	int shadowed;
	struct sb fam[NFAM];
};

int
cmd_metrics(struct opts *o) {
	struct run r;
	cmd_list(o, &r, 0); /* read one at a time */
	struct proc_out *v = NULL;
	size_t n = 0, cap = 0;
	struct mfile f;
	while (run_next(&r, &f)) {
		if (n == cap)
			v = xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
		struct proc_out *p = &v[n++];
		memset(p, 0, sizeof *p);
		p->host = xstrdup(f.host ? f.host : "");
		p->pid = f.pid;
		p->start = f.start_wall_ns;
		one_file(&f, o, p->fam);
		mfile_free(&f);
	}
	for (size_t k = 0; k < n; k++) /* a later image of its pid shadows it */
		for (size_t j = 0; j < n && !v[k].shadowed; j++)
			v[k].shadowed = j != k && v[j].pid == v[k].pid && !strcmp(v[j].host, v[k].host) &&
					(v[j].start > v[k].start || (v[j].start == v[k].start && j > k));
	for (int i = 0; i < NFAM; i++) {
		int head = 0;
		for (size_t k = 0; k < n; k++) {
			if (v[k].shadowed || !v[k].fam[i].len)
				continue;
			if (!head++)
				printf("# HELP %s %s\n# TYPE %s %s\n", fams[i].name, fams[i].help, fams[i].name,
				       fams[i].type);
			fwrite(v[k].fam[i].p, 1, v[k].fam[i].len, stdout);
		}
	}
	for (size_t k = 0; k < n; k++) {
		for (int i = 0; i < NFAM; i++)
			sb_free(&v[k].fam[i]);
		free(v[k].host);
	}
	free(v);
	run_free(&r);
	return 0;
}
