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
	unsigned long long adds, subs;
};

static void
build_id(struct mt_buf *b, const struct dl_phdr_info *info) {
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
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
}

static int
maps_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	struct maps_ctx *c = arg;
	(void)size;
	c->adds = info->dlpi_adds;
	c->subs = info->dlpi_subs;
	const char *name = info->dlpi_name;
	if (!name || !name[0])
		name = c->n == 0 ? H.exe : "[unknown]";
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
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
		build_id(c->b, info);
		mt_buf_putc(c->b, '}');
	}
	return 0;
}

void
mt_maps_json(struct mt_buf *b, int always) {
	/* dl_iterate_phdr holds the loader lock around the callback, which
	 * only formats into our buffer: no allocation, no other lock. */
	size_t mark = b->len;
	struct maps_ctx c = {b, 0, 0, 0};
	mt_buf_puts(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_MAPS "\"," MT_KEY(MT_F_MODULES) "[");
	dl_iterate_phdr(maps_cb, &c);
	if (always) {
		mt_buf_puts(b, "]}\n");
		return;
	}
	if (c.adds == H.last_adds && c.subs == H.last_subs) {
		b->len = mark; /* nothing new */
		return;
	}
	H.last_adds = c.adds;
	H.last_subs = c.subs;
	mt_buf_puts(b, "]}\n");
}

void
mt_maps_forget(void) {
	H.last_adds = H.last_subs = ~0ull;
}
