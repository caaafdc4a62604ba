/* top.c — `memtally top DIR|FILE...`: a live view of a running job.
 *
 * Files are followed as they grow (follow_poll: only what was appended
 * since the last refresh, whole lines; a line still being written waits),
 * new ranks' and workers' files are picked up as they appear, and OOM
 * dumps are listed as they are written.  A frame shows, per process, the
 * last snapshot's RSS, PSS, heap, mmap, device bytes and the cgroup's
 * usage against its limit, with the live total's trend over the run and
 * over the last minute (per step when steps are marked); then, for the
 * selected process, its top call sites by live bytes or by growth over
 * the last minute, named as `report` names them, and its leak suspects as
 * `leaks` ranks them.
 *
 * Keys (a terminal): q quit, s sort by live / growth, n / p next and
 * previous process, x the top call site's stack.  Plain ANSI (clear and
 * home), so it works over SSH without a terminfo database.  With --once,
 * or when stdout is not a terminal, one frame is printed and it exits. */
#include "cmd/cmd.h"
#include "answer/sites.h"
#include "answer/procs.h"
#include "base/util.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define READ_STEP (8u << 20) /* bytes read from a file at a time */

struct proc {
	char *path;
	struct follow *w;
	long lines;
	/* the leak suspects, computed again only when the file has grown */
	struct leaks sus;
	long sus_lines; /* lines when computed, -1: never */
};

struct view {
	struct proc *p;
	size_t n, cap;
	char **dumps;
	size_t ndumps, capd;
	char **refused;  /* files follow_open refused (said once) */
	size_t nrefused, capr;
	size_t sel;
	int by_growth, show_stack, native, by_site;
	uint64_t polled_bytes;
};

static int
known(struct view *v, const char *path) {
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->p[i].path, path))
			return 1;
	for (size_t i = 0; i < v->nrefused; i++)
		if (!strcmp(v->refused[i], path))
			return 1;
	return 0;
}

static void
add_file(struct view *v, const char *path) {
	if (known(v, path))
		return;
	struct follow *w = follow_open(path);
	if (!w) { /* not a regular file: said once, not followed */
		v->refused = xgrow(v->refused, v->nrefused + 1, &v->capr, sizeof *v->refused);
		v->refused[v->nrefused++] = xstrdup(path);
		return;
	}
	follow_file(w)->native = v->native;
	follow_file(w)->by_site = v->by_site;
	v->p = xgrow(v->p, v->n + 1, &v->cap, sizeof *v->p);
	v->p[v->n++] = (struct proc){.path = xstrdup(path), .w = w, .sus_lines = -1};
}

static int
is_dump(const char *name) {
	return strstr(name, ".oom") != NULL;
}

/* New files in the directories named (new ranks, forked workers), dumps. */
static void
discover(struct view *v, struct opts *o) {
	for (int i = 0; i < o->npaths; i++) {
		struct stat st;
		if (stat(o->paths[i], &st))
			continue;
		if (!S_ISDIR(st.st_mode)) {
			add_file(v, o->paths[i]);
			continue;
		}
		DIR *d = opendir(o->paths[i]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (strncmp(e->d_name, "memtally.", 9) || !jsonl_ext(e->d_name))
				continue;
			struct sb p = {0};
			sb_printf(&p, "%s/%s", o->paths[i], e->d_name);
			if (is_dump(e->d_name)) {
				int seen = 0;
				for (size_t k = 0; k < v->ndumps && !seen; k++)
					seen = !strcmp(v->dumps[k], p.p);
				if (!seen) {
					v->dumps = xgrow(v->dumps, v->ndumps + 1, &v->capd, sizeof *v->dumps);
					v->dumps[v->ndumps++] = xstrdup(p.p);
				}
			} else {
				add_file(v, p.p);
			}
			sb_free(&p);
		}
		closedir(d);
	}
}

