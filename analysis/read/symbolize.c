/* symbolize.c — libdw (elfutils) symbolization, offline (symbolize.h).
 * One Dwfl per module file, reported at bias 0 and queried at
 * pc - base - 1, so the same library loaded at different addresses by many
 * ranks is read once.  Stripped modules find their debug files through
 * libdw's standard search (/usr/lib/debug/.build-id/xx/yyy.debug and
 * .gnu_debuglink); with no symbols at all a frame reads module+0xoffset. */
#include "read/symbolize.h"
#include "base/util.h"
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

char *__cxa_demangle(const char *name, char *buf, size_t *n, int *status);

struct symmod {
	char *path, *build_id;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	int status;          /* SYM_OK, SYM_GONE, SYM_MISMATCH */
	struct symaddr *syms; /* its function symbols by address (symtab_read) */
	size_t nsyms;
	int syms_read;
};
static struct symmod *mods;
static size_t nmods, capmods;

struct cached {         /* address cache: open addressing on (module, offset) */
	struct symmod *m;
	uint64_t off;
	struct frame *fr;
	int n;
};
static struct cached *cache;
static size_t cache_cap, cache_n;

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

static char *
demangle(const char *s) {
	if (!s)
		return NULL;
	if (s[0] == '_' && s[1] == 'Z') {
		int st;
		char *d = __cxa_demangle(s, NULL, NULL, &st);
		if (d && !st)
			return d;
		free(d);
	}
	return xstrdup(s);
}

