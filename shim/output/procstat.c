/*
 * procstat.c — process, cgroup and allocator figures (procstat.h).  Files
 * are read with raw open/read/close; the cgroup directory is found once
 * from /proc/self/cgroup and /proc/self/mountinfo.  cgroup v2 is preferred
 * when its memory controller is there (memory.current exists); otherwise
 * v1's memory controller, with its fields mapped to v2's names:
 * usage_in_bytes -> current, limit_in_bytes -> max, max_usage_in_bytes ->
 * peak, memory.stat total_rss/total_cache/total_shmem -> anon/file/shmem,
 * memory.oom_control oom_kill -> events.oom_kill, failcnt -> events.max.
 */
#include "platform/glue.h"
#include "output/file.h"
#include "platform/dl.h"
#include "output/procstat.h"
#include "platform/buf.h"
#include "platform/config.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <string.h>

static char cg_dir[512]; /* cgroup directory, "" if none */
static int cg_version;   /* 1 or 2; 0 = none */
static int (*je_mallctl)(const char *, void *, size_t *, void *, size_t);
static struct mallinfo2 (*glibc_mallinfo2)(void);

static int
parse_u64(const char *p, uint64_t *out) {
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	*out = v;
	return 0;
}

/* Value after "key" at the start of a line ("VmRSS:", "anon "). */
static int
field(const char *buf, const char *key, uint64_t *out) {
	size_t k = strlen(key);
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, k))
			return parse_u64(p + k, out);
	return -1;
}

static void
path_join(char *dst, size_t n, const char *a, const char *b) {
	struct mt_buf t;
	mt_buf_fixed(&t, dst, n - 1);
	mt_buf_puts(&t, a);
	mt_buf_puts(&t, b);
	dst[t.len] = 0;
}

static int
exists(const char *path) {
	return mt_sys(SYS_access, path, 0 /* F_OK */, 0, 0, 0, 0) == 0;
}

/* Mount point of a cgroup hierarchy from /proc/self/mountinfo: fstype
 * "cgroup2" (want == NULL) or "cgroup" with option `want` ("memory"). */