/* a + b held to int64's range (a file's figures may be any int64) */
static int64_t
sat_add(int64_t a, int64_t b) {
	int64_t r;
	return !__builtin_add_overflow(a, b, &r) ? r : a > 0 ? INT64_MAX : INT64_MIN;
}

static int64_t
host_of(const struct snap *s) {
	return sat_add(s->tot[K_HEAP].live_bytes, s->tot[K_MMAP].live_bytes);
}

static int64_t
dev_of(const struct snap *s) {
	return sat_add(sat_add(s->tot[K_CUDA].live_bytes, s->tot[K_CUDA_MANAGED].live_bytes),
		       s->tot[K_CUDA_VMM].live_bytes);
}

/* The snapshot a minute before the last; in a run shorter than two
 * minutes, the one half-way (what happens now, not start-up). */
static const struct snap *
minute_ago(const struct mfile *f) {
	const struct snap *last = &f->snaps[f->nsnaps - 1];
	int64_t span = last->elapsed_ms - f->snaps[0].elapsed_ms;
	int64_t back = span < 120000 ? span / 2 : 60000;
	for (size_t i = f->nsnaps; i-- > 0;)
		if (f->snaps[i].elapsed_ms <= last->elapsed_ms - back)
			return &f->snaps[i];
	return &f->snaps[0];
}

static double
step_of(const struct snap *s, const char *mark) {
	for (int k = 0; mark && k < s->nmarks; k++)
		if (!strcmp(s->marks[k].name, mark))
			return s->marks[k].value;
	return NAN;
}

/* The change of the live total from a to b: per step when both carry
 * the step mark and it moved, per hour over an hour or more, else what
 * it came to ("+12.0 MiB in 40.0s"). */
/* A byte figure computed in double (a rate: never a division by an
 * integer that can be 0, nor a sum that overflows) as an int64, held to
 * its range (NaN: 0). */
static int64_t
clamp_i64(double v) {
	if (!(v == v))
		return 0;
	return v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? -INT64_MAX : (int64_t)v;
}

static const char *
trend(const struct snap *a, const struct snap *b, const char *mark, char *buf, size_t n) {
	char x[16], t[16];
	/* in double: the figures are the file's, any int64 (a racy sum may
	 * be negative), and their sums must not overflow */
	double d = (double)host_of(b) + (double)dev_of(b) - (double)host_of(a) - (double)dev_of(a);
	double ms = (double)b->elapsed_ms - (double)a->elapsed_ms;
	double sa = step_of(a, mark), sb = step_of(b, mark);
	const char *sign = d < 0 ? "-" : "+";
	/* steps are the user's marks: 0.05 apart is a step of 0.05, so the
	 * rate divides by their difference as a double (an integer
	 * difference truncated to 0 was a SIGFPE) */
	if (a == b || ms <= 0)
		snprintf(buf, n, "-");
	else if (!isnan(sa) && !isnan(sb) && sb > sa)
		snprintf(buf, n, "%s%s/step", sign, human(clamp_i64(fabs(d) / (sb - sa)), x));
	else if (ms >= 3600000)
		snprintf(buf, n, "%s%s/h", sign, human(clamp_i64(fabs(d) * 3600000.0 / ms), x));
	else
		snprintf(buf, n, "%s%s in %s", sign, human(clamp_i64(fabs(d)), x),
			 human_ms(clamp_i64(ms), t));
	return buf;
}

static const char *
opt_bytes(int64_t v, char *buf) {
	if (v < 0)
		return "-";
	return human(v, buf);
}

struct grow {
	struct row *r;
	int64_t growth;
};

static int
cmp_grow(const void *a, const void *b) {
	const struct grow *x = a, *y = b;
	if (x->growth != y->growth)
		return x->growth < y->growth ? 1 : -1;
	return strcmp(x->r->name, y->r->name);
}

static int
cmp_live(const void *a, const void *b) {
	const struct grow *x = a, *y = b;
	if (x->r->live != y->r->live)
		return x->r->live < y->r->live ? 1 : -1;
	return strcmp(x->r->name, y->r->name);
}

