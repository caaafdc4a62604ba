/* run/run.c — `memtally run [options] -- CMD ARGS`: start CMD with the shim
 * preloaded and MEMTALLY_* set from the options, wait for it, say where
 * the files are, and exit with CMD's status.  Works with launchers
 * (torchrun, mpirun, srun) as CMD: they pass the environment to their
 * ranks, and each rank's file is named by its rank.  Python processes
 * get memtally's start-up hook through PYTHONPATH (set_python_path). */
#include "cmd/cmd.h"
#include "run/run.h"
#include "base/util.h"
#include "shim/platform/config.h"
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char run_usage[] =
	"usage: memtally run [options] -- CMD ARGS\n"
	"  --out DIR        output directory (MEMTALLY_OUT; default ./memtally-out)\n"
	"  --every N        snapshot every N tracked allocations\n"
	"  --interval T     snapshot every T seconds\n"
	"  --steps N        snapshot every N \"step\" marks (MEMTALLY_STEPS)\n"
	"  --sample B       mean bytes between heap samples (0 = exact)\n"
	"  --depth N        max frames per stack\n"
	"  --unwind W       cfi, libunwind or fp\n"
	"  --top N          call sites per snapshot\n"
	"  --signal S       snapshot signal (USR1, USR2, RTMIN+n, RTMAX-n, none)\n"
	"  --prometheus DIR each process keeps memtally_<host>_<pid>.prom in DIR for\n"
	"                   node_exporter's textfile collector (MEMTALLY_PROMETHEUS;\n"
	"                   README: metrics, labels, alert rules)\n"
	"  --no-follow      do not track child processes\n"
	"  --append         add to an output directory that holds an earlier run's files\n"
	"                   (without it, such a directory is refused)\n"
	"  --set NAME=VAL   any other MEMTALLY_NAME=VAL (NAME or MEMTALLY_NAME)\n"
	"Each is checked against the shim's option table (memtally-config): an\n"
	"unknown name or a value out of range is a usage error (exit 2).\n"
	"Python processes get memtally's start-up hook on PYTHONPATH: each PyTorch\n"
	"optimizer step is marked \"step\", with a snapshot every MEMTALLY_STEPS (100)\n"
	"steps; MEMTALLY_TORCH=0 leaves PYTHONPATH alone (doc/python.md).\n";

/* The directory this binary is in (malloc'd), or NULL. */
static char *
self_dir(void) {
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	return xstrdup(self);
}

/* The shim: $MEMTALLY_LIB, else beside this binary, else ../lib. */
static char *
find_shim(void) {
	const char *e = getenv("MEMTALLY_LIB");
	if (e && *e)
		return xstrdup(e);
	char *self = self_dir();
	if (self) {
		const char *cand[] = {"%s/libmemtally.so", "%s/../lib/libmemtally.so",
				      "%s/../lib/memtally/libmemtally.so"};
		for (int i = 0; i < 3; i++) {
			struct sb s = {0};
			sb_printf(&s, cand[i], self);
			char real[PATH_MAX];
			if (realpath(s.p, real)) {
				sb_free(&s);
				free(self);
				return xstrdup(real);
			}
			sb_free(&s);
		}
		free(self);
	}
	die(EXIT_USAGE, "cannot find libmemtally.so (set MEMTALLY_LIB)");
}

/* Statically linked executables have no PT_INTERP: nothing is preloaded. */
static int
is_static(const char *cmd) {
	char path[PATH_MAX];
	if (strchr(cmd, '/')) {
		snprintf(path, sizeof path, "%s", cmd);
	} else {
		const char *p = getenv("PATH");
		int found = 0;
		while (p && *p && !found) {
			const char *c = strchr(p, ':');
			size_t n = c ? (size_t)(c - p) : strlen(p);
			snprintf(path, sizeof path, "%.*s/%s", (int)n, p, cmd);
			found = access(path, X_OK) == 0;
			p = c ? c + 1 : NULL;
		}
		if (!found)
			return 0;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY); /* a FIFO: never wait */
	if (fd < 0)
		return 0;
	Elf64_Ehdr eh;
	int st = 0;
	if (read(fd, &eh, sizeof eh) == sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		st = 1;
		for (int i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
			    sizeof ph)
				break;
			if (ph.p_type == PT_INTERP)
				st = 0;
		}
	}
	close(fd);
	return st;
}

/* The Python start-up hook's directory (scripts/python: sitecustomize.py,
 * its package _memtally/, memtally.py; doc/python.md), found from this binary:
 * the bundle's python/ beside it, an installed tree's
 * ../share/memtally/python, the build tree's ../scripts/python (build/) or
 * ../../scripts/python (build/asan/).  NULL when none holds the hook. */
