/* cmd.h — the command context every view and export receives (struct
 * opts, filled by main.c from the command line) and the subcommands.
 * Views and exports call what is below them (answer/, read/, model/,
 * base/) and this layer, never main.c nor each other. */
#ifndef MTA_CMD_H
#define MTA_CMD_H
#include "answer/answer.h"
#include "model/model.h"

struct opts {
	struct ask ask;    /* what is asked: --kind, --stacks, --snapshot, --warmup,
			    * --device */
	int json;          /* --json */
	int stacks;        /* --stacks */
	int native;        /* --native */
	int by_site;       /* --by site: rows by call site (default: by the user's line) */
	int top;           /* --top N */
	int kind;          /* --kind K, -1 = all (also ask.kind) */
	int device;        /* --device N, -1 = all (ask.only_gpu = N + 1) */
	double warmup;     /* --warmup F (also ask.warmup) */
	const char *out;   /* -o FILE */
	const char *metric; /* --metric live|allocs|alloc_bytes (flame) */
	long snapshot;     /* --snapshot N|peak|last (also ask.snapshot) */
	int merge;         /* --merge (pprof): one profile of all processes */
	int folded;        /* --folded (flame): folded stacks, not an SVG */
	int torch_version; /* --format (torch): 2 (default) or 113 (PyTorch 1.13) */
	double interval;   /* --interval S (top): seconds between refreshes */
	int once;          /* --once (top): one frame, then exit */
	int all;           /* --all (ranks): every rank's row */
	int each;          /* --each (pprof): a profile a process */
	int all_processes; /* --all-processes: helpers in full, not summarized */
	char **paths;      /* positional */
	int npaths;
};

int cmd_report(struct opts *o);
int cmd_leaks(struct opts *o);
int cmd_diff(struct opts *o);
int cmd_ranks(struct opts *o);
int cmd_oom(struct opts *o);
int cmd_torch(struct opts *o);
int cmd_flame(struct opts *o);
int cmd_html(struct opts *o);
int cmd_pprof(struct opts *o);
int cmd_functions(struct opts *o);
int cmd_top(struct opts *o);
int cmd_metrics(struct opts *o);
int cmd_run(int argc, char **argv);

/* Read o's paths into r (run_load) and apply the context (--native). */
void cmd_load(struct opts *o, struct run *r);
/* List o's paths into r (run_list, dumps: the OOM dumps), to be read one
 * at a time by each_file: memory bounded by the largest file. */
void cmd_list(struct opts *o, struct run *r, int dumps);
/* Apply the context to files loaded another way (OOM dumps). */
void cmd_native(struct opts *o, struct run *r);
/* The same for one more file or directory (diff's two sides). */
void cmd_load_paths(struct opts *o, struct run *r, char **paths, int npaths);
/* Run fn on every file of r (loaded, or listed: then each read before fn
 * and freed after it); with --json, their objects go out as {"<key>":[...]}
 * on stdout.  Returns 0. */
struct sb;
int each_file(struct run *r, struct opts *o, const char *key,
	      void (*fn)(struct mfile *f, struct opts *o, struct sb *j, int first));

#endif