/* Rows now and a minute ago, each now-row with its growth since. */
static struct grow *
rows_growth(struct mfile *f, const struct ask *ask, const struct snap *last,
	    const struct snap *ago, struct row **rn, size_t *n, struct row **rt, size_t *nt) {
	size_t ns;
	struct site *v = snap_sites(f, ago, &ns);
	*rt = answer_rows(f, ask, v, ns, 0, nt);
	free(v);
	v = snap_sites(f, last, &ns);
	*rn = answer_rows(f, ask, v, ns, 0, n);
	free(v);
	struct keyix ix = {0};
	for (size_t i = 0; i < *nt; i++) {
		int fresh;
		*row_slot(&ix, &(*rt)[i], &fresh) = i + 1;
	}
	struct grow *g = xmalloc((*n ? *n : 1) * sizeof *g);
	for (size_t i = 0; i < *n; i++) {
		int fresh;
		uint64_t *slot = row_slot(&ix, &(*rn)[i], &fresh);
		int64_t was = fresh ? 0 : (*rt)[*slot - 1].live;
		g[i] = (struct grow){&(*rn)[i], (*rn)[i].live - was};
	}
	keyix_free(&ix);
	return g;
}

static void
suspects_frame(struct sb *o, struct proc *pr, struct mfile *f, struct opts *op, int width) {
	char b[16], name[1100];
	if (pr->sus_lines != pr->lines) {
		leaks_free(&pr->sus);
		answer_leaks(f, &op->ask, &pr->sus);
		pr->sus_lines = pr->lines;
	}
	const struct leaks *l = &pr->sus;
	sb_puts(o, "\n  leak suspects (as `memtally leaks` ranks them):\n");
	for (size_t i = 0; i < l->n && i < 5; i++) {
		const struct leak *t = &l->v[i];
		site_row_name(&(struct site_row){.name = t->r.name, .nsites = t->r.nsites}, 40, !width,
			      name, sizeof name);
		char r[48];
		rate_text(t->per_hour, t->per_step, l->pts[l->npts - 1]->elapsed_ms - t->from_ms, 1, r,
			  sizeof r);
		sb_printf(o, "  %2zu %18s %10s %s\n", i + 1, r, human(t->r.live, b), name);
	}
	if (!l->n)
		sb_printf(o, "  (none%s)\n", l->npts < 3 ? ": fewer than 3 snapshots in the growth window yet" : "");
}

/* The selected process's rows, by live bytes or by growth over the last
 * minute, grouped as report groups them. */
static void
sites_frame(struct sb *o, struct proc *pr, struct view *v, struct opts *op, int width) {
	struct mfile *f = follow_file(pr->w);
	const struct snap *last = &f->snaps[f->nsnaps - 1], *ago = minute_ago(f);
	size_t n, nt;
	struct row *rn, *rt;
	struct grow *g = rows_growth(f, &op->ask, last, ago, &rn, &n, &rt, &nt);
	if (n)
		xqsort(g, n, sizeof *g, v->by_growth ? cmp_grow : cmp_live);
	char a[16], b[16], t[16], name[1100];
	sb_printf(o, "\n  top call sites by %s (growth over the last %s)   [s] sort  [x] stack\n",
		  v->by_growth ? "growth" : "live bytes", human_ms(last->elapsed_ms - ago->elapsed_ms, t));
	sb_printf(o, "  %11s %11s %-9s %s\n", "live", "growth", "kind", "where");
	int shown = 0;
	for (size_t i = 0; i < n && shown < op->top; i++) {
		if (!g[i].r->live && !g[i].growth)
			continue;
		site_row_name(&(struct site_row){.name = g[i].r->name, .nsites = g[i].r->nsites}, 37,
			      !width, name, sizeof name);
		char gr[24];
		snprintf(gr, sizeof gr, "%s%s", g[i].growth < 0 ? "-" : g[i].growth ? "+" : "",
			 human(llabs(g[i].growth), b));
		sb_printf(o, "  %11s %11s %-9s %s\n", human(g[i].r->live, a), gr,
			  kind_names[g[i].r->kind], name);
		if (v->show_stack && !shown) {
			struct frame fr[256];
			int nf = site_frames(f, g[i].r->stack, fr, 256);
			for (int k = 0; k < nf; k++)
				sb_printf(o, "        %s\n", sym_text(&fr[k], name, sizeof name, 0));
		}
		shown++;
	}
	if (!shown)
		sb_puts(o, "  (no call sites yet)\n");
	free(g);
	rows_free(rn, n);
	rows_free(rt, nt);
	suspects_frame(o, pr, f, op, width);
}

