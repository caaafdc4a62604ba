/* main.c — `memtally`: the subcommands, option parsing and usage.
 * Exit codes: 0 ok, 1 bad input (with FILE:LINE), 2 usage. */
#include "cmd.h"
#include "answer/sites.h"
#include "base/util.h"
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
	"usage: memtally COMMAND [options] FILE|DIR...\n"
	"\n"
	"commands:\n"
	"  run [options] -- CMD ARGS   run CMD with the shim preloaded (memtally run --help)\n"
	"  report   per process: timeline of RSS, heap, mmap; top call sites at the end and at the peak\n"
	"  leaks    call sites ranked by sustained growth (robust slope, fit, share of growth)\n"
	"  functions live bytes per function, inclusive and self (--snapshot N|peak)\n"
	"  top      a live view of a running job's files (--interval S, --once; keys: q s n p x)\n"
	"  diff A B change per call site between two files, runs, or snapshots (FILE@SEQ)\n"
	"  ranks    the same figures per rank side by side; outlier ranks named\n"
	"  oom      what was live at an OOM dump, by call site and segment, and the events before it\n"
	"  flame    flame graph SVG of a snapshot or dump (-o out.svg; --metric, --snapshot N,\n"
	"           --folded for folded stacks: flamegraph.pl, inferno, speedscope)\n"
	"  html     one self-contained interactive HTML page of a run (-o report.html)\n"
	"  torch    a CUDA OOM dump as a PyTorch memory-viewer pickle (-o dump.pickle;\n"
	"           --format 1.13 for PyTorch 1.13's _memory_viz)\n"
	"  pprof    a snapshot as a gzipped pprof profile (-o out.pb.gz; --snapshot, --merge)\n"
	"  cat      a file as JSONL on stdout (decompresses a .jsonl.zst)\n"
	"\n"
	"options:\n"
	"  --json        machine-readable output\n"
	"  --top N       call sites to show (default 10)\n"
	"  --stacks      print every call site's whole stack\n"
	"  --native      native frames only (default: Python frames where a stack ran Python)\n"
	"  --kind K      only heap, mmap, mmap_file, cuda, ...\n"
	"  --warmup F    leaks: ignore the first fraction F of each run (default 0.2)\n"
	"  -o FILE       output file (flame, html, torch, pprof; flame --folded: stdout without)\n"
	"  --metric M    flame: live (default), allocs or alloc_bytes\n"
	"  --snapshot N  flame, pprof, functions: that snapshot (seq), `peak` or `last`\n"
	"                (flame's default: the peak; the others': the last)\n"
	"  --merge       pprof: one profile of every process, labelled pid, rank, host\n"
	"\n"
	"exit status: 0 ok, 1 bad input, 2 usage\n";

int
each_file(struct run *r, struct opts *o, const char *key,
	  void (*fn)(struct mfile *f, struct opts *o, struct sb *j, int first)) {
	struct sb j = {0};
	if (o->json)
		sb_printf(&j, "{\"%s\":[", key);
	struct mfile f;
	for (int first = 1; run_next(r, &f); first = 0) { /* one file at a time */
		fn(&f, o, &j, first);
		mfile_free(&f);
	}
	run_free(r);
	if (o->json) {
		sb_puts(&j, "]}\n");
		fputs(j.p, stdout);
		sb_free(&j);
	}
	return 0;
}