static char *
find_python_hook(void) {
	char *self = self_dir();
	if (!self)
		return NULL;
	const char *cand[] = {"%s/python", "%s/../share/memtally/python", "%s/../scripts/python",
			      "%s/../../scripts/python"};
	char *found = NULL;
	for (size_t i = 0; i < sizeof cand / sizeof *cand && !found; i++) {
		struct sb s = {0};
		sb_printf(&s, cand[i], self);
		sb_puts(&s, "/sitecustomize.py");
		char real[PATH_MAX];
		if (realpath(s.p, real) && access(real, R_OK) == 0) {
			*strrchr(real, '/') = 0;
			found = xstrdup(real);
		}
		sb_free(&s);
	}
	free(self);
	return found;
}

/* MEMTALLY_TORCH=0 (false, no, off) turns the Python hook off. */
static int
python_hook_off(void) {
	const char *v = getenv("MEMTALLY_TORCH");
	if (!v)
		return 0;
	const char *off[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < sizeof off / sizeof *off; i++)
		if (!strcasecmp(v, off[i]))
			return 1;
	return 0;
}

/* Put the hook's directory first on PYTHONPATH, keeping the user's entries
 * (once: a nested `memtally run` finds it there already).  Every Python
 * process the command starts inherits it, and so do their children. */
static void
set_python_path(void) {
	if (python_hook_off())
		return;
	char *dir = find_python_hook();
	if (!dir)
		return; /* the Python files are not installed: no steps from torch */
	const char *old = getenv("PYTHONPATH");
	for (const char *p = old; p && *p;) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n == strlen(dir) && !strncmp(p, dir, n)) {
			free(dir);
			return;
		}
		p = c ? c + 1 : NULL;
	}
	struct sb s = {0};
	sb_puts(&s, dir);
	if (old && *old) {
		sb_putc(&s, ':');
		sb_puts(&s, old);
	}
	setenv("PYTHONPATH", s.p, 1);
	sb_free(&s);
	free(dir);
}

static pid_t child;
static void
forward(int sig) {
	if (child > 0)
		kill(child, sig);
}

/* MEMTALLY_<NAME>=val for the command, checked against the shim's own
 * option table (shim/platform/config.c, linked in): an unknown name or a
 * value the shim would refuse is a usage error here, before anything
 * runs, not a warning from every process of the job. */
static void
setvar(const char *name, const char *val) {
	struct sb s = {0};
	if (!strncasecmp(name, "MEMTALLY_", 9)) /* --set MEMTALLY_STEPS=10 as --set STEPS=10 */
		name += 9;
	sb_printf(&s, "MEMTALLY_%s", name);
	for (char *c = s.p + 9; *c; c++)
		*c = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
	char why[256];
	if (mt_config_check(s.p + 9, val, why, sizeof why)) {
		fprintf(stderr, "memtally: run: %s\n", why);
		fputs(run_usage, stderr);
		exit(EXIT_USAGE);
	}
	setenv(s.p, val, 1);
	sb_free(&s);
}

static void
usage_run(const char *msg) {
	fprintf(stderr, "memtally: %s\n", msg);
	fputs(run_usage, stderr);
}

static void
usage_run2(const char *fmt, const char *arg) {
	fputs("memtally: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(run_usage, stderr);
}

/* The options before the command: its index in argv, or -1 when they
 * end the run here (--help, a usage error) with *rc its exit status. */
/* path made absolute against the working directory (ranks may chdir). */
static struct sb
abs_path(const char *path) {
	struct sb a = {0};
	if (path[0] != '/') {
		char *cwd = getcwd(NULL, 0);
		if (!cwd)
			die(EXIT_USAGE, "getcwd: %s", strerror(errno));
		sb_printf(&a, "%s/", cwd);
		free(cwd);
	}
	sb_puts(&a, path);
	return a;
}

/* The directory dir made with its parents in mode; exits naming the
 * option (opt arg) when it cannot be. */
static void
make_dirs(char *dir, mode_t mode, const char *opt, const char *arg) {
	for (char *c = dir + 1; *c; c++)
		if (*c == '/') {
			*c = 0;
			mkdir(dir, mode);
			*c = '/';
		}
	if (mkdir(dir, mode) && errno != EEXIST)
		die(EXIT_USAGE, "%s %s: cannot make this directory: %s", opt, arg, strerror(errno));
}

static int
run_args(int argc, char **argv, const char **out, int *append, int *rc) {
	*rc = EXIT_USAGE;
	int i;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--"))
			return i + 1 < argc ? i + 1 : (usage_run("run needs a command"), -1);
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(run_usage, stdout);
			*rc = EXIT_OK;
			return -1;
		}
		if (!strcmp(a, "--no-follow")) {
			setvar("follow", "0");
			continue;
		}
		if (!strcmp(a, "--append")) {
			*append = 1;
			continue;
		}
		if (a[0] != '-')
			break; /* the command starts here (no --) */
		if (i + 1 >= argc)
			return usage_run2("%s needs a value", a), -1;
		const char *v = argv[++i];
		if (!strcmp(a, "--out")) {
			*out = v;
		} else if (!strcmp(a, "--prometheus")) {
			/* absolute (ranks may chdir), made with its parents,
			 * readable by the collector */
			struct sb d = abs_path(v);
			make_dirs(d.p, 0755, "--prometheus", v);
			setvar("PROMETHEUS", d.p);
			free(d.p);
		} else if (!strcmp(a, "--set")) {
			const char *eq = strchr(v, '=');
			if (!eq) {
				fprintf(stderr, "memtally: --set takes NAME=VALUE\n");
				return -1;
			}
			char *name = xstrndup(v, (size_t)(eq - v));
			setvar(name, eq + 1);
			free(name);
		} else if (!strcmp(a, "--every") || !strcmp(a, "--interval") ||
			   !strcmp(a, "--sample") || !strcmp(a, "--depth") ||
			   !strcmp(a, "--unwind") || !strcmp(a, "--top") || !strcmp(a, "--signal") ||
			   !strcmp(a, "--steps")) {
			setvar(a + 2, v);
		} else {
			return usage_run2("unknown run option %s", a), -1;
		}
	}
	return i < argc ? i : (usage_run("run needs a command"), -1);
}