static int
cmp_proc(const void *x, const void *y) {
	const struct proc *a = x, *b = y;
	const struct mfile *fa = follow_file(a->w), *fb = follow_file(b->w);
	if (fa->rank != fb->rank)
		return fa->rank < fb->rank ? -1 : 1;
	return fa->pid < fb->pid ? -1 : fa->pid > fb->pid;
}

/* The phases (answer/phase.c): the one open at the last snapshot, the one
 * each kind's peak was reached in, and the largest spike's. */
static void
phase_line(struct sb *o, struct mfile *f, struct opts *op) {
	const struct snap *s = &f->snaps[f->nsnaps - 1];
	char a[16], ph[96], nm[64];
	struct sb t = {0};
	if (s->phase)
		sb_printf(&t, "now in %s", phase_name(f, s->phase, nm, sizeof nm));
	for (int k = 0; k < NKINDS; k++)
		if (s->tot[k].present && s->tot[k].peak_phase)
			sb_printf(&t, "%s%s peak %s %s", t.len ? "; " : "", kind_names[k],
				  human(s->tot[k].peak_bytes, a),
				  phase_during(f, s->tot[k].peak_phase, s->tot[k].peak_step, ph, sizeof ph));
	if (f->nspans) {
		struct spike v[8];
		size_t n = answer_spikes(f, &op->ask, v, 8), i = 0;
		while (i < n && !v[i].phase)
			i++;
		if (i < n) /* the largest spike in a phase */
			sb_printf(&t, "%sspike %s %s", t.len ? "; " : "", human(v[i].r.peak, a),
				  phase_during(f, v[i].phase, v[i].step, ph, sizeof ph));
		spikes_free(v, n);
	}
	if (t.len)
		sb_printf(o, "  phases: %s\n", t.p);
	sb_free(&t);
}