static int
mount_of(const char *want, char *out, size_t n, char *buf, size_t cap) {
	if (mt_read_file("/proc/self/mountinfo", buf, cap) < 0)
		return -1;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		/* id parent maj:min root mountpoint opts ... - fstype source superopts */
		char *f[5] = {0};
		char *p = line;
		for (int i = 0; i < 5 && p; i++) {
			f[i] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = 0;
		}
		char *dash = p ? strstr(p, " - ") : NULL;
		if (dash && f[4]) {
			char *fstype = dash + 3, *sp = strchr(fstype, ' ');
			if (sp)
				*sp = 0;
			char *super = sp ? strchr(sp + 1, ' ') : NULL;
			int match = !want ? !strcmp(fstype, "cgroup2")
					  : !strcmp(fstype, "cgroup") && super &&
						    strstr(super, want);
			if (match && strlen(f[4]) < n) {
				memcpy(out, f[4], strlen(f[4]) + 1);
				return 0;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return -1;
}

static void
find_cgroup(char *buf, size_t cap) {
	char cg[8192], mnt[256], rel[512] = "", rel1[512] = "";
	if (mt_read_file("/proc/self/cgroup", cg, sizeof cg) < 0)
		return;
	int have2 = 0, have1 = 0;
	for (char *line = cg; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c1 && c2 && strlen(c2 + 1) < sizeof rel) {
			*c1 = *c2 = 0;
			if (!strcmp(line, "0") && c2 == c1 + 1) {
				memcpy(rel, c2 + 1, strlen(c2 + 1) + 1);
				have2 = 1;
			} else {
				for (char *t = c1 + 1; t && *t;) {
					char *comma = strchr(t, ',');
					if (comma)
						*comma = 0;
					if (!strcmp(t, "memory")) {
						memcpy(rel1, c2 + 1, strlen(c2 + 1) + 1);
						have1 = 1;
					}
					t = comma ? comma + 1 : NULL;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	char probe[700];
	if (have2 && !mount_of(NULL, mnt, sizeof mnt, buf, cap)) {
		path_join(cg_dir, sizeof cg_dir, mnt, rel);
		path_join(probe, sizeof probe, cg_dir, "/memory.current");
		if (!exists(probe)) /* in a namespace the path may be the host's */
			path_join(cg_dir, sizeof cg_dir, mnt, "");
		path_join(probe, sizeof probe, cg_dir, "/memory.current");
		if (exists(probe)) {
			cg_version = 2;
			return;
		}
	}
	if (have1 && !mount_of("memory", mnt, sizeof mnt, buf, cap)) {
		path_join(cg_dir, sizeof cg_dir, mnt, rel1);
		path_join(probe, sizeof probe, cg_dir, "/memory.usage_in_bytes");
		if (!exists(probe))
			path_join(cg_dir, sizeof cg_dir, mnt, "");
		path_join(probe, sizeof probe, cg_dir, "/memory.usage_in_bytes");
		if (exists(probe)) {
			cg_version = 1;
			return;
		}
	}
	cg_dir[0] = 0;
}

void
mt_procstat_init(void) {
	static char scratch[16384];
	if (mt_cfg.cgroup)
		find_cgroup(scratch, sizeof scratch);
	/* jemalloc is the allocator when it exports mallctl; the lookups run
	 * in the constructor with the re-entry guard held. */
	*(void **)&je_mallctl = mt_dlsym(RTLD_DEFAULT, "mallctl");
	if (!je_mallctl)
		*(void **)&glibc_mallinfo2 = mt_dlsym(RTLD_DEFAULT, "mallinfo2");
}

static int
cg_read(const char *name, uint64_t *v, char *buf, size_t cap) {
	char path[700];
	path_join(path, sizeof path, cg_dir, name);
	if (mt_read_file(path, buf, cap) <= 0)
		return -1;
	if (!strncmp(buf, "max", 3)) { /* v2: no limit */
		*v = UINT64_MAX;
		return 0;
	}
	return parse_u64(buf, v);
}

int
mt_cgroup_usage(uint64_t *cur, uint64_t *max, char *buf, size_t cap) {
	if (!cg_version)
		return -1;
	int v2 = cg_version == 2;
	if (cg_read(v2 ? "/memory.current" : "/memory.usage_in_bytes", cur, buf, cap) ||
	    cg_read(v2 ? "/memory.max" : "/memory.limit_in_bytes", max, buf, cap))
		return -1;
	/* v1 writes "no limit" as a page-rounded LONG_MAX */
	if (*max >= (1ull << 62))
		return -1;
	return 0;
}

static void
kv(struct mt_buf *b, int *first, const char *key, uint64_t v) {
	mt_buf_printf(b, "%s\"%s\":%lu", *first ? "" : ",", key, (unsigned long)v);
	*first = 0;
}

/* smaps_rollup walks the process's page tables in the kernel: 60% of a
 * PyTorch process's snapshot (hundreds of MB mapped), which a step
 * snapshot's step waits for.  For the frequent snapshots (often) it is
 * read at most once a second; the snapshots between carry no pss figures
 * (absent, as FORMAT.md allows).  Others (exit, a request, a signal's, a
 * death's) always read it. */
static int
smaps_due(int often) {
	static uint64_t last;
	uint64_t now = mt_now_ns(), was = __atomic_load_n(&last, __ATOMIC_RELAXED);
	if (often && was && now - was < 1000000000ull)
		return 0;
	return __atomic_compare_exchange_n(&last, &was, now, 0, __ATOMIC_RELAXED,
					   __ATOMIC_RELAXED);
}

static void
proc_json(struct mt_buf *b, char *buf, size_t cap, int often) {
	int first = 1;
	uint64_t v;
	mt_buf_puts(b, MT_KEY(MT_F_PROC) "{");
	if (mt_read_file("/proc/self/status", buf, cap) > 0) {
		static const char *const keys[][2] = {{"VmRSS:", MT_F_RSS_BYTES},
			{"VmSize:", MT_F_VMS_BYTES}, {"VmHWM:", MT_F_HWM_BYTES},
			{"VmSwap:", MT_F_SWAP_BYTES}};
		for (int i = 0; i < 4; i++)
			if (!field(buf, keys[i][0], &v))
				kv(b, &first, keys[i][1], v * 1024);
		if (!field(buf, "Threads:", &v))
			kv(b, &first, MT_F_THREADS, v);
	}
	if (mt_cfg.smaps && smaps_due(often) && mt_read_file("/proc/self/smaps_rollup", buf, cap) > 0) {
		uint64_t pc = 0, pd = 0, sc = 0, sd = 0;
		if (!field(buf, "Pss:", &v))
			kv(b, &first, MT_F_PSS_BYTES, v * 1024);
		if (!field(buf, "Private_Clean:", &pc) && !field(buf, "Private_Dirty:", &pd))
			kv(b, &first, MT_F_USS_BYTES, (pc + pd) * 1024);
		if (!field(buf, "Shared_Clean:", &sc) && !field(buf, "Shared_Dirty:", &sd))
			kv(b, &first, MT_F_SHARED_BYTES, (sc + sd) * 1024);
		static const char *const keys[][2] = {{"Pss_Anon:", MT_F_PSS_ANON_BYTES},
			{"Pss_File:", MT_F_PSS_FILE_BYTES}, {"Pss_Shmem:", MT_F_PSS_SHMEM_BYTES}};
		for (int i = 0; i < 3; i++)
			if (!field(buf, keys[i][0], &v))
				kv(b, &first, keys[i][1], v * 1024);
	}
	/* open fds: the program's entries of /proc/self/fd (neither the one
	 * reading it nor the shim's own file) */
	long dfd = mt_sys(SYS_open, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			  0, 0, 0, 0);
	if (dfd >= 0) {
		uint64_t n = 0;
		for (;;) {
			long r = mt_sys(SYS_getdents64, dfd, buf, cap, 0, 0, 0);
			if (r <= 0)
				break;
			for (long off = 0; off < r;) {
				unsigned short reclen = *(unsigned short *)(buf + off + 16);
				const char *name = buf + off + 19;
				long fdn = 0;
				for (const char *c = name; *c >= '0' && *c <= '9'; c++)
					fdn = fdn * 10 + (*c - '0');
				if (name[0] != '.' && fdn != dfd && fdn != mt_file_fd())
					n++;
				off += reclen;
			}
		}
		mt_sys(SYS_close, dfd, 0, 0, 0, 0, 0);
		kv(b, &first, MT_F_FDS, n);
	}
	mt_buf_puts(b, "},");
}

static void
cgroup_json(struct mt_buf *b, char *buf, size_t cap) {
	if (!cg_version)
		return;
	int first = 1, v2 = cg_version == 2;
	uint64_t v;
	mt_buf_printf(b, MT_KEY(MT_F_CGROUP) "{" MT_KEY(MT_F_VERSION) "%d," MT_KEY(MT_F_PATH), cg_version);
	mt_buf_jstr(b, cg_dir);
	first = 0;
	if (!cg_read(v2 ? "/memory.current" : "/memory.usage_in_bytes", &v, buf, cap))
		kv(b, &first, MT_F_CURRENT_BYTES, v);
	if (!cg_read(v2 ? "/memory.max" : "/memory.limit_in_bytes", &v, buf, cap)) {
		if (v >= (1ull << 62))
			mt_buf_puts(b, "," MT_KEY(MT_F_MAX_BYTES) "null"); /* no limit */
		else
			kv(b, &first, MT_F_MAX_BYTES, v);
	}
	if (!cg_read(v2 ? "/memory.peak" : "/memory.max_usage_in_bytes", &v, buf, cap))
		kv(b, &first, MT_F_PEAK_BYTES, v);
	char path[700];
	path_join(path, sizeof path, cg_dir, "/memory.stat");
	if (mt_read_file(path, buf, cap) > 0) {
		static const char *const k2[][2] = {{"anon ", MT_F_ANON_BYTES},
			{"file ", MT_F_FILE_BYTES}, {"shmem ", MT_F_SHMEM_BYTES},
			{"slab ", MT_F_SLAB_BYTES}, {"sock ", MT_F_SOCK_BYTES},
			{"kernel_stack ", MT_F_KERNEL_STACK_BYTES}};
		static const char *const k1[][2] = {{"total_rss ", MT_F_ANON_BYTES},
			{"total_cache ", MT_F_FILE_BYTES}, {"total_shmem ", MT_F_SHMEM_BYTES},
			{"total_mapped_file ", MT_F_MAPPED_FILE_BYTES}};
		int nk = v2 ? 6 : 4;
		for (int i = 0; i < nk; i++)
			if (!field(buf, v2 ? k2[i][0] : k1[i][0], &v))
				kv(b, &first, v2 ? k2[i][1] : k1[i][1], v);
	}
	int efirst = 1;
	mt_buf_puts(b, "," MT_KEY(MT_F_EVENTS) "{");
	if (v2) {
		path_join(path, sizeof path, cg_dir, "/memory.events");
		if (mt_read_file(path, buf, cap) > 0) {
			static const char *const ke[][2] = {{"oom ", MT_F_OOM},
				{"oom_kill ", MT_F_OOM_KILL}, {"max ", MT_F_MAX}};
			for (int i = 0; i < 3; i++)
				if (!field(buf, ke[i][0], &v))
					kv(b, &efirst, ke[i][1], v);
		}
	} else {
		path_join(path, sizeof path, cg_dir, "/memory.oom_control");
		if (mt_read_file(path, buf, cap) > 0 && !field(buf, "oom_kill ", &v))
			kv(b, &efirst, MT_F_OOM_KILL, v);
		if (!cg_read("/memory.failcnt", &v, buf, cap))
			kv(b, &efirst, MT_F_MAX, v);
	}
	mt_buf_puts(b, "}},");
}

void
mt_procstat_allocator(struct mt_allocfig *f) {
	memset(f, 0, sizeof *f);
	if (je_mallctl) {
		uint64_t epoch = 1;
		size_t sz = sizeof epoch;
		je_mallctl("epoch", &epoch, &sz, &epoch, sz); /* refresh stats */
		static const char *const keys[] = {"stats.allocated", "stats.active", "stats.resident",
						   "stats.mapped", "stats.retained", "stats.metadata"};
		f->state = MT_AF_JEMALLOC;
		for (int i = 0; i < 6; i++) {
			size_t v = 0, vs = sizeof v;
			if (!je_mallctl(keys[i], &v, &vs, NULL, 0)) {
				f->v[i] = v;
				f->have |= 1u << i;
			}
		}
	} else if (glibc_mallinfo2) {
		/* takes every arena's lock: the caller holds none of ours */
		struct mallinfo2 m = glibc_mallinfo2();
		f->state = MT_AF_GLIBC;
		f->v[0] = m.arena;
		f->v[1] = m.ordblks;
		f->v[2] = m.hblkhd;
		f->v[3] = m.uordblks;
		f->v[4] = m.fordblks;
		f->v[5] = m.keepcost;
		f->have = 63;
	}
}

static void
allocator_json(struct mt_buf *b, const struct mt_allocfig *f) {
	static const char *const je[] = {MT_F_ALLOCATED_BYTES, MT_F_ACTIVE_BYTES, MT_F_RESIDENT_BYTES,
					 MT_F_MAPPED_BYTES, MT_F_RETAINED_BYTES, MT_F_METADATA_BYTES};
	static const char *const gl[] = {MT_F_ARENA_BYTES, MT_F_ORDBLKS, MT_F_HBLKHD_BYTES,
					 MT_F_UORDBLKS_BYTES, MT_F_FORDBLKS_BYTES, MT_F_KEEPCOST_BYTES};
	if (!f || f->state == MT_AF_NONE)
		return;
	int first = 0;
	mt_buf_puts(b, MT_KEY(MT_F_ALLOCATOR) "{" MT_KEY(MT_F_NAME));
	if (f->state == MT_AF_DEATH) {
		/* not read in a death's handler: the dying thread may hold
		 * the allocator's locks (mt_procstat_allocator) */
		mt_buf_puts(b, je_mallctl ? "\"jemalloc\"," : "\"glibc\",");
		mt_buf_puts(b, MT_KEY(MT_F_OMITTED) "\"death\"},");
		return;
	}
	mt_buf_puts(b, f->state == MT_AF_JEMALLOC ? "\"jemalloc\"" : "\"glibc\"");
	for (int i = 0; i < 6; i++)
		if (f->have & (1u << i))
			kv(b, &first, (f->state == MT_AF_JEMALLOC ? je : gl)[i], f->v[i]);
	mt_buf_puts(b, "},");
}

void
mt_procstat_json(struct mt_buf *b, char *scratch, size_t n, int often,
		 const struct mt_allocfig *af) {
	proc_json(b, scratch, n, often);
	if (mt_cfg.cgroup)
		cgroup_json(b, scratch, n);
	allocator_json(b, af);
}

/* The hex mask after "<key>:" in /proc/self/status text, or 0. */
static uint64_t
status_mask(const char *text, const char *key) {
	const char *p = strstr(text, key);
	uint64_t v = 0;
	if (!p)
		return 0;
	for (p += strlen(key); *p == ':' || *p == '\t' || *p == ' '; p++)
		;
	for (;; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			return v;
		v = v << 4 | (uint64_t)d;
	}
}

int
mt_signal_pending(int sig) {
	char buf[4096];
	long n = mt_read_file("/proc/self/status", buf, sizeof buf - 1);
	if (n <= 0 || sig < 1 || sig > 64)
		return 0;
	buf[n] = 0;
	uint64_t bit = 1ull << (sig - 1);
	return ((status_mask(buf, "\nShdPnd") | status_mask(buf, "\nSigPnd")) & bit) != 0;
}
