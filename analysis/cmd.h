/* cmd.h — the subcommands and their shared options. */
#ifndef MTA_CMD_H
#define MTA_CMD_H
#include "model/model.h"

struct opts {
	int json;          /* --json */
	int stacks;        /* --stacks */
	int top;           /* --top N */
	int kind;          /* --kind K, -1 = all */
	double warmup;     /* --warmup F (leaks) */
	const char *out;   /* -o FILE (flame, html, torch) */
	const char *metric; /* --metric live|allocs|alloc_bytes (flame) */
	long snapshot;     /* --snapshot N|peak: SNAP_LAST, SNAP_PEAK or a seq */
	int merge;         /* --merge (pprof): one profile of all processes */
	int folded;        /* --folded (flame): folded stacks, not an SVG */
	int torch_version; /* --format (torch): 2 (default) or 113 (PyTorch 1.13) */
	double interval;   /* --interval S (top): seconds between refreshes */
	int once;          /* --once (top): one frame, then exit */
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
/* leaks' suspects of one file, ranked as `leaks` ranks them (up to max);
 * per_step NAN without a step mark. */
struct leak_row {
	uint32_t stack;
	int kind;
	double per_hour, per_step;
	int64_t live, window_ms;
};
size_t leak_suspects(struct mfile *f, struct opts *o, struct leak_row *out, size_t max);
int cmd_run(int argc, char **argv);
void usage_exit(const char *msg) __attribute__((noreturn));
/* Run fn on every file of r (run_list: read one at a time, each freed
 * after fn); with --json, their objects go out as {"<key>":[...]} on
 * stdout.  Returns 0. */
struct sb;
int each_file(struct run *r, struct opts *o, const char *key,
	      void (*fn)(struct mfile *f, struct opts *o, struct sb *j, int first));

#endif
