/*
 * config.c — the MEMTALLY_* table (config.h) and its parser.  The
 * environment is read here and nowhere else, once, from the envp the
 * loader hands the constructor (getenv may not be usable yet, and
 * setenv/putenv by the program later must not change our behaviour).
 * A bad value prints one warning and keeps the default: the program
 * under the shim always runs.
 */
#include "platform/glue.h"
#include "format.h"
#include "platform/config.h"
#include "platform/buf.h"
#include <signal.h>
#include <string.h>

struct mt_config mt_cfg;

struct opt {
	const char *name;    /* without the MEMTALLY_ prefix */
	enum mt_opt_type type;
	const char *def;     /* default, as text */
	const char *min, *max; /* bounds of a numeric option, as text; "" */
	const char *doc;     /* one sentence */
	size_t off;          /* offset in struct mt_config */
};

#define ROW(f, N, T, D, LO, HI, DOC) {#N, MT_##T, D, LO, HI, DOC, offsetof(struct mt_config, f)},
static const struct opt opts[] = {MT_OPTIONS(ROW)};
#undef ROW
#define NOPTS (sizeof opts / sizeof opts[0])

#define KNOWN(N, DOC) #N,
static const char *const known[] = {MT_KNOWN_NAMES(KNOWN)};
#undef KNOWN
#define NKNOWN (sizeof known / sizeof known[0])

/* The signals a snapshot may be asked with: the two meant for programs'
 * own use and the real-time ones (SIGRTMIN is 34 under glibc, which keeps
 * 32 and 33).  A signal with a default action or meaning of its own
 * (SIGSEGV, SIGTERM, SIGCHLD, ...) is refused: taking SIGSEGV turned a
 * crash into an endless loop of snapshots. */
#define SIG_RTMIN 34
#define SIG_RTMAX 64
static int
sig_ok(uint64_t n) {
	return n == SIGUSR1 || n == SIGUSR2 || (n >= SIG_RTMIN && n <= SIG_RTMAX);
}

static int
parse_u64(const char *s, uint64_t *out, int sizes) {
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t d = (uint64_t)(*p - '0');
		if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
			return -1;
		v = v * 10 + d;
	}
	if (sizes && *p) {
		unsigned shift = 0;
		switch (*p | 0x20) {
		case 'k': shift = 10; break;
		case 'm': shift = 20; break;
		case 'g': shift = 30; break;
		case 't': shift = 40; break;
		default: return -1;
		}
		p++;
		if ((*p | 0x20) == 'i')
			p++;
		if ((*p | 0x20) == 'b')
			p++;
		if (v > (UINT64_MAX >> shift))
			return -1;
		v <<= shift;
	}
	if (*p)
		return -1;
	*out = v;
	return 0;
}

static int
parse_double(const char *s, double *out) {
	double v = 0, scale = 0;
	const char *p = s;
	int digits = 0;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9') {
			digits++;
			if (scale) {
				v += (*p - '0') * scale;
				scale /= 10;
			} else {
				v = v * 10 + (*p - '0');
			}
		} else if (*p == '.' && !scale) {
			scale = 0.1;
		} else {
			return -1;
		}
	}
	if (!digits || v > 1e9)
		return -1;
	*out = v;
	return 0;
}

static int
parse_bool(const char *s, int *out) {
	static const char *yes[] = {"1", "true", "yes", "on"};
	static const char *no[] = {"0", "false", "no", "off"};
	for (int i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]))
			return *out = 1, 0;
		if (!strcasecmp(s, no[i]))
			return *out = 0, 0;
	}
	return -1;
}

/* none (0), USR1, USR2, RTMIN, RTMIN+n, RTMAX, RTMAX-n (SIG prefix and
 * case free), or a number sig_ok takes. */
static int
parse_sig(const char *s, int *out) {
	uint64_t n;
	if (!strcasecmp(s, "none") || !strcmp(s, "0"))
		return *out = 0, 0;
	if (!parse_u64(s, &n, 0))
		return sig_ok(n) ? (*out = (int)n, 0) : -1;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	if (!strcasecmp(s, "USR1"))
		return *out = SIGUSR1, 0;
	if (!strcasecmp(s, "USR2"))
		return *out = SIGUSR2, 0;
	int min = !strncasecmp(s, "RTMIN", 5), max = !strncasecmp(s, "RTMAX", 5);
	if (!min && !max)
		return -1;
	s += 5;
	n = 0;
	if (*s && (*s != (min ? '+' : '-') || parse_u64(s + 1, &n, 0)))
		return -1;
	n = min ? SIG_RTMIN + n : n <= SIG_RTMAX ? SIG_RTMAX - n : 0;
	return sig_ok(n) ? (*out = (int)n, 0) : -1;
}

