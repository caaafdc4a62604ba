/*
 * header.c — the file's header line and its maps records (header.h).  A
 * maps record lists each loaded object's executable segments (path, base,
 * range, file offset, build id): what the command needs to turn the stack
 * records' addresses into an object and an offset.  The main file gets one
 * again whenever the loader's counts (dl_iterate_phdr's adds and subs)
 * moved.  The layouts are specified in doc/FORMAT.md; bump
 * MT_FORMAT_VERSION when they change.
 */
#include "platform/glue.h"
#include "output/header.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "output/file.h"
#include "platform/dl.h"
#include <elf.h>
#include <link.h>
#include <string.h>

#define MT_TOOL_VERSION "0.1.0"

/* exe and argv, read at start; the loader's counts at the last maps
 * record of the main file (writer lock). */
static struct {
	char exe[1024];
	char cmdline[8192];
	size_t cmdline_len;
	unsigned long long last_adds, last_subs;
} H = {.last_adds = ~0ull, .last_subs = ~0ull};

void
mt_header_init(void) {
	long r = mt_sys(SYS_readlink, "/proc/self/exe", H.exe, sizeof H.exe - 1, 0, 0, 0);
	H.exe[r > 0 ? r : 0] = 0;
	r = mt_read_file("/proc/self/cmdline", H.cmdline, sizeof H.cmdline);
	H.cmdline_len = r > 0 ? (size_t)r : 0;
}

void
mt_header_json(struct mt_buf *b) {
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_HEADER "\"," MT_KEY(MT_F_VERSION) "%d," MT_KEY(MT_F_TOOL)
			 "\"memtally\"," MT_KEY(MT_F_TOOL_VERSION) "\"%s\"," MT_KEY(MT_F_PID) "%ld,"
			 MT_KEY(MT_F_PPID) "%ld,",
		      MT_FORMAT_VERSION, MT_TOOL_VERSION,
		      mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0),
		      mt_sys(SYS_getppid, 0, 0, 0, 0, 0, 0));
	static const char *const names[] = {MT_F_RANK, MT_F_LOCAL_RANK, MT_F_WORLD_SIZE};
	long vals[] = {mt_cfg.rank, mt_cfg.local_rank, mt_cfg.world_size};
	for (int i = 0; i < 3; i++) {
		mt_buf_printf(b, "\"%s\":", names[i]);
		if (vals[i] >= 0)
			mt_buf_i64(b, vals[i]);
		else
			mt_buf_puts(b, "null");
		mt_buf_putc(b, ',');
	}
	mt_buf_puts(b, MT_KEY(MT_F_HOST));
	mt_buf_jstr(b, mt_file_host());
	if (mt_cfg.job[0]) { /* the launcher's job id (MEMTALLY_JOB first) */
		mt_buf_puts(b, "," MT_KEY(MT_F_JOB));
		mt_buf_jstr(b, mt_cfg.job);
	}
	mt_buf_puts(b, "," MT_KEY(MT_F_EXE));
	mt_buf_jstr(b, H.exe);
	mt_buf_puts(b, "," MT_KEY(MT_F_ARGV) "[");
	for (size_t i = 0; i < H.cmdline_len;) {
		size_t n = strnlen(H.cmdline + i, H.cmdline_len - i);
		if (i)
			mt_buf_putc(b, ',');
		mt_buf_jstrn(b, H.cmdline + i, n);
		i += n + 1;
	}
	mt_buf_printf(b, "]," MT_KEY(MT_F_START_WALL_NS) "%lu," MT_KEY(MT_F_START_MONO_NS) "%lu,"
			 MT_KEY(MT_F_SAMPLE_BYTES) "%lu," MT_KEY(MT_F_EXACT_ABOVE_BYTES) "%lu,"
			 MT_KEY(MT_F_PAGE_BYTES) "4096," MT_KEY(MT_F_CONFIG),
		      (unsigned long)mt_start_wall_ns,
		      (unsigned long)mt_start_mono_ns,
		      (unsigned long)mt_cfg.sample,
		      (unsigned long)mt_cfg.exact_above);
	mt_config_json(b);
	mt_buf_puts(b, "}\n");
}

/* ---- maps ------------------------------------------------------------ */

struct maps_ctx {
	struct mt_buf *b;
	int n;
	int death; /* read the objects' headers through mt_safe_read */
	unsigned long long adds, subs;
};

