/* main.c — `memtally`: the subcommands, option parsing and usage.
 * Exit codes: 0 ok, 1 bad input (with FILE:LINE), 2 usage. */
#include "cmd/cmd.h"
#include "base/util.h"
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Options, and the commands each applies to. */
enum {
	O_JSON = 1 << 0, O_TOP = 1 << 1, O_STACKS = 1 << 2, O_NATIVE = 1 << 3, O_KIND = 1 << 4,
	O_WARMUP = 1 << 5, O_OUT = 1 << 6, O_METRIC = 1 << 7, O_SNAPSHOT = 1 << 8,
	O_MERGE = 1 << 9, O_FOLDED = 1 << 10, O_FORMAT = 1 << 11, O_INTERVAL = 1 << 12,
	O_ONCE = 1 << 13, O_ALL = 1 << 14, O_DEVICE = 1 << 15, O_EACH = 1 << 16,
	O_ALLPROC = 1 << 17, O_BY = 1 << 18, O_AT = 1 << 19,
};

static const struct option {
	const char *name;
	int bit, takes_value;
	const char *help;
} options[] = {
	{"--json", O_JSON, 0, "machine-readable output"},
	{"--top", O_TOP, 1, "N rows to show (default 10)"},
	{"--stacks", O_STACKS, 0, "every call site its own row, with its whole stack"},
	{"--native", O_NATIVE, 0, "native frames only (default: Python frames where a stack ran Python)"},
	{"--by", O_BY, 1, "site: a row per call site, named by its frame and callers (default line: in Python, "
	 "a row per line of the program's own code)"},
	{"--kind", O_KIND, 1, "K: only heap, mmap, mmap_file, cuda, cuda_host, cuda_managed or cuda_vmm"},
	{"--device", O_DEVICE, 1, "N: only the call sites on GPU N (0-15), at that GPU's own peak"},
	{"--warmup", O_WARMUP, 1, "F: the growth window leaves out the first fraction F of the run, or of its steps (default 0.2)"},
	{"-o", O_OUT, 1, "FILE: the output file"},
	{"--metric", O_METRIC, 1, "M: live (default), allocs or alloc_bytes"},
	{"--snapshot", O_SNAPSHOT, 1, "N|peak|last: that snapshot (default: the peak; FILE@N does the same per file)"},
	{"--at", O_AT, 1, "last|peak: the last snapshot (the default) or the peak (the snapshot with the most live bytes, call sites at their high-water marks)"},
	{"--merge", O_MERGE, 0, "one profile of every process, labelled pid, rank, host (the default)"},
	{"--each", O_EACH, 0, "one profile a process: -o out.pb.gz writes out.<host>.r<rank>.p<pid>.pb.gz"},
	{"--folded", O_FOLDED, 0, "folded stacks (flamegraph.pl, inferno, speedscope) instead of an SVG"},
	{"--format", O_FORMAT, 1, "2 (PyTorch 2's viewer, the default) or 1.13"},
	{"--interval", O_INTERVAL, 1, "S: seconds between refreshes (0.1 to 3600; default 2)"},
	{"--once", O_ONCE, 0, "print one frame and exit"},
	{"--all-processes", O_ALLPROC, 0, "every process in full (default: helpers such as DataLoader "
					  "workers and launchers summarized, a line a group)"},
	{"--all", O_ALL, 0, "every rank's row (default from 256 ranks: a summary, outliers first)"},
};

/* `memtally cat`: raw JSONL, so no escaping and no options. */
static int
cmd_cat(struct opts *o) {
	for (int i = 0; i < o->npaths; i++) {
		struct run r;
		run_list(&r, &o->paths[i], 1, 0, 0);
		long sel = r.nlist ? r.sels[0] : SNAP_DEFAULT;
		if (sel == SNAP_DEFAULT || sel >= 0) {
			for (size_t k = 0; k < r.nlist; k++)
				jsonl_cat_upto(r.list[k], 1, sel >= 0 ? sel : -1);
		} else { /* @peak, @last: which seq that is, from the file read */
			struct mfile f;
			while (run_next(&r, &f)) {
				long seq = pick_snapshot(&f, f.sel, -1)->seq; /* resolved */
				jsonl_cat_upto(f.path, 1, seq);
				mfile_free(&f);
			}
		}
		run_free(&r);
	}
	return 0;
}