static int
parse_routes(const char *s, uint64_t *f) {
	static const char *const names[] = {"direct", "dlsym", "gpa", "self"};
	if (!strcmp(s, "all"))
		return *f = 15, 0;
	uint64_t bits = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		int k;
		for (k = 0; k < 4; k++)
			if (strlen(names[k]) == n && !strncmp(s, names[k], n))
				break;
		if (k == 4 && !(n == 4 && !strncmp(s, "none", 4)))
			return -1;
		if (k < 4)
			bits |= 1u << k;
		s += n + (s[n] == ',');
	}
	return *f = bits, 0;
}

/* Make dir absolute against the current directory (raw getcwd). */
static int
set_path(const char *s, char *dst, size_t cap) {
	size_t n = strlen(s);
	if (!n && dst != mt_cfg.out) /* an optional directory: off */
		return dst[0] = 0, 0;
	if (!n || n >= cap)
		return -1;
	if (s[0] == '/') {
		memcpy(dst, s, n + 1);
		return 0;
	}
	long r = mt_sys(SYS_getcwd, dst, cap, 0, 0, 0, 0);
	if (r < 0)
		return -1;
	size_t c = strlen(dst);
	if (s[0] == '.' && s[1] == '/')
		s += 2, n -= 2;
	if (c + 1 + n + 1 > cap)
		return -1;
	if (c > 1)
		dst[c++] = '/';
	memcpy(dst + c, s, n + 1);
	return 0;
}

/* A numeric option's value within its bounds (both as text, parsed
 * as the value is): 0, else -1. */
static int
in_bounds_u64(const struct opt *o, uint64_t u) {
	uint64_t lo, hi;
	int sizes = o->type == MT_SIZE;
	return !parse_u64(o->min, &lo, sizes) && !parse_u64(o->max, &hi, sizes) && u >= lo && u <= hi
		       ? 0 : -1;
}

static int
in_bounds_double(const struct opt *o, double d) {
	double lo, hi;
	return !parse_double(o->min, &lo) && !parse_double(o->max, &hi) && d >= lo && d <= hi ? 0 : -1;
}

/* Parse s as o's value; 1 when it parses but lies outside o's bounds. */
static int
parse_value(const struct opt *o, const char *s, void *f) {
	uint64_t u;
	double d;
	int i;
	switch (o->type) {
	case MT_PATH: return set_path(s, f, sizeof mt_cfg.out);
	case MT_U64:
	case MT_SIZE:
		if (parse_u64(s, &u, o->type == MT_SIZE))
			return -1;
		if (in_bounds_u64(o, u))
			return 1;
		return *(uint64_t *)f = u, 0;
	case MT_SECS:
	case MT_FRAC:
		if (parse_double(s, &d))
			return -1;
		if (in_bounds_double(o, d))
			return 1;
		return *(double *)f = d, 0;
	case MT_BOOL:
		if (parse_bool(s, &i))
			return -1;
		return *(int *)f = i, 0;
	case MT_SIG:
		if (parse_sig(s, &i))
			return -1;
		return *(int *)f = i, 0;
	case MT_UNWIND:
		if (!strcmp(s, "libunwind"))
			return *(int *)f = 0, 0;
		if (!strcmp(s, "fp"))
			return *(int *)f = 1, 0;
		if (!strcmp(s, "cfi"))
			return *(int *)f = 2, 0;
		return -1;
	case MT_ROUTES:
		return parse_routes(s, f);
	}
	return -1;
}

static int
apply(const struct opt *o, const char *s) {
	return parse_value(o, s, (char *)&mt_cfg + o->off);
}

/* The first variable of names[] that is set to a number, in that order. */
static long
env_long(char **envp, const char *const *names) {
	for (; *names; names++) {
		size_t n = strlen(*names);
		for (char **e = envp; e && *e; e++) {
			uint64_t v;
			if (!strncmp(*e, *names, n) && (*e)[n] == '=' &&
			    !parse_u64(*e + n + 1, &v, 0) && v < (1u << 30))
				return (long)v;
		}
	}
	return -1;
}

/* The first variable of names[] set to a non-empty value, cut to fit
 * dst (not inside a character). */