/* The build id in the object's PT_NOTE segments; note: where the notes
 * are read from (the object's memory, or a safe copy of it). */
static void
build_id_in(struct mt_buf *b, const char *p, const char *end) {
	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
		const char *name = p + sizeof *nh;
		const unsigned char *desc = (const unsigned char *)
			name + ((nh->n_namesz + 3) & ~3u);
		if ((const char *)desc + nh->n_descsz > end)
			break;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    !memcmp(name, "GNU", 4)) {
			mt_buf_puts(b, "," MT_KEY(MT_F_BUILD_ID) "\"");
			for (unsigned k = 0; k < nh->n_descsz; k++) {
				mt_buf_putc(b, "0123456789abcdef"[desc[k] >> 4]);
				mt_buf_putc(b, "0123456789abcdef"[desc[k] & 15]);
			}
			mt_buf_putc(b, '"');
			return;
		}
		p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
	}
}

static void
build_id(struct mt_buf *b, const struct dl_phdr_info *info, const ElfW(Phdr) *phdr, int death) {
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		if (!death) {
			build_id_in(b, p, p + ph->p_memsz);
			continue;
		}
		_Alignas(8) char note[512];
		long n = mt_safe_read(note, p, ph->p_memsz < sizeof note ? ph->p_memsz : sizeof note);
		if (n > 0)
			build_id_in(b, note, note + n);
	}
}

#define MT_DEATH_PHNUM 64 /* program headers a death reads of an object */

static int
maps_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	struct maps_ctx *c = arg;
	(void)size;
	c->adds = info->dlpi_adds;
	c->subs = info->dlpi_subs;
	const ElfW(Phdr) *phdr = info->dlpi_phdr;
	const char *name = info->dlpi_name;
	/* A death: the objects' headers and names are copied, not read, so
	 * an object being unloaded (its segments unmapped, its link map
	 * still listed: another thread's dlclose) is left out rather than
	 * faulting in the handler, which would end the process by SIGSEGV
	 * instead of its own signal. */
	ElfW(Phdr) ph_copy[MT_DEATH_PHNUM];
	char name_copy[512];
	if (c->death) {
		size_t want = (size_t)info->dlpi_phnum * sizeof(ElfW(Phdr));
		if (info->dlpi_phnum > MT_DEATH_PHNUM ||
		    mt_safe_read(ph_copy, phdr, want) != (long)want)
			return 0;
		phdr = ph_copy;
		if (name && name[0]) {
			long n = mt_safe_read(name_copy, name, sizeof name_copy - 1);
			name_copy[n > 0 ? n : 0] = 0;
			name = name_copy;
		}
	}
	if (!name || !name[0])
		name = c->n == 0 ? H.exe : "[unknown]";
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (c->n++)
			mt_buf_putc(c->b, ',');
		mt_buf_puts(c->b, "{" MT_KEY(MT_F_PATH));
		mt_buf_jstr(c->b, name);
		mt_buf_puts(c->b, "," MT_KEY(MT_F_BASE) "\"");
		mt_buf_hex(c->b, info->dlpi_addr);
		mt_buf_puts(c->b, "\"," MT_KEY(MT_F_START) "\"");
		mt_buf_hex(c->b, lo);
		mt_buf_puts(c->b, "\"," MT_KEY(MT_F_END) "\"");
		mt_buf_hex(c->b, lo + ph->p_memsz);
		mt_buf_puts(c->b, "\"," MT_KEY(MT_F_OFFSET) "\"");
		mt_buf_hex(c->b, ph->p_offset);
		mt_buf_putc(c->b, '"');
		build_id(c->b, info, phdr, c->death);
		mt_buf_putc(c->b, '}');
	}
	return 0;
}

/* The whole maps record into b (death: through safe copies). */
static void
maps_record(struct mt_buf *b, int death, unsigned long long *adds, unsigned long long *subs) {
	struct maps_ctx c = {b, 0, death, 0, 0};
	mt_buf_puts(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_MAPS "\"," MT_KEY(MT_F_MODULES) "[");
	dl_iterate_phdr(maps_cb, &c);
	mt_buf_puts(b, "]}\n");
	*adds = c.adds;
	*subs = c.subs;
}

