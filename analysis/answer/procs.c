/* procs.c — the processes that matter and the helpers (procs.h). */
#include "answer/procs.h"
#include "answer/answer.h"
#include "base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MATERIAL_BYTES (64ll << 20) /* kilobytes are not an outlier */

static int
has_frame(const struct mfile *f, const char *file_part, const char *func) {
	for (size_t i = 1; i < f->npyframes; i++) {
		const struct pyframe *p = &f->pyframes[i];
		if (p->file && strstr(p->file, file_part) && (!func || (p->func && !strcmp(p->func, func))))
			return 1;
	}
	return 0;
}

static int
argv_has(const char *argv, const char *const *words) {
	for (; argv && *words; words++)
		if (strstr(argv, *words))
			return 1;
	return 0;
}

void
proc_facts(const struct mfile *f, struct proc_facts *p) {
	static const char *const tracker[] = {"multiprocessing.resource_tracker",
					      "multiprocessing.semaphore_tracker", NULL};
	static const char *const spawned[] = {"multiprocessing.spawn", "multiprocessing.forkserver",
					      "--multiprocessing-fork", NULL};
	static const char *const launcher[] = {"torchrun", "torch.distributed.run",
					       "torch.distributed.launch", "mpirun", "mpiexec",
					       "srun ", "prterun", NULL};
	memset(p, 0, sizeof *p);
	p->pid = f->pid, p->ppid = f->ppid, p->rank = f->rank;
	p->tracker = argv_has(f->argv, tracker);
	p->spawned = argv_has(f->argv, spawned);
	/* the launcher's own command line: its first words, not a rank's
	 * script that mentions it */
	char head[256];
	snprintf(head, sizeof head, "%s", f->argv ? f->argv : "");
	p->launcher_argv = argv_has(head, launcher) || (f->exe && strstr(f->exe, "torchrun"));
	p->dataloader = has_frame(f, "torch/utils/data/_utils/worker.py", "_worker_loop");
	p->pool = has_frame(f, "multiprocessing/pool.py", "worker");
	double first_step = NAN;
	for (size_t i = 0; i < f->nsnaps; i++) {
		const struct snap *s = &f->snaps[i];
		int64_t live = 0;
		for (int k = 0; k < NKINDS; k++)
			live += s->tot[k].present ? s->tot[k].live_bytes : 0;
		if (live > p->peak_live)
			p->peak_live = live;
		if (i + 1 == f->nsnaps)
			p->final_live = live;
		/* its own steps: the mark moved while it ran (a fork child
		 * inherits its parent's marks as they were) */
		double st = snap_step(s, "step");
		if (!isnan(st) && !isnan(first_step) && st != first_step)
			p->steps = 1;
		if (isnan(first_step))
			first_step = st;
	}
}