static void
env_str(char **envp, const char *const *names, char *dst, size_t cap) {
	dst[0] = 0;
	for (; *names; names++) {
		size_t n = strlen(*names);
		for (char **e = envp; e && *e; e++) {
			if (strncmp(*e, *names, n) || (*e)[n] != '=' || !(*e)[n + 1])
				continue;
			const char *v = *e + n + 1;
			size_t k = mt_utf8_cut(v, strnlen(v, cap - 1));
			memcpy(dst, v, k);
			dst[k] = 0;
			return;
		}
	}
}

static const struct opt *
find_opt(const char *name, size_t n) {
	for (size_t i = 0; i < NOPTS; i++)
		if (strlen(opts[i].name) == n && !strncmp(opts[i].name, name, n))
			return &opts[i];
	return NULL;
}

static int
is_known(const char *name, size_t n) {
	for (size_t i = 0; i < NKNOWN; i++)
		if (strlen(known[i]) == n && !strncmp(known[i], name, n))
			return 1;
	return 0;
}

/* Edit distance of a[0..na) and b, up to 3 (names are short). */
static int
distance(const char *a, size_t na, const char *b) {
	size_t nb = strlen(b);
	if (na > 40 || nb > 40)
		return 3;
	int row[41];
	for (size_t j = 0; j <= nb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= na; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= nb; j++) {
			int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			best = up + 1 < best ? up + 1 : best;
			best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
			diag = up;
			row[j] = best;
		}
	}
	return row[nb] < 3 ? row[nb] : 3;
}

/* The option nearest to a misspelt name (within two edits), or NULL. */
static const char *
nearest(const char *name, size_t n) {
	const char *best = NULL;
	int bd = 3;
	for (size_t i = 0; i < NOPTS; i++) {
		int d = distance(name, n, opts[i].name);
		if (d < bd)
			bd = d, best = opts[i].name;
	}
	return best;
}

/* One MEMTALLY_NAME=VALUE from the environment (kv after the prefix). */
static void
take(const char *kv) {
	const char *eq = strchr(kv, '=');
	if (!eq)
		return;
	size_t klen = (size_t)(eq - kv);
	const struct opt *o = find_opt(kv, klen);
	if (!o) {
		if (is_known(kv, klen))
			return;
		char nm[64]; /* mt_warn has no %.*s */
		size_t n = klen < sizeof nm - 1 ? klen : sizeof nm - 1;
		memcpy(nm, kv, n);
		nm[n] = 0;
		const char *near = nearest(kv, klen);
		mt_warn("MEMTALLY_%s is not a memtally variable: ignored%s%s%s", nm,
			near ? " (did you mean MEMTALLY_" : "", near ? near : "", near ? "?)" : "");
		return;
	}
	int r = apply(o, eq + 1);
	if (r > 0)
		mt_warn("MEMTALLY_%s=%s is out of range (%s to %s); using %s", o->name, eq + 1, o->min,
			o->max, o->def);
	else if (r < 0)
		mt_warn("MEMTALLY_%s=%s is not valid; using %s", o->name, eq + 1, o->def);
	if (r)
		apply(o, o->def);
}