void
mt_maps_json(struct mt_buf *b) {
	/* dl_iterate_phdr holds the loader lock around the callback, which
	 * only formats into our buffer: no allocation, no other lock. */
	unsigned long long adds, subs;
	maps_record(b, 0, &adds, &subs);
}

/* ---- the main file's maps, staged outside the writer lock ------------
 * dl_iterate_phdr takes the loader's lock.  Taken under the writer lock,
 * it closed a cycle with a death: a thread killed inside dlclose holds the
 * loader's lock and waits for the writer lock for its final snapshot,
 * while the writer lock's holder waits for the loader's lock in its maps
 * record (the death gave up after 2 s and its final snapshot was lost).
 * So a snapshot reads the loader before it takes the writer lock: the
 * loader's counts first (one callback), and only when they moved since
 * the last maps record written, the record itself into S.b, under S.lock,
 * which is held until the writer copies it (lock order: S, then the
 * writer lock; S is only ever tried, never waited for).  A death reads
 * nothing of the loader inside dlclose, and the objects' headers through
 * safe copies. */
static struct {
	mt_lock_t lock;
	struct mt_buf b;
	unsigned long long adds, subs;
} S;

static int
counts_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	unsigned long long *c = arg;
	c[0] = info->dlpi_adds;
	c[1] = info->dlpi_subs;
	return 1; /* the first object says it */
}

int
mt_maps_stage(int death) {
	/* inside dlclose (a death, or a snapshot a free() there wrote): the
	 * loader's lock is this thread's, an object half unmapped; the next
	 * snapshot has the record */
	if (mt_dl_in_close())
		return 0;
	unsigned long long c[2] = {0, 0};
	dl_iterate_phdr(counts_cb, c);
	if (c[0] == __atomic_load_n(&H.last_adds, __ATOMIC_RELAXED) &&
	    c[1] == __atomic_load_n(&H.last_subs, __ATOMIC_RELAXED))
		return 0; /* nothing loaded or unloaded since the last record */
	/* Never waited for: its holder may be waiting for the loader's lock
	 * that this thread holds (a snapshot written from a malloc inside
	 * dlopen: MEMTALLY_EVERY); the holder writes the record itself, and
	 * the reader takes a module from any maps record, before or after
	 * the stacks that need it. */
	if (!mt_trylock(&S.lock))
		return 0;
	if (!S.b.growable && mt_buf_init(&S.b, 64 << 10)) {
		mt_unlock(&S.lock);
		return 0;
	}
	S.b.len = 0;
	S.b.overflow = 0;
	maps_record(&S.b, death, &S.adds, &S.subs);
	if (S.b.overflow) {
		mt_unlock(&S.lock);
		return 0;
	}
	return 1;
}

void
mt_maps_put(struct mt_buf *b, int staged, int death) {
	unsigned long long adds, subs;
	if (staged) {
		if (S.adds != H.last_adds || S.subs != H.last_subs) {
			mt_buf_put(b, S.b.p, S.b.len);
			__atomic_store_n(&H.last_adds, S.adds, __ATOMIC_RELAXED);
			__atomic_store_n(&H.last_subs, S.subs, __ATOMIC_RELAXED);
		}
		mt_unlock(&S.lock);
		return;
	}
	if (H.last_adds != ~0ull)
		return; /* the loader's counts had not moved */
	/* The file was opened again under the writer lock (a new file, one
	 * reopened, one cut back): its record now, as before staging (the
	 * loader's lock under the writer lock, once a file). */
	if (mt_dl_in_close())
		return;
	maps_record(b, death, &adds, &subs);
	__atomic_store_n(&H.last_adds, adds, __ATOMIC_RELAXED);
	__atomic_store_n(&H.last_subs, subs, __ATOMIC_RELAXED);
}

void
mt_maps_release(int staged) {
	if (staged)
		mt_unlock(&S.lock);
}

void
mt_maps_prefork(void) {
	mt_lock(&S.lock);
}

void
mt_maps_postfork(int child) {
	if (child)
		S.lock.v = 0; /* (its count: life.c zeroes the child's) */
	else
		mt_unlock(&S.lock);
}

void
mt_maps_forget(void) {
	__atomic_store_n(&H.last_adds, ~0ull, __ATOMIC_RELAXED);
	__atomic_store_n(&H.last_subs, ~0ull, __ATOMIC_RELAXED);
}