static int
cmp_i64(const void *x, const void *y) {
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

void
procs_classify(const struct proc_facts *v, size_t n, int *role) {
	int ranked = 0;
	for (size_t i = 0; i < n; i++)
		ranked |= v[i].rank >= 0;
	for (size_t i = 0; i < n; i++) {
		const struct proc_facts *p = &v[i];
		int parent_of_rank = 0, child_of_stepper = 0;
		for (size_t k = 0; k < n; k++) {
			parent_of_rank |= v[k].rank >= 0 && v[k].ppid == p->pid;
			child_of_stepper |= k != i && v[k].steps && v[k].pid == p->ppid;
		}
		if (p->tracker)
			role[i] = ROLE_TRACKER;
		else if (p->dataloader && !p->steps)
			role[i] = ROLE_DATALOADER;
		else if ((p->spawned || p->pool) && !p->steps && p->rank < 0)
			role[i] = ROLE_POOL;
		else if (p->rank < 0 && ranked && (parent_of_rank || p->launcher_argv))
			role[i] = ROLE_LAUNCHER;
		else if (child_of_stepper && !p->steps && p->rank < 0)
			role[i] = ROLE_WORKER;
		else
			role[i] = ROLE_MAIN;
	}
	int mains = 0;
	for (size_t i = 0; i < n; i++)
		mains += role[i] == ROLE_MAIN;
	if (!mains) { /* helpers alone: nothing to lead with, all shown */
		for (size_t i = 0; i < n; i++)
			role[i] = ROLE_MAIN;
		return;
	}
	/* a helper that stands out from its group, absolutely and relatively */
	int64_t *peaks = xmalloc((n ? n : 1) * sizeof *peaks);
	for (int r = ROLE_DATALOADER; r < NROLES; r++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (role[i] == r)
				peaks[m++] = v[i].peak_live;
		if (!m)
			continue;
		xqsort(peaks, m, sizeof *peaks, cmp_i64);
		int64_t med = peaks[m / 2];
		for (size_t i = 0; i < n; i++)
			if (role[i] == r && v[i].peak_live >= MATERIAL_BYTES &&
			    v[i].peak_live - med >= MATERIAL_BYTES && v[i].peak_live >= 2 * med)
				role[i] = ROLE_MAIN;
	}
	free(peaks);
}

const char *
role_name(int role, size_t n) {
	static const char *const names[NROLES][2] = {
		{"process", "processes"},
		{"DataLoader worker", "DataLoader workers"},
		{"pool worker", "pool workers"},
		{"launcher", "launchers"},
		{"resource tracker", "resource trackers"},
		{"worker", "workers"},
	};
	return names[role >= 0 && role < NROLES ? role : 0][n != 1];
}

const char *
role_summary(const struct proc_facts *v, const int *role, size_t n, int which, char *buf,
	     size_t len) {
	size_t m = 0;
	int64_t lo = INT64_MAX, hi = 0, plo = INT64_MAX, phi = 0;
	for (size_t i = 0; i < n; i++) {
		if (role[i] != which)
			continue;
		m++;
		lo = v[i].final_live < lo ? v[i].final_live : lo;
		hi = v[i].final_live > hi ? v[i].final_live : hi;
		plo = v[i].peak_live < plo ? v[i].peak_live : plo;
		phi = v[i].peak_live > phi ? v[i].peak_live : phi;
	}
	char a[16], b[16], c[16], d[16];
	if (!m)
		snprintf(buf, len, "no %s", role_name(which, 2));
	else if (lo == hi && plo == phi)
		snprintf(buf, len, "%zu %s: %s live at the end%s, peak %s", m, role_name(which, m),
			 human(lo, a), m > 1 ? " each" : "", human(phi, d));
	else
		snprintf(buf, len, "%zu %s: %s-%s live at the end each, peaks %s-%s", m,
			 role_name(which, m), human(lo, a), human(hi, b), human(plo, c), human(phi, d));
	return buf;
}

void
proc_growth(const struct leaks *l, struct proc_facts *p) {
	p->growth = 0;
	p->suspects = l->n;
	p->grow_where[0] = 0;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].growth > p->growth) {
			p->growth = l->v[i].growth;
			snprintf(p->grow_where, sizeof p->grow_where, "%s", l->v[i].r.name);
		}
}

const char *
role_growth(const struct proc_facts *v, const int *role, size_t n, int which, char *buf,
	    size_t len) {
	size_t m = 0, k = 0, top = n, pids = 0;
	double lo = 0, hi = 0;
	char ids[64] = "", a[16], b[16];
	for (size_t i = 0; i < n; i++) {
		if (role[i] != which)
			continue;
		m++;
		if (!v[i].suspects || v[i].growth <= 0)
			continue;
		if (!k || v[i].growth < lo)
			lo = v[i].growth;
		if (!k || v[i].growth > hi)
			hi = v[i].growth, top = i;
		k++;
		if (pids < 4) {
			size_t u = strlen(ids);
			snprintf(ids + u, sizeof ids - u, "%s%lld", pids ? ", " : "", (long long)v[i].pid);
		} else if (pids == 4) {
			size_t u = strlen(ids);
			snprintf(ids + u, sizeof ids - u, ", ...");
		}
		pids++;
	}
	buf[0] = 0;
	if (!k)
		return buf;
	human((int64_t)lo, a), human((int64_t)hi, b);
	snprintf(buf, len, "; %s%zu grow%s (pid%s %s): %s%s%s over %s window%s, at %s",
		 k == m && m > 1 ? "all " : "", k, k == 1 ? "s" : "", k == 1 ? "" : "s", ids,
		 k > 1 && strcmp(a, b) ? a : "", k > 1 && strcmp(a, b) ? "-" : "", b,
		 k == 1 ? "its" : "their", k == 1 ? "" : "s", v[top].grow_where);
	return buf;
}

size_t
procs_lead(const struct proc_facts *v, size_t n) {
	if (!n)
		return 0;
	int *role = xmalloc(n * sizeof *role);
	procs_classify(v, n, role);
	size_t best = n;
	for (int pass = 0; pass < 3 && best == n; pass++)
		for (size_t i = 0; i < n; i++) {
			int fits = role[i] == ROLE_MAIN &&
				   (pass == 0 ? v[i].rank >= 0 : pass == 1 ? v[i].steps : 1);
			if (fits && (best == n || v[i].peak_live > v[best].peak_live))
				best = i;
		}
	free(role);
	return best < n ? best : 0;
}