void
mt_config_init(char **envp) {
	static const char *const rank[] = {"RANK", "OMPI_COMM_WORLD_RANK",
		"PMI_RANK", "PMIX_RANK", "SLURM_PROCID", NULL};
	static const char *const local[] = {"LOCAL_RANK",
		"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
		NULL};
	static const char *const job[] = {"MEMTALLY_JOB", "SLURM_JOB_ID",
		"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", NULL};
	static const char *const world[] = {"WORLD_SIZE",
		"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
	for (size_t i = 0; i < NOPTS; i++)
		if (apply(&opts[i], opts[i].def))
			mt_assert(0); /* defaults always parse, within their bounds */
	mt_cfg.rank = env_long(envp, rank);
	mt_cfg.local_rank = env_long(envp, local);
	mt_cfg.world_size = env_long(envp, world);
	for (char **e = envp; e && *e; e++)
		if (!strncmp(*e, "LD_PRELOAD=", 11) && strstr(*e, "/vgpreload_"))
			mt_cfg.valgrind = 1;
	env_str(envp, job, mt_cfg.job, sizeof mt_cfg.job);
	/* MEMTALLY_QUIET first: it decides where the others' warnings go */
	for (char **e = envp; e && *e; e++)
		if (!strncmp(*e, "MEMTALLY_QUIET=", 15))
			take(*e + 9);
	mt_warn_set_quiet(mt_cfg.quiet);
	for (char **e = envp; e && *e; e++)
		if (!strncmp(*e, "MEMTALLY_", 9) && strncmp(*e, "MEMTALLY_QUIET=", 15))
			take(*e + 9);
}

int
mt_config_check(const char *name, const char *value, char *why, size_t n) {
	struct mt_buf b;
	mt_buf_fixed(&b, why, n - 1);
	const struct opt *o = find_opt(name, strlen(name));
	if (!o && is_known(name, strlen(name)))
		return why[0] = 0, 0; /* read elsewhere (the Python hook): its own checks */
	if (!o) {
		const char *near = nearest(name, strlen(name));
		mt_buf_printf(&b, "MEMTALLY_%s is not a memtally variable%s%s%s", name,
			      near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
		why[b.len] = 0;
		return -1;
	}
	struct mt_config saved = mt_cfg;
	int r = apply(o, value);
	mt_cfg = saved;
	if (r > 0)
		mt_buf_printf(&b, "%s=%s is out of range (%s to %s)", o->name, value, o->min, o->max);
	else if (r < 0)
		mt_buf_printf(&b, "%s=%s is not a valid value (default %s)", o->name, value, o->def);
	why[b.len] = 0;
	return r ? -1 : 0;
}

static void
value_json(struct mt_buf *b, const struct opt *o) {
	const char *f = (const char *)&mt_cfg + o->off;
	switch (o->type) {
	case MT_PATH: mt_buf_jstr(b, f); break;
	case MT_U64:
	case MT_SIZE: mt_buf_u64(b, *(const uint64_t *)f); break;
	case MT_SECS:
	case MT_FRAC: mt_buf_double(b, *(const double *)f, 3); break;
	case MT_BOOL: mt_buf_puts(b, *(const int *)f ? "true" : "false"); break;
	case MT_SIG: {
		int s = *(const int *)f;
		if (!s)
			mt_buf_jstr(b, "none");
		else if (s == SIGUSR1 || s == SIGUSR2)
			mt_buf_jstr(b, s == SIGUSR1 ? "USR1" : "USR2");
		else
			mt_buf_u64(b, (uint64_t)s);
		break;
	}
	case MT_UNWIND:
		mt_buf_jstr(b, (const char *const[]){"libunwind", "fp", "cfi"}[*(const int *)f]);
		break;
	case MT_ROUTES: {
		static const char *const names[] = {"direct", "dlsym", "gpa", "self"};
		uint64_t bits = *(const uint64_t *)f;
		mt_buf_putc(b, '"');
		int any = 0;
		for (int k = 0; k < 4; k++)
			if (bits >> k & 1) {
				if (any++)
					mt_buf_putc(b, ',');
				mt_buf_puts(b, names[k]);
			}
		mt_buf_puts(b, any ? "\"" : "none\"");
		break;
	}
	}
}

void
mt_config_json(struct mt_buf *b) {
	mt_buf_putc(b, '{');
	for (size_t i = 0; i < NOPTS; i++) {
		if (i)
			mt_buf_putc(b, ',');
		mt_buf_putc(b, '"');
		for (const char *c = opts[i].name; *c; c++)
			mt_buf_putc(b, *c >= 'A' && *c <= 'Z' ? (char)(*c | 0x20) : *c);
		mt_buf_puts(b, "\":");
		value_json(b, &opts[i]);
	}
	mt_buf_putc(b, '}');
}

/* A table cell: '|' escaped. */
static void
cell(struct mt_buf *b, const char *s) {
	for (; *s; s++) {
		if (*s == '|')
			mt_buf_putc(b, '\\');
		mt_buf_putc(b, *s);
	}
}

void
mt_config_markdown(int fd) {
	char mem[1024];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem);
	mt_buf_puts(&b, "| variable | default | range | meaning |\n|---|---|---|---|\n");
	mt_write_all(fd, b.p, b.len);
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];
		mt_buf_fixed(&b, mem, sizeof mem);
		mt_buf_printf(&b, "| MEMTALLY_%s | %s | ", o->name, o->def);
		if (o->min[0])
			mt_buf_printf(&b, "%s - %s", o->min, o->max);
		mt_buf_puts(&b, " | ");
		cell(&b, o->doc);
		mt_buf_puts(&b, " |\n");
		mt_write_all(fd, b.p, b.len);
	}
}