void
usage_exit(const char *msg) {
	if (msg)
		fprintf(stderr, "memtally: %s\n", msg);
	fputs(usage, stderr);
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

int
main(int argc, char **argv) {
	/* Reading grows many arrays: keep freed memory in the process instead
	 * of unmapping and faulting it in again (page faults are what reading
	 * costs most on a paravirtualised machine). */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	mallopt(M_TOP_PAD, 64 << 20);
	if (argc < 2)
		usage_exit(NULL);
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(cmd, "cat")) { /* raw JSONL: no escaping, no options */
		if (argc < 3)
			usage_exit("cat: name a file");
		for (int i = 2; i < argc; i++)
			jsonl_cat(argv[i], 1);
		return 0;
	}
	struct opts o = {.top = 10, .kind = -1, .warmup = 0.2, .metric = "live", .snapshot = SNAP_DEFAULT, .interval = 2,
			 .torch_version = 2};
	o.paths = xcalloc((size_t)argc, sizeof *o.paths);
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json"))
			o.json = 1;
		else if (!strcmp(a, "--stacks"))
			o.stacks = 1;
		else if (!strcmp(a, "--native"))
			sites_native_only = 1;
		else if (!strcmp(a, "--merge"))
			o.merge = 1;
		else if (!strcmp(a, "--folded"))
			o.folded = 1;
		else if (!strcmp(a, "-o") || !strcmp(a, "--metric") || !strcmp(a, "--snapshot") ||
			 !strcmp(a, "--format")) {
			if (i + 1 >= argc)
				usage_exit("option needs a value");
			const char *v = argv[++i];
			if (!strcmp(a, "-o")) {
				o.out = v;
			} else if (!strcmp(a, "--metric")) {
				if (strcmp(v, "live") && strcmp(v, "allocs") && strcmp(v, "alloc_bytes"))
					usage_exit("--metric takes live, allocs or alloc_bytes");
				o.metric = v;
			} else if (!strcmp(a, "--format")) {
				if (!strcmp(v, "1.13"))
					o.torch_version = 113;
				else if (!strcmp(v, "2"))
					o.torch_version = 2;
				else
					usage_exit("--format takes 2 (PyTorch 2's viewer, the default) or 1.13");
			} else if (!strcmp(v, "peak")) {
				o.snapshot = SNAP_PEAK;
			} else if (!strcmp(v, "last")) {
				o.snapshot = SNAP_LAST;
			} else {
				char *e;
				o.snapshot = strtol(v, &e, 10);
				if (*e || o.snapshot < 0)
					usage_exit("--snapshot takes a snapshot number (seq), peak or last");
			}
		} else if (!strcmp(a, "--once")) {
			o.once = 1;
		} else if (!strcmp(a, "--interval")) {
			if (i + 1 >= argc)
				usage_exit("option needs a value");
			char *e;
			o.interval = strtod(argv[++i], &e);
			if (*e || !(o.interval >= 0.1 && o.interval <= 3600))
				usage_exit("--interval takes seconds from 0.1 to 3600");
		} else if (!strcmp(a, "--top") || !strcmp(a, "--kind") || !strcmp(a, "--warmup")) {
			if (i + 1 >= argc)
				usage_exit("option needs a value");
			const char *v = argv[++i];
			char *e;
			if (!strcmp(a, "--top")) {
				long n = strtol(v, &e, 10);
				if (*e || n < 1 || n > 1000000)
					usage_exit("--top takes a number from 1 to 1000000");
				o.top = (int)n;
			} else if (!strcmp(a, "--kind")) {
				if ((o.kind = kind_parse(v)) < 0)
					usage_exit("--kind takes heap, mmap, mmap_file, cuda, cuda_host, cuda_managed or cuda_vmm");
			} else {
				o.warmup = strtod(v, &e);
				if (*e || o.warmup < 0 || o.warmup >= 1)
					usage_exit("--warmup takes a fraction in [0, 1)");
			}
		} else if (!strcmp(a, "--")) {
			for (i++; i < argc; i++)
				o.paths[o.npaths++] = argv[i];
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "memtally: unknown option %s\n", a);
			usage_exit(NULL);
		} else {
			o.paths[o.npaths++] = argv[i];
		}
	}
	/* The commands that read files (run is dispatched before options). */
	static const struct {
		const char *name;
		int (*fn)(struct opts *);
	} commands[] = {
		{"report", cmd_report}, {"leaks", cmd_leaks}, {"diff", cmd_diff},
		{"ranks", cmd_ranks},   {"oom", cmd_oom},     {"torch", cmd_torch},
		{"flame", cmd_flame},   {"html", cmd_html},   {"pprof", cmd_pprof},
		{"functions", cmd_functions}, {"top", cmd_top},
	};
	int (*fn)(struct opts *) = NULL;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(cmd, commands[i].name))
			fn = commands[i].fn;
	if (!fn) {
		fprintf(stderr, "memtally: unknown command '%s'\n", cmd);
		usage_exit(NULL);
	}
	if (!o.npaths)
		usage_exit("no input files or directories given");
	if (!o.json)
		stdout_text_safe();
	int rc = fn(&o);
	return rc ? rc : read_status(); /* 1 when a file read was damaged */
}