static void
frame(struct sb *o, struct view *v, struct opts *op, int width) {
	char a[16], b[16], c[16], d[16], e[16], g[16], lab[128], t1[48], t2[48];
	time_t now = time(NULL);
	char when[32];
	strftime(when, sizeof when, "%H:%M:%S", localtime(&now));
	sb_printf(o, "memtally top  %s  %zu process%s, %zu OOM dump%s   [q] quit  [n/p] process\n", when,
		  v->n, v->n == 1 ? "" : "es", v->ndumps, v->ndumps == 1 ? "" : "s");
	sb_printf(o, "  %-22s %9s %9s %9s %9s %9s %-17s %-20s %s\n", "process", "rss", "pss", "heap",
		  "mmap", "device", "cgroup", "trend (run)", "last minute (or half)");
	for (size_t i = 0; i < v->n; i++) {
		struct mfile *f = follow_file(v->p[i].w);
		file_label(f, lab, sizeof lab);
		if (!f->nsnaps) {
			sb_printf(o, "%s %-22s (no snapshot yet)\n", i == v->sel ? ">" : " ", lab);
			continue;
		}
		const struct snap *s = &f->snaps[f->nsnaps - 1];
		const char *mark = s->nmarks ? s->marks[0].name : NULL;
		char cg[48];
		if (s->cg_current >= 0 && s->cg_max > 0)
			snprintf(cg, sizeof cg, "%s/%s", human(s->cg_current, e), human(s->cg_max, g));
		else
			snprintf(cg, sizeof cg, "%s", opt_bytes(s->cg_current, e));
		sb_printf(o, "%s %-22s %9s %9s %9s %9s %9s %-17s %-20s %s\n", i == v->sel ? ">" : " ", lab,
			  opt_bytes(s->rss_bytes, a), opt_bytes(s->pss_bytes, b),
			  human(s->tot[K_HEAP].live_bytes, c), human(s->tot[K_MMAP].live_bytes, d),
			  human(dev_of(s), g), cg, trend(&f->snaps[0], s, mark, t1, sizeof t1),
			  trend(minute_ago(f), s, mark, t2, sizeof t2));
	}
	if (!v->n)
		sb_puts(o, "  (no memtally files yet)\n");
	if (v->n && v->sel < v->n) {
		struct mfile *f = follow_file(v->p[v->sel].w);
		if (f->nsnaps) {
			char cmd[256];
			snprintf(cmd, sizeof cmd, "%s", f->argv ? f->argv : "?");
			sb_printf(o, "\n%s  %s  snapshot %lld (%s) at %s\n", file_label(f, lab, sizeof lab), cmd,
				  (long long)f->snaps[f->nsnaps - 1].seq, f->snaps[f->nsnaps - 1].reason,
				  human_ms(f->snaps[f->nsnaps - 1].elapsed_ms, a));
			phase_line(o, f, op);
			sites_frame(o, &v->p[v->sel], v, op, width);
		}
	}
	uint64_t left = 0, all = 0;
	for (size_t i = 0; i < v->n; i++) {
		uint64_t size;
		left += follow_pending(v->p[i].w, &size);
		all += size;
	}
	if (left)
		sb_printf(o, "\n  (reading: %s of %s not read yet)\n", human((int64_t)left, a),
			  human((int64_t)all, b));
	if (v->ndumps) {
		sb_puts(o, "\n  OOM dumps (memtally oom FILE):\n");
		for (size_t i = v->ndumps > 5 ? v->ndumps - 5 : 0; i < v->ndumps; i++)
			sb_printf(o, "    %s\n", v->dumps[i]);
	}
}

/* ---- the terminal ---- */

static struct termios saved_tio;
static int raw_on;

static void
restore_tty(void) {
	if (raw_on) {
		tcsetattr(0, TCSANOW, &saved_tio);
		raw_on = 0;
	}
}

static void
on_signal(int sig) {
	restore_tty();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
raw_tty(void) {
	if (!isatty(0) || tcgetattr(0, &saved_tio))
		return;
	struct termios t = saved_tio;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(0, TCSANOW, &t))
		return;
	raw_on = 1;
	atexit(restore_tty);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
}

static uint64_t
now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Read what the files gained, a step from each in turn, until all are
 * read or the time for a refresh is spent (then the frame says how much
 * is left; the next refresh goes on): keys stay answered however much a
 * job writes.  until_ms 0: read everything (--once). */
static void
refresh(struct view *v, struct opts *o, uint64_t until_ms) {
	size_t before = v->n;
	discover(v, o);
	for (int more = 1; more;) {
		more = 0;
		/* a compressed file's last bytes may be read and not yet decoded
		 * into lines: poll until a poll takes no line and nothing is left
		 * unread (a file cut to its first part had top judge only that),
		 * or a poll takes no line and reads no byte: bytes that wait for
		 * more (a file of three bytes that may begin zstd's magic) are
		 * read at a later refresh, and --once ends (it spun for ever) */
		for (size_t i = 0; i < v->n; i++) {
			uint64_t size0, size1, left0 = follow_pending(v->p[i].w, &size0);
			long got = follow_poll(v->p[i].w, READ_STEP);
			uint64_t left = follow_pending(v->p[i].w, &size1);
			v->p[i].lines += got;
			/* bytes read so far: the size less what is left */
			more |= got > 0 || (left > 0 && size1 - left > size0 - left0);
		}
		if (until_ms && now_ms() >= until_ms)
			break;
	}
	/* keep the selection on the same process when new ones sort before it */
	const char *selpath = before && v->sel < before ? v->p[v->sel].path : NULL;
	xqsort(v->p, v->n, sizeof *v->p, cmp_proc);
	for (size_t i = 0; selpath && i < v->n; i++)
		if (v->p[i].path == selpath)
			v->sel = i;
	if (!before && v->n) { /* the first frame opens on the busiest rank or trainer */
		struct proc_facts *pf = xmalloc(v->n * sizeof *pf);
		for (size_t i = 0; i < v->n; i++)
			proc_facts(follow_file(v->p[i].w), &pf[i]);
		v->sel = procs_lead(pf, v->n);
		free(pf);
	}
}