static char *
hexid(const unsigned char *b, int n) {
	char *s = xmalloc((size_t)n * 2 + 1);
	for (int i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", b[i]);
	return s;
}

static struct symmod *
module_for(const struct module *m) {
	for (size_t i = 0; i < nmods; i++)
		if (!strcmp(mods[i].path, m->path) &&
		    !strcmp(mods[i].build_id ? mods[i].build_id : "", m->build_id ? m->build_id : ""))
			return &mods[i];
	mods = xgrow(mods, nmods + 1, &capmods, sizeof *mods);
	struct symmod *s = &mods[nmods++];
	memset(s, 0, sizeof *s);
	s->path = xstrdup(m->path);
	s->build_id = m->build_id ? xstrdup(m->build_id) : NULL;
	s->status = SYM_GONE;
	if (m->path[0] != '/')
		return s;
	/* The path comes from the input file: open regular files only, and
	 * without blocking (a FIFO named as a module hung the command). */
	int fd = open(m->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return s;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return s;
	}
	s->dwfl = dwfl_begin(&callbacks);
	if (!s->dwfl) {
		close(fd);
		return s;
	}
	dwfl_report_begin(s->dwfl);
	/* libdwfl takes the descriptor (closed with the module) */
	s->mod = dwfl_report_elf(s->dwfl, m->path, m->path, fd, 0, false);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (!s->mod)
		return s;
	s->status = SYM_OK;
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(s->mod, &bits, &vaddr);
	if (m->build_id && n > 0) {
		char *have = hexid(bits, n);
		if (strcmp(have, m->build_id))
			s->status = SYM_MISMATCH; /* the file changed since the run */
		free(have);
	}
	return s;
}

static char *
die_name(Dwarf_Die *die) {
	Dwarf_Attribute a;
	const char *s = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		s = dwarf_formstring(&a);
	if (!s && dwarf_attr_integrate(die, DW_AT_name, &a))
		s = dwarf_formstring(&a);
	return demangle(s);
}

static const char *
call_file(Dwarf_Die *cu, Dwarf_Die *die) {
	Dwarf_Attribute a;
	Dwarf_Word idx;
	Dwarf_Files *files;
	size_t n;
	if (!dwarf_attr(die, DW_AT_call_file, &a) || dwarf_formudata(&a, &idx))
		return NULL;
	if (dwarf_getsrcfiles(cu, &files, &n) || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/* A module's function symbols sorted by address, read once: libdw's
 * dwfl_module_addrinfo walks the whole symbol table on every call
 * (elfutils 0.188), and a PyTorch run's report asked it for 300 k return
 * addresses in libtorch's 200 k symbols (90 s; now a binary search). */
struct symaddr {
	uint64_t addr, size;
	const char *name; /* libdw's, as long as the module */
	int rank;         /* global 2, weak 1, local 0: an alias's name */
};

static int
cmp_symaddr(const void *a, const void *b) {
	const struct symaddr *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return y->rank - x->rank; /* the preferred alias first */
}

static void
symtab_read(struct symmod *m) {
	m->syms_read = 1;
	int n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return;
	m->syms = xmalloc((size_t)n * sizeof *m->syms);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
			continue;
		int bind = GELF_ST_BIND(sym.st_info);
		m->syms[m->nsyms++] = (struct symaddr){addr, sym.st_size, name,
						       bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0};
	}
	xqsort(m->syms, m->nsyms, sizeof *m->syms, cmp_symaddr);
}

/* The function symbol holding addr: the last one at or below it that
 * covers it, else (a symbol of no size: hand-written assembly) the
 * nearest below it of no size.  NULL when none. */
static const char *
symtab_find(struct symmod *m, uint64_t addr) {
	if (!m->syms_read)
		symtab_read(m);
	size_t lo = 0, hi = m->nsyms; /* the first symbol above addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0;) {
		const struct symaddr *y = &m->syms[i];
		if (addr < y->addr + y->size)
			return y->name;
		if (!y->size) /* the nearest sizeless one below */
			return y->name;
		if (lo - i > 64) /* nested sizes beyond this are not a function's */
			break;
	}
	return NULL;
}

static int
resolve(struct symmod *m, uint64_t off, struct frame *out, int max) {
	struct frame base = {.module = m->path, .offset = off, .status = m->status};
	if (m->status != SYM_OK) {
		out[0] = base;
		return 1;
	}
	GElf_Addr addr = off;
	int line = 0;
	const char *file = NULL;
	Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
	if (l) {
		const char *src = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
		file = src;
	}
	int n = 0;
	Dwarf_Addr bias;
	Dwarf_Die *cu = dwfl_module_addrdie(m->mod, addr, &bias);
	Dwarf_Die *scopes = NULL;
	int ns = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
	/* dwarf_getscopes goes on from an inlined instance into the scopes of
	 * its abstract definition (remember, then remember's own subprogram),
	 * not into the code it was inlined in: the callers come from the
	 * innermost scope's place in the concrete tree (dwarf_getscopes_die,
	 * as eu-addr2line -i does), so an inlined helper reads
	 * remember < batch_a < main. */
	if (ns > 0) {
		Dwarf_Die inner = scopes[0], *path = NULL;
		int np = dwarf_getscopes_die(&inner, &path);
		if (np > 0) {
			free(scopes);
			scopes = path;
			ns = np;
		} else {
			free(path);
		}
	}
	for (int i = 0; i < ns && n < max; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
			continue;
		struct frame fr = base;
		fr.func = die_name(&scopes[i]);
		fr.file = file ? xstrdup(file) : NULL;
		fr.line = line;
		fr.inlined = tag == DW_TAG_inlined_subroutine;
		out[n++] = fr;
		if (tag == DW_TAG_subprogram)
			break;
		Dwarf_Attribute a;
		Dwarf_Word cl = 0;
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &a))
			dwarf_formudata(&a, &cl);
		file = call_file(cu, &scopes[i]);
		line = (int)cl;
	}
	free(scopes);
	if (!n) { /* no DWARF scope: the symbol table */
		const char *name = symtab_find(m, addr);
		out[0] = base;
		out[0].func = demangle(name);
		out[0].file = file ? xstrdup(file) : NULL;
		out[0].line = line;
		if (!name)
			out[0].status = SYM_NOSYM;
		n = 1;
	}
	return n;
}

static size_t
slot_of(struct symmod *m, uint64_t off) {
	uint64_t h = ((uint64_t)(uintptr_t)m * 31 + off) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (cache_cap - 1);
}