#define SEL O_NATIVE | O_KIND
static const struct command {
	const char *name;
	int (*fn)(struct opts *);
	int opts;
	const char *args, *what;
} commands[] = {
	{"report", cmd_report, O_JSON | O_TOP | O_STACKS | O_SNAPSHOT | SEL | O_DEVICE | O_ALLPROC | O_BY,
	 "FILE|DIR...",
	 "per process: timeline of RSS, heap and mmap; top rows at the last snapshot (or "
	 "--snapshot N) and at the peak; spikes"},
	{"leaks", cmd_leaks, O_JSON | O_TOP | O_STACKS | O_WARMUP | SEL | O_ALLPROC | O_BY, "FILE|DIR...",
	 "rows ranked by sustained growth on the growth window (after start-up, before teardown, "
	 "in steps when marked)"},
	{"functions", cmd_functions, O_JSON | O_TOP | O_SNAPSHOT | SEL | O_DEVICE, "FILE|DIR...",
	 "live bytes per function, inclusive and self, at the peak (--snapshot)"},
	{"top", cmd_top, O_TOP | O_INTERVAL | O_ONCE | O_WARMUP | SEL | O_BY, "DIR|FILE...",
	 "a live view of a running job's files (keys: q s n p x)"},
	{"diff", cmd_diff, O_JSON | O_TOP | O_STACKS | O_SNAPSHOT | SEL | O_DEVICE | O_BY, "A B",
	 "change per row between two files, runs (paired by rank, else command line and order) "
	 "or snapshots (FILE@N, FILE@peak); at the peak by default"},
	{"ranks", cmd_ranks, O_JSON | O_ALL | O_WARMUP, "DIR|FILE...",
	 "the ranks side by side on one growth window and their exact peaks; the one that differs "
	 "named"},
	{"oom", cmd_oom, O_JSON | O_TOP | O_STACKS | O_NATIVE | O_BY, "DUMP|DIR...",
	 "what was live at an OOM dump, by row and segment, and the events before it"},
	{"flame", cmd_flame, O_OUT | O_METRIC | O_SNAPSHOT | O_FOLDED | SEL | O_DEVICE, "FILE|DIR",
	 "flame graph SVG at the peak (-o out.svg), or folded stacks (--folded)"},
	{"html", cmd_html, O_OUT | O_NATIVE | O_BY, "FILE|DIR",
	 "one self-contained interactive HTML page of a run (-o report.html)"},
	{"torch", cmd_torch, O_OUT | O_FORMAT, "DUMP|DIR",
	 "a CUDA OOM dump as a PyTorch memory-viewer pickle (-o dump.pickle)"},
	{"pprof", cmd_pprof, O_OUT | O_SNAPSHOT | O_MERGE | O_EACH | SEL | O_DEVICE, "FILE|DIR",
	 "a snapshot (the peak by default) as a gzipped pprof profile (-o out.pb.gz: every "
	 "process in it, labelled; --each: a file a process)"},
	{"metrics", cmd_metrics, O_AT | O_TOP | O_NATIVE | O_BY, "DIR|FILE...",
	 "the Prometheus exposition of each process's last snapshot (--at peak: its peak), as "
	 "MEMTALLY_PROMETHEUS writes it live; for the Pushgateway"},
	{"cat", cmd_cat, 0, "FILE|DIR...",
	 "each file as JSONL on stdout (a .jsonl.zst decompressed; FILE@N: up to snapshot N)"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void
usage(FILE *out) {
	fputs("usage: memtally COMMAND [options] FILE|DIR...   (memtally COMMAND --help)\n\n"
	      "commands:\n"
	      "  run       run a command with the shim preloaded (memtally run --help)\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].what);
	fputs("\nA file may name one snapshot: FILE@N (its seq), FILE@peak, FILE@last,\n"
	      "FILE@phase:NAME (the most live bytes during that phase).\n"
	      "exit status: 0 ok, 1 bad input, 2 usage\n", out);
}

static void
command_help(FILE *out, const struct command *c) {
	fprintf(out, "usage: memtally %s [options] %s\n  %s\n\noptions:\n", c->name, c->args,
		c->what);
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
		if (c->opts & options[i].bit)
			fprintf(out, "  %-11s %s\n", options[i].name, options[i].help);
	fputs("  --help      this text\n", out);
}

static void __attribute__((noreturn))
usage_error(const struct command *c, const char *fmt, const char *arg) {
	fprintf(stderr, c ? "memtally %s: " : "memtally: ", c ? c->name : "");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	if (c)
		command_help(stderr, c);
	else
		usage(stderr);
	exit(EXIT_USAGE);
}

/* Text output goes to a person's terminal: a control character from a
 * file (argv, a label, a mark, a Python name, a symbol) must not reach it
 * raw (ESC sequences, CR), nor a byte that is not UTF-8, so stdout passes
 * through text_escape (\xNN for each); newline and tab stay.  --json
 * escapes in JSON instead. */
static ssize_t
safe_write(void *cookie, const char *buf, size_t n) {
	static struct textesc t;
	struct sb o = {0};
	text_escape(&t, buf, n, &o);
	int rc = o.len ? write_all((int)(intptr_t)cookie, o.p, o.len) : 0;
	sb_free(&o);
	return rc ? -1 : (ssize_t)n;
}

static void
stdout_text_safe(void) {
	cookie_io_functions_t io = {.write = safe_write};
	FILE *f = fopencookie((void *)(intptr_t)fileno(stdout), "w", io);
	if (!f)
		return;
	if (isatty(fileno(stdout)))
		setvbuf(f, NULL, _IOLBF, 0);
	fflush(stdout);
	stdout = f; /* glibc: stdout is an assignable FILE * */
}

static void
option_value(const struct command *c, struct opts *o, const char *a, const char *v) {
	char *e;
	if (!strcmp(a, "-o")) {
		o->out = v;
	} else if (!strcmp(a, "--metric")) {
		if (strcmp(v, "live") && strcmp(v, "allocs") && strcmp(v, "alloc_bytes"))
			usage_error(c, "--metric takes live, allocs or alloc_bytes, not '%s'", v);
		o->metric = v;
	} else if (!strcmp(a, "--format")) {
		if (strcmp(v, "1.13") && strcmp(v, "2"))
			usage_error(c, "--format takes 2 (PyTorch 2's viewer) or 1.13, not '%s'", v);
		o->torch_version = strcmp(v, "2") ? 113 : 2;
	} else if (!strcmp(a, "--snapshot")) {
		if (!strcmp(v, "peak"))
			o->snapshot = SNAP_PEAK;
		else if (!strcmp(v, "last"))
			o->snapshot = SNAP_LAST;
		else if ((o->snapshot = strtol(v, &e, 10)) < 0 || *e || !*v)
			usage_error(c, "--snapshot takes a snapshot number (seq), peak or last, not '%s'", v);
	} else if (!strcmp(a, "--at")) {
		if (!strcmp(v, "peak"))
			o->snapshot = SNAP_PEAK;
		else if (!strcmp(v, "last"))
			o->snapshot = SNAP_LAST;
		else
			usage_error(c, "--at takes last or peak, not '%s'", v);
	} else if (!strcmp(a, "--interval")) {
		o->interval = strtod(v, &e);
		if (*e || !*v || !(o->interval >= 0.1 && o->interval <= 3600))
			usage_error(c, "--interval takes seconds from 0.1 to 3600, not '%s'", v);
	} else if (!strcmp(a, "--top")) {
		long n = strtol(v, &e, 10);
		if (*e || !*v || n < 1 || n > 1000000)
			usage_error(c, "--top takes a number from 1 to 1000000, not '%s'", v);
		o->top = (int)n;
	} else if (!strcmp(a, "--kind")) {
		if ((o->kind = kind_parse(v)) < 0)
			usage_error(c, "--kind takes heap, mmap, mmap_file, cuda, cuda_host, "
				       "cuda_managed or cuda_vmm, not '%s'", v);
	} else if (!strcmp(a, "--device")) {
		long d = strtol(v, &e, 10);
		if (*e || !*v || d < 0 || d >= MAX_DEVS)
			usage_error(c, "--device takes a CUDA device from 0 to 15, not '%s'", v);
		o->device = (int)d;
	} else if (!strcmp(a, "--by")) {
		if (strcmp(v, "site") && strcmp(v, "line"))
			usage_error(c, "--by takes site or line, not '%s'", v);
		o->by_site = !strcmp(v, "site");
	} else if (!strcmp(a, "--warmup")) {
		o->warmup = strtod(v, &e);
		if (*e || !*v || o->warmup < 0 || o->warmup >= 1)
			usage_error(c, "--warmup takes a fraction in [0, 1), not '%s'", v);
	}
}

static void
option_flag(struct opts *o, const char *a) {
	if (!strcmp(a, "--json"))
		o->json = 1;
	else if (!strcmp(a, "--stacks"))
		o->stacks = 1;
	else if (!strcmp(a, "--native"))
		o->native = 1;
	else if (!strcmp(a, "--merge"))
		o->merge = 1;
	else if (!strcmp(a, "--folded"))
		o->folded = 1;
	else if (!strcmp(a, "--once"))
		o->once = 1;
	else if (!strcmp(a, "--all"))
		o->all = 1;
	else if (!strcmp(a, "--each"))
		o->each = 1;
	else if (!strcmp(a, "--all-processes"))
		o->all_processes = 1;
}

/* The command line of command c into o: an option c does not take is an
 * error, as is one that is not an option at all. */
static void
parse(const struct command *c, struct opts *o, int argc, char **argv) {
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			for (i++; i < argc; i++)
				o->paths[o->npaths++] = argv[i];
			break;
		}
		if (a[0] != '-' || !a[1]) {
			o->paths[o->npaths++] = argv[i];
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			command_help(stdout, c);
			exit(0);
		}
		const struct option *op = NULL;
		for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
			if (!strcmp(a, options[k].name))
				op = &options[k];
		if (!op)
			usage_error(c, "unknown option %s", a);
		if (!(c->opts & op->bit))
			usage_error(c, "%s does not apply to this command", a);
		if (op->takes_value) {
			if (i + 1 >= argc)
				usage_error(c, "%s needs a value", a);
			option_value(c, o, a, argv[++i]);
		} else {
			option_flag(o, a);
		}
	}
	if (!o->npaths)
		usage_error(c, "no input files or directories given%s", "");
	if ((c->opts & O_OUT) && !o->out && !o->folded)
		usage_error(c, "%s needs -o FILE", c->name);
	o->ask = (struct ask){.kind = o->kind, .apart = o->stacks, .snapshot = o->snapshot,
			      .warmup = o->warmup, .only_gpu = o->device + 1};
}

int
main(int argc, char **argv) {
	/* Reading grows many arrays: keep freed memory in the process instead
	 * of unmapping and faulting it in again (page faults are what reading
	 * costs most on a paravirtualised machine). */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	mallopt(M_TOP_PAD, 64 << 20);
	if (argc < 2)
		usage_error(NULL, "name a command%s", "");
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 2, argv + 2);
	const struct command *c = NULL;
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(cmd, commands[i].name))
			c = &commands[i];
	if (!c)
		usage_error(NULL, "unknown command '%s'", cmd);
	struct opts o = {.top = 10, .kind = -1, .device = -1, .warmup = 0.2, .metric = "live",
			 .snapshot = SNAP_DEFAULT, .interval = 2, .torch_version = 2};
	o.paths = xcalloc((size_t)argc, sizeof *o.paths);
	parse(c, &o, argc, argv);
	if (!o.json && c->fn != cmd_cat)
		stdout_text_safe();
	int rc = c->fn(&o);
	return rc ? rc : read_status(); /* 1 when a file read was damaged */
}
