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
	const char *doc;     /* one sentence */
	size_t off;          /* offset in struct mt_config */
};

#define ROW(f, N, T, D, DOC) {#N, MT_##T, D, DOC, offsetof(struct mt_config, f)},
static const struct opt opts[] = {MT_OPTIONS(ROW)};
#undef ROW
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *sig_names[] = {[SIGHUP] = "HUP", [SIGINT] = "INT",
	[SIGQUIT] = "QUIT", [SIGUSR1] = "USR1", [SIGUSR2] = "USR2",
	[SIGALRM] = "ALRM", [SIGTERM] = "TERM", [SIGPWR] = "PWR",
	[SIGURG] = "URG", [SIGWINCH] = "WINCH"};

static int
parse_u64(const char *s, uint64_t *out, int sizes) {
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
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

static int
parse_sig(const char *s, int *out) {
	uint64_t n;
	if (!strcasecmp(s, "none") || !strcmp(s, "0"))
		return *out = 0, 0;
	if (!parse_u64(s, &n, 0)) {
		if (n < 1 || n >= 65 || n == SIGKILL || n == SIGSTOP)
			return -1;
		return *out = (int)n, 0;
	}
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof sig_names / sizeof *sig_names; i++)
		if (sig_names[i] && !strcasecmp(s, sig_names[i]))
			return *out = (int)i, 0;
	return -1;
}

/* Make dir absolute against the current directory (raw getcwd). */
static int
set_path(const char *s, char *dst, size_t cap) {
	size_t n = strlen(s);
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

static int
apply(const struct opt *o, const char *s) {
	char *f = (char *)&mt_cfg + o->off;
	uint64_t u;
	double d;
	int i;
	switch (o->type) {
	case MT_PATH: return set_path(s, f, sizeof mt_cfg.out);
	case MT_U64:
		if (parse_u64(s, &u, 0))
			return -1;
		if (o->off == offsetof(struct mt_config, depth) &&
		    (u < 1 || u > MT_MAX_DEPTH))
			return -1;
		if (o->off == offsetof(struct mt_config, initdepth) && u > MT_MAX_DEPTH)
			return -1;
		if (o->off == offsetof(struct mt_config, pydepth) &&
		    (u < 1 || u > 64))
			return -1;
		if (o->off == offsetof(struct mt_config, max_stacks) &&
		    (u < 16 || u > (1u << 30)))
			return -1;
		if (o->off == offsetof(struct mt_config, max_live) &&
		    (u < 64 || u > (1ull << 36)))
			return -1;
		return *(uint64_t *)f = u, 0;
	case MT_SIZE:
		if (parse_u64(s, &u, 1))
			return -1;
		return *(uint64_t *)f = u, 0;
	case MT_SECS:
		if (parse_double(s, &d))
			return -1;
		return *(double *)f = d, 0;
	case MT_FRAC:
		if (parse_double(s, &d) || d > 1)
			return -1;
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
	case MT_ROUTES: {
		static const char *const names[] = {"direct", "dlsym", "gpa", "self"};
		if (!strcmp(s, "all"))
			return *(uint64_t *)f = 15, 0;
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
		return *(uint64_t *)f = bits, 0;
	}
	}
	return -1;
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

void
mt_config_init(char **envp) {
	static const char *const rank[] = {"RANK", "OMPI_COMM_WORLD_RANK",
		"PMI_RANK", "PMIX_RANK", "SLURM_PROCID", NULL};
	static const char *const local[] = {"LOCAL_RANK",
		"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
		NULL};
	static const char *const world[] = {"WORLD_SIZE",
		"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
	for (size_t i = 0; i < NOPTS; i++)
		if (apply(&opts[i], opts[i].def))
			mt_assert(0); /* defaults always parse */
	mt_cfg.rank = env_long(envp, rank);
	mt_cfg.local_rank = env_long(envp, local);
	mt_cfg.world_size = env_long(envp, world);
	for (char **e = envp; e && *e; e++) {
		if (strncmp(*e, "MEMTALLY_", 9))
			continue;
		const char *kv = *e + 9;
		const char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		size_t klen = (size_t)(eq - kv);
		for (size_t i = 0; i < NOPTS; i++) {
			if (strlen(opts[i].name) != klen ||
			    strncmp(opts[i].name, kv, klen))
				continue;
			if (apply(&opts[i], eq + 1)) {
				mt_warn("MEMTALLY_%s=%s is not valid; using %s",
					opts[i].name, eq + 1, opts[i].def);
				apply(&opts[i], opts[i].def);
			}
			break;
		}
	}
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
		else if (s < (int)(sizeof sig_names / sizeof *sig_names) &&
			 sig_names[s])
			mt_buf_jstr(b, sig_names[s]);
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

void
mt_config_markdown(int fd) {
	char mem[1024];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem);
	mt_buf_puts(&b, "| variable | default | meaning |\n|---|---|---|\n");
	mt_write_all(fd, b.p, b.len);
	for (size_t i = 0; i < NOPTS; i++) {
		mt_buf_fixed(&b, mem, sizeof mem);
		mt_buf_printf(&b, "| MEMTALLY_%s | %s | %s |\n", opts[i].name,
			      opts[i].def, opts[i].doc);
		mt_write_all(fd, b.p, b.len);
	}
}
