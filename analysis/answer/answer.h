/* answer.h — the answers every view prints, computed here once, so that
 * `report`, `leaks`, `top`, `ranks`, `diff`, `functions`, `flame`,
 * `pprof` and the HTML page cannot disagree.  A view asks (struct ask),
 * an answer comes back as plain rows, and the view only prints them.
 *
 *   question             answer              default
 *   -------------------  ------------------  ---------------------------------
 *   what held memory     answer_rows()       the process peak: each call site's
 *                                            bytes when its kind's total was at
 *                                            its high-water mark (exact; the
 *                                            shim keeps it), else the snapshot
 *                                            with the most live bytes
 *   grouped how          a row               in Python the program's own line
 *                                            (sites.h, userline.c) "via" the
 *                                            largest site's library frame; else
 *                                            the first native frame outside the
 *                                            allocator and runtimes and two
 *                                            callers; sites that print alike are
 *                                            one row.  --by site: by call site;
 *                                            --native: native frames; --stacks:
 *                                            every site its own row
 *   over which window    answer_window()     after start-up and before teardown,
 *                                            in steps when a step mark exists
 *   what grows           answer_leaks()      rows ranked by sustained growth on
 *                                            that window (Theil-Sen, Kendall);
 *                                            a row that follows the step's
 *                                            workload is set apart (workfit)
 *   what spiked          answer_spikes()     call sites whose own high-water
 *                                            mark is at least twice, and 4 MiB
 *                                            over, their bytes at the process
 *                                            peak and late in the run (the
 *                                            median over the growth window's
 *                                            second half), with time and step
 *   in which phase       answer_phase_at()   the shortest phase span holding the
 *                                            moment (phase.c); a kind's peak
 *                                            says its own (totals.peak_phase)
 *   which processes      procs_classify()    the ranks, else the trainer and the
 *   matter               (answer/procs.h)    user's processes, in full; DataLoader
 *                                            and pool workers, launchers and
 *                                            resource trackers a line a group
 */
#ifndef MTA_ANSWER_H
#define MTA_ANSWER_H
#include "model/model.h"
#include <stddef.h>
#include <stdint.h>

/* What a view asks. */
struct ask {
	int kind;        /* one kind, or -1 for all */
	int apart;       /* every call site its own row (--stacks) */
	long snapshot;   /* SNAP_DEFAULT (the peak), SNAP_PEAK, SNAP_LAST or a seq;
			  * a file's own FILE@N / FILE@peak (mfile.sel) wins */
	double warmup;   /* the fraction of a run (or of its steps) left out
			  * at the start of the growth window */
	int only_gpu;    /* --device N: N + 1, only the call sites on GPU N
			  * (their bytes at that GPU's own peak); 0: all */
};

/* ---- the moment: which figures a view shows ---- */

/* The call sites of f at the asked moment, and what that moment is:
 * *at_peak set when the figures are the exact peak (each site's bytes at
 * its kind's high-water mark, a GPU's sites at their device's; live_bytes
 * holds them, live_count 0); with only_gpu, that GPU's sites alone;
 * *s the snapshot they come from.  Caller frees. */
struct site *answer_sites(struct mfile *f, const struct ask *a, const struct snap **s,
			  int *at_peak, size_t *n);
/* The moment in words: "at the peak", "at the last snapshot", "at
 * snapshot 12". */
const char *answer_moment_name(const struct mfile *f, const struct ask *a);

/* A row: the call sites that print alike (one name, one kind). */
struct row {
	char *name;      /* as report prints it, callers included */
	int kind, nsites; /* its sites holding bytes at the moment (all, when none does) */
	int nall;        /* every site it has */
	uint32_t stack;  /* its largest site's stack (--stacks, frames) */
	int64_t live;    /* at the moment asked (at the peak: bytes then) */
	int64_t live_now, count, allocs, alloc_bytes, frees;
	int64_t peak;    /* the largest own peak of its sites */
	int64_t top;     /* its largest site's live (whose stack it shows) */
};
/* The rows of sites v[0..n) (live_bytes as answer_sites gives them),
 * largest first; live_now from the last snapshot when at_peak. */
struct row *answer_rows(struct mfile *f, const struct ask *a, const struct site *v, size_t n,
			int at_peak, size_t *nr);
/* Rows of f at the asked moment (answer_sites, then answer_rows). */
struct row *answer_rows_at(struct mfile *f, const struct ask *a, const struct snap **s,
			   int *at_peak, size_t *nr);
void rows_free(struct row *r, size_t n);
/* answer_rows with the row names of f's stacks kept in names between
 * calls (the HTML page asks for rows at up to 100 snapshots of a file
 * whose names cost a symbolization each): zeroed at first, row_names_free
 * after; one ask's grouping (apart or not) per names. */
struct keyix;
struct row_names {
	char **by_stack;
	size_t n;
	int apart;
	/* for calls over many moments of one file (the page's tables):
	 * each stack's row group (+1; its name interned in groups), its
	 * label (site_label), and each (group, kind)'s row in the call
	 * (valid where stamp is the call's) */
	uint32_t *gid;
	char **label;
	struct keyix *groups;
	size_t ngroups;
	uint32_t *rowof, *stamp, call;
};
struct row *answer_rows_named(struct mfile *f, const struct ask *a, const struct site *v,
			      size_t n, int at_peak, size_t *nr, struct row_names *names);
void row_names_free(struct row_names *names);
/* Row r's slot in ix, keyed by its kind and name (what makes it one row),
 * for matching rows across files and moments (diff, top, the page). */
struct keyix;
uint64_t *row_slot(struct keyix *ix, const struct row *r, int *fresh);