int
sym_frames(const struct mfile *f, uint64_t pc, struct frame *out, int max) {
	if (pc == MT_PC_ELIDED || MT_PC_IS_DEEP(pc)) { /* the shim left frames out here */
		static char deep[MT_MAX_DEPTH + 1][48]; /* "[k frames left out: ...]", made once */
		const char *what = "[frames left out: MEMTALLY_INITDEPTH]";
		if (pc != MT_PC_ELIDED) {
			unsigned k = (unsigned)(pc - MT_PC_DEEP);
			if (!deep[k][0])
				snprintf(deep[k], sizeof deep[k], "[%u frame%s left out: MEMTALLY_DEPTH]", k,
					 k == 1 ? "" : "s");
			what = deep[k];
		}
		struct frame fr = {.func = what, .module = "", .status = SYM_OK, .pc = pc};
		out[0] = fr;
		return 1;
	}
	const struct module *mod = file_module(f, pc);
	if (!mod) {
		struct frame fr = {.offset = pc, .status = SYM_NOMODULE, .module = "?", .pc = pc};
		out[0] = fr;
		return 1;
	}
	struct symmod *m = module_for(mod);
	uint64_t off = pc - mod->base - 1;
	if (cache_n * 2 >= cache_cap) { /* grow the address cache */
		size_t ocap = cache_cap;
		struct cached *old = cache;
		cache_cap = cache_cap ? cache_cap * 2 : 4096;
		cache = xcalloc(cache_cap, sizeof *cache);
		for (size_t i = 0; i < ocap; i++)
			if (old[i].m) {
				size_t j = slot_of(old[i].m, old[i].off);
				while (cache[j].m)
					j = (j + 1) & (cache_cap - 1);
				cache[j] = old[i];
			}
		free(old);
	}
	size_t j = slot_of(m, off);
	while (cache[j].m && !(cache[j].m == m && cache[j].off == off))
		j = (j + 1) & (cache_cap - 1);
	if (!cache[j].m) {
		struct frame tmp[32];
		int n = resolve(m, off, tmp, 32);
		cache[j].m = m;
		cache[j].off = off;
		cache[j].n = n;
		cache[j].fr = xmalloc((size_t)n * sizeof *tmp);
		memcpy(cache[j].fr, tmp, (size_t)n * sizeof *tmp);
		cache_n++;
	}
	int n = cache[j].n < max ? cache[j].n : max;
	memcpy(out, cache[j].fr, (size_t)n * sizeof *out);
	for (int k = 0; k < n; k++)
		out[k].pc = pc, out[k].mod = mod;
	return n;
}

const char *
sym_text(const struct frame *fr, char *buf, size_t n, int full_path) {
	const char *mod = fr->module ? fr->module : "?";
	const char *mb = strrchr(mod, '/') ? strrchr(mod, '/') + 1 : mod;
	if (fr->status == SYM_GONE)
		snprintf(buf, n, "%s+0x%llx [module gone]", full_path ? mod : mb,
			 (unsigned long long)fr->offset);
	else if (fr->status == SYM_MISMATCH)
		snprintf(buf, n, "%s+0x%llx [build id differs]", full_path ? mod : mb,
			 (unsigned long long)fr->offset);
	else if (fr->status == SYM_NOMODULE)
		snprintf(buf, n, "0x%llx [no module]", (unsigned long long)fr->offset);
	else if (!fr->func)
		snprintf(buf, n, "%s+0x%llx", full_path ? mod : mb, (unsigned long long)fr->offset);
	else if (fr->pc == MT_PC_ELIDED || MT_PC_IS_DEEP(fr->pc) || fr->python == 2) /* a mark */
		snprintf(buf, n, "%s", fr->func);
	else if (fr->file && fr->line) {
		const char *fb = full_path || !strrchr(fr->file, '/') ? fr->file : strrchr(fr->file, '/') + 1;
		snprintf(buf, n, "%s (%s:%d)%s", fr->func, fb, fr->line, fr->inlined ? " [inlined]" : "");
	} else {
		snprintf(buf, n, "%s (%s)", fr->func, full_path ? mod : mb);
	}
	return buf;
}

int
sym_boring(const struct frame *fr) {
	if (fr->python)
		return fr->python == 2;
	if (fr->pc == MT_PC_ELIDED || MT_PC_IS_DEEP(fr->pc))
		return 1;
	static const char *mods_skip[] = {"libc.so", "libmemtally.so", "ld-linux", "libstdc++.so",
					  "libgcc_s.so", "libjemalloc.so", "libtcmalloc", NULL};
	static const char *fn_skip[] = {"operator new", "operator delete", "malloc", "calloc",
					"realloc", "free", "posix_memalign", "aligned_alloc",
					"memalign", "valloc", "pvalloc", "mmap", "mmap64",
					"mremap", "reallocarray", "__libc_", "_int_malloc", NULL};
	const char *mod = fr->module ? fr->module : "";
	const char *mb = strrchr(mod, '/') ? strrchr(mod, '/') + 1 : mod;
	for (int i = 0; mods_skip[i]; i++)
		if (!strncmp(mb, mods_skip[i], strlen(mods_skip[i])))
			return 1;
	if (fr->func)
		for (int i = 0; fn_skip[i]; i++) {
			size_t n = strlen(fn_skip[i]);
			if (!strncmp(fr->func, fn_skip[i], n) &&
			    (fn_skip[i][n - 1] == '_' || fr->func[n] == 0 || fr->func[n] == '(' ||
			     fr->func[n] == ' '))
				return 1;
		}
	return 0;
}
