/* procs.h — which processes of a run matter and which are helpers
 * (DataLoader workers, pool workers, launchers, resource trackers), so
 * every view leads with the same processes and summarizes the same
 * helpers, a line a group.  A process's facts are taken from its file
 * once (proc_facts: views that read files one at a time keep them after
 * the file is freed), then the run is classified at once (procs_classify). */
#ifndef MTA_PROCS_H
#define MTA_PROCS_H
#include "model/model.h"
#include <stddef.h>
#include <stdint.h>

enum proc_role {
	ROLE_MAIN,       /* shown in full: ranks, the trainer, the user's processes */
	ROLE_DATALOADER, /* a PyTorch DataLoader worker */
	ROLE_POOL,       /* a multiprocessing pool (or spawn/forkserver) worker */
	ROLE_LAUNCHER,   /* torchrun, mpirun, srun...: starts the ranks */
	ROLE_TRACKER,    /* multiprocessing's resource (semaphore) tracker */
	ROLE_WORKER,     /* a child of a process that steps, stepping none
			  * itself, with no frame that says what it is (a
			  * summary read: `ranks` has no Python frames) */
	NROLES
};

/* What classifying needs of a file (no pointer into it). */
struct proc_facts {
	int64_t pid, ppid, rank;
	int steps;            /* its "step" mark moved while it ran */
	int dataloader, pool; /* Python frames of a DataLoader worker, a pool worker */
	int tracker, spawned, launcher_argv; /* from its command line */
	int64_t peak_live;    /* highest live bytes of any snapshot (all kinds) */
	int64_t final_live;   /* at its last snapshot */
	/* growth (proc_growth; 0 and "" until then): its top leak suspect's
	 * growth over its window, bytes, how many suspects, that row's name */
	double growth;
	size_t suspects;
	char grow_where[160];
};
void proc_facts(const struct mfile *f, struct proc_facts *p);
/* p's growth fields from l, f's leaks (answer_leaks). */
struct leaks;
void proc_growth(const struct leaks *l, struct proc_facts *p);

/* role[i] of each of v[0..n).  Helpers are helpers only beside a process
 * that matters: a run of helpers alone (a worker's file named by itself)
 * is all ROLE_MAIN.  A helper whose peak stands out from its group's by a
 * material amount (at least 64 MiB and twice the group's median) is
 * ROLE_MAIN too: it is shown in full. */
void procs_classify(const struct proc_facts *v, size_t n, int *role);

/* The process a view opens on: the busiest (highest peak) of the ranks,
 * else of the processes that matter that marked steps, else of the
 * processes that matter; 0 when n is 0. */
/* What grows in the group (role[i] == which), to follow role_summary's
 * line: "; 1 grows (pid 41): 5.07 MiB over its window, at dl.py:12  kept.append(..)"
 * naming the processes that grow (up to 4 pids), the range of their top
 * suspects' growth and the largest's row; "" when nothing grows (or
 * proc_growth was not asked). */
const char *role_growth(const struct proc_facts *v, const int *role, size_t n, int which,
			char *buf, size_t len);

size_t procs_lead(const struct proc_facts *v, size_t n);

/* "DataLoader worker", "pool worker", "launcher", "resource tracker";
 * plural with n != 1. */
const char *role_name(int role, size_t n);

/* One line for a group's figures, e.g. "2 DataLoader workers: 75.5-95.9
 * KiB live at the end each", into buf (what a view appends is its own:
 * "nothing grows").  The group is v[i] with role[i] == role. */
const char *role_summary(const struct proc_facts *v, const int *role, size_t n, int which,
			 char *buf, size_t len);
#endif