/* ---- the window: where growth is measured ---- */

struct window {
	size_t lo, end;      /* the snapshots [lo, end) */
	size_t warm, tear;   /* how many were left out before and after */
	const char *mark;    /* the step mark it is counted in, or NULL */
	double step_lo, step_hi; /* that mark's values at lo and end - 1 */
	int by_step;         /* lo was chosen on steps, not time */
};
/* The growth window of f: with a step mark (a counter that never falls;
 * "step" first), from the warm-up fraction of the steps on and up to the
 * last snapshot that describes a step (the last of reason "step", else
 * the first at the last step; a death by signal at a later step instead):
 * the exit snapshot and whatever follows the steps are teardown; without,
 * from the warm-up fraction of the time and up to the teardown (a fall to
 * the end). */
void answer_window(const struct mfile *f, double warmup, struct window *w);
/* The same window cut to the snapshots that cover the steps [from, to]
 * (ranks: the steps every rank has): from the last at or before `from` to
 * the first at or after `to`; returns 0 when none of f's snapshots do. */
int answer_window_steps(const struct mfile *f, const struct window *w, double from, double to,
			struct window *out);
/* The step mark's value at snapshot s, NAN when it has none. */
double snap_step(const struct snap *s, const char *mark);

/* ---- growth ---- */

#define LEAK_MAXPTS 80
struct workfit {         /* live bytes ~ icpt + per * workload + beyond * hours */
	const char *on;      /* the workload's number ("tokens"), NULL: no fit */
	double per, icpt, r2, beyond;
};
struct leak {
	struct row r;        /* the row that grows (live: at the last point) */
	double per_hour, per_step, tau, growth, share;
	int64_t from_ms;     /* the window where it grows starts here */
	size_t w0;           /* ... at this point */
	struct workfit wf;   /* in leaks.follow: the fit it follows */
};
struct leaks {
	struct window win;
	const struct snap *pts[LEAK_MAXPTS];
	size_t npts, examined;  /* points used; rows examined */
	const char *mark;       /* per step: the mark, or NULL */
	struct leak *v;         /* ranked, fastest first */
	size_t n;
	/* rows that grew as suspects do but whose live bytes follow the
	 * step's workload (the snapshots' "workload": tokens, batch bytes, the
	 * program's numbers): not suspects; each with its fit (workfit) */
	struct leak *follow;
	size_t nfollow;
	/* the process over the top suspect's window */
	double sus_h, tracked_h, heap_h, rss_h, foot_h; /* bytes per hour (NAN: unknown) */
	int frag;               /* the footprint not live grows >= half the heap's
				 * growth, at the 99% interval's low end (growth.c) */
	int64_t win_ms;
};
void answer_leaks(struct mfile *f, const struct ask *a, struct leaks *out);
void leaks_free(struct leaks *l);

/* ---- why it is still alive ---- */

/* The "kept" record (model.h) that explains row r of f: a chain from a
 * root to a live object of one of the row's heap call sites (the sites
 * grouped as r's largest is; with --stacks that site), the search at
 * exit's first, then the one whose site held the most; NULL when none. */
const struct kept *answer_kept(struct mfile *f, const struct ask *a, const struct row *r);
/* Its chain as one line of text ("history (global list, t.py:3) [0]
 * Tensor .grad_fn SumBackward0 -> next 0 AddmmBackward0 -> saved
 * _saved_mat1 Tensor"), and as a JSON array of steps {"how","name",
 * "type","where"}. */
struct sb;
void kept_chain_text(struct sb *b, const struct kept *k);
void kept_chain_json(struct sb *j, const struct kept *k);
/* Why suspect t of l has no chain (answer_kept gave none), from the
 * file's "searched" records: returns the case, one of "not_heap" (the
 * search maps heap blocks only), "not_searched" (no search ran in the
 * process), "no_steps" (a process without steps: searched at exit only,
 * where growth cannot be followed), "no_path" (searched after the growth
 * began: no path from the program's names to its memory), "cut" (those
 * searches stopped at their budget), "share" (skipped: the searches had
 * taken their share of the run), "failed" (the search failed and is
 * off), "late" (the growth began after the last search of the steps);
 * and the sentence that says it in text.  NULL (nothing said) for a
 * process that is not Python's. */
const char *answer_unkept(const struct mfile *f, const struct leaks *l, const struct leak *t,
			  char *text, size_t n);

/* ---- spikes ---- */

struct spike {
	struct row r;        /* r.peak: the site's own high-water mark;
			      * r.live: its bytes at the process peak */
	int64_t peak_ms;     /* when its high-water mark was reached, -1: unknown */
	double step;         /* the step then, NAN: no step mark or unknown */
	int phase;           /* the phase then (phase.c), index + 1; 0: none */
};
/* Spikes of f, largest excess first (up to max); the process peak's
 * snapshot is f's last. */
size_t answer_spikes(struct mfile *f, const struct ask *a, struct spike *out, size_t max);
void spikes_free(struct spike *v, size_t n);

/* ---- phases (phase.c) ---- */

/* The phase whose span holds ms (the shortest of them): its index + 1
 * into f's phase names, 0 when none; *step its step at its begin. */
int answer_phase_at(const struct mfile *f, int64_t ms, double *step);
/* Phase ix (index + 1) as the views print it ("checkpoint save"), NULL
 * when none. */
const char *phase_name(const struct mfile *f, int ix, char *buf, size_t n);
/* "during checkpoint save at step 300" ("" when ix is 0; step NAN: no
 * step). */
const char *phase_during(const struct mfile *f, int ix, double step, char *buf, size_t n);

#endif