/* A frame to the terminal: its text through text_escape (names from the
 * files may hold control characters), the screen control written as it
 * is (main.c's stdout filter would have escaped it too). */
static void
show(struct sb *s, int clear) {
	struct textesc t = {0};
	struct sb e = {0};
	text_escape(&t, s->p ? s->p : "", s->len, &e);
	fflush(stdout);
	if (clear)
		write_all(1, "\x1b[H\x1b[2J", 7); /* home, clear */
	if (e.len)
		write_all(1, e.p, e.len);
	sb_free(&e);
}

int
cmd_top(struct opts *o) {
	struct view v = {.native = o->native, .by_site = o->by_site};
	for (int i = 0; i < o->npaths; i++) {
		struct stat st;
		if (stat(o->paths[i], &st))
			die(EXIT_BAD_INPUT, "%s: %s", o->paths[i], strerror(errno));
	}
	int live = !o->once && isatty(1);
	int width = live ? term_width() : 0;
	uint64_t budget = (uint64_t)(o->interval * 700); /* ms of a refresh for reading */
	refresh(&v, o, live ? now_ms() + budget : 0);
	if (!live) { /* the files as they are now: nothing waits for more */
		for (size_t i = 0; i < v.n; i++)
			v.p[i].lines += follow_last(v.p[i].w, READ_STEP);
		struct sb s = {0};
		frame(&s, &v, o, width);
		show(&s, 0);
		sb_free(&s);
		if (getenv("MEMTALLY_TOP_BENCH")) { /* make bench: what a refresh costs once caught up */
			uint64_t t0 = now_ms();
			for (int k = 0; k < 3; k++) {
				struct sb x = {0};
				refresh(&v, o, now_ms() + budget);
				frame(&x, &v, o, width);
				sb_free(&x);
			}
			fprintf(stderr, "memtally top: a refresh with nothing new: %.1f ms\n",
				(double)(now_ms() - t0) / 3);
		}
		return 0;
	}
	raw_tty();
	for (;;) {
		struct sb s = {0};
		frame(&s, &v, o, width);
		show(&s, 1);
		sb_free(&s);
		struct pollfd pf = {.fd = 0, .events = POLLIN};
		int r = poll(&pf, 1, (int)(o->interval * 1000));
		if (r > 0) {
			char k;
			if (read(0, &k, 1) == 1) {
				if (k == 'q' || k == 'Q')
					break;
				if (k == 's')
					v.by_growth = !v.by_growth;
				if (k == 'x')
					v.show_stack = !v.show_stack;
				if ((k == 'n' || k == 'j') && v.sel + 1 < v.n)
					v.sel++;
				if ((k == 'p' || k == 'k') && v.sel > 0)
					v.sel--;
			} else if (!isatty(0)) {
				/* stdin at its end (not a terminal): refresh on the timer */
				poll(NULL, 0, (int)(o->interval * 1000));
			}
			continue; /* redraw at once after a key */
		}
		refresh(&v, o, now_ms() + budget);
	}
	restore_tty();
	write_all(1, "\n", 1);
	return 0;
}