/* The output directory, absolute (ranks may chdir), made and exported. */
static char *
out_dir(const char *out) {
	/* built in a growable string: a fixed buffer here once overflowed on
	 * a 4 KiB --out */
	struct sb abs = abs_path(out);
	if (abs.len >= 1024) /* the shim's MEMTALLY_OUT holds 1023 bytes */
		die(EXIT_USAGE, "--out: the directory's absolute path is %zu bytes; at most 1023 are "
				"supported", abs.len);
	/* a name that is not a directory, nor can become one, is refused
	 * before the program starts: its files would go nowhere */
	/* made with its parents, in the shim's own mode (SECURITY.md) */
	make_dirs(abs.p, 0750, "--out", out);
	struct stat st;
	if (stat(abs.p, &st) || !S_ISDIR(st.st_mode))
		die(EXIT_USAGE, "--out %s: not a directory: name a directory for the files", out);
	if (access(abs.p, W_OK | X_OK))
		die(EXIT_USAGE, "--out %s: cannot write in this directory: %s", out, strerror(errno));
	setenv("MEMTALLY_OUT", abs.p, 1);
	return abs.p;
}

/* LD_PRELOAD with the shim first (once), and the Python hook's path. */
static void
preload_env(void) {
	char *shim = find_shim();
	const char *old = getenv("LD_PRELOAD");
	struct sb pre = {0};
	sb_puts(&pre, shim);
	if (old && *old && !strstr(old, "libmemtally.so")) {
		sb_putc(&pre, ' ');
		sb_puts(&pre, old);
	} else if (old && strstr(old, "libmemtally.so")) {
		sb_free(&pre);
		sb_puts(&pre, old);
	}
	setenv("LD_PRELOAD", pre.p, 1);
	set_python_path();
}

static struct timespec run_start;

/* Wait for the command (signals forwarded), say where the files are, and
 * give its exit status. */
static int
wait_command(const char *cmd, const char *absout, int before) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = forward;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL); /* a snapshot request for the whole job */
	int st;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	int n = count_files(absout) - before;
	print_warnings(absout, &run_start);
	if (WIFSIGNALED(st))
		fprintf(stderr, "memtally: %s was killed by signal %d (SIG%s)%s%s\n", cmd,
			WTERMSIG(st), sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?",
			WCOREDUMP(st) ? ", core dumped" : "",
			n ? "" : "; a process killed before its first snapshot leaves no file");
	fprintf(stderr, "memtally: %d new file%s in %s; see: memtally report %s\n", n,
		n == 1 ? "" : "s", absout, absout);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

int
cmd_run(int argc, char **argv) {
	const char *out = getenv("MEMTALLY_OUT") ? getenv("MEMTALLY_OUT") : "memtally-out";
	int append = 0, rc;
	int i = run_args(argc, argv, &out, &append, &rc);
	if (i < 0)
		return rc;
	char *absout = out_dir(out);
	char *lock = run_lock(absout, append);
	preload_env();
	/* the shim's warnings go into the files, printed once at the end */
	setenv("MEMTALLY_QUIET", "1", 0);
	if (is_static(argv[i]))
		fprintf(stderr, "memtally: note: %s is statically linked: the shim cannot be "
				"preloaded into it, so nothing will be recorded for it\n", argv[i]);
	int before = count_files(absout); /* the new ones are said at the end */
	clock_gettime(CLOCK_REALTIME, &run_start);
	run_start.tv_sec -= 1; /* a file's ctime may lag the clock by a tick */
	child = fork();
	if (child < 0)
		die(EXIT_USAGE, "fork: %s", strerror(errno));
	if (child == 0) {
		execvp(argv[i], argv + i);
		int e = errno;
		fprintf(stderr, "memtally: cannot run %s: %s\n", argv[i], strerror(e));
		_exit(e == ENOENT ? 127 : 126); /* as a shell: not found, or not executable */
	}
	rc = wait_command(argv[i], absout, before);
	run_unlock(lock);
	return rc;
}
