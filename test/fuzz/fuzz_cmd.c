/* fuzz_cmd.c — libFuzzer harness for the memtally command (issue 9).  Each
 * input is one memtally file, handed to the commands as a memfd; a bad
 * record's die() jumps back here (MT_FUZZ) instead of exiting.
 *   FUZZ_READER:  report, leaks, ranks, oom, functions, top (the JSONL
 *                 reader and the follower, the replay of call-site deltas,
 *                 the statistics and the text/JSON output)
 *   FUZZ_WRITERS: torch (the pickle writer, both formats), html, flame (the
 *                 page's inline data, the SVG, folded stacks) and pprof
 *   FUZZ_NAMES:   the input is not a file but the strings of one: split at
 *                 NUL bytes into argv, host, exe, a module path, Python file
 *                 and function names, a label, a mark name, an OOM's kind,
 *                 api and error and a trace op (a byte 0x01 and the two after
 *                 it make a \uXXXX escape, lone surrogates included; every
 *                 other byte goes in as it is, invalid UTF-8 included).  A
 *                 process file and an OOM dump are made of them and every
 *                 writer runs with its property checked here: each output
 *                 is UTF-8, each --json output parses, the SVG is well-formed
 *                 XML, the page's data parses and holds no '<'.  With
 *                 MT_FUZZ_EMIT=DIR the two files are kept there, for
 *                 run.sh to check with Python's own json, XML and pickle.
 * Built and run for a bounded time by test/fuzz/run.sh (`make check`). */
#include "cmd/cmd.h"
#include "base/util.h"
#include "read/json.h"
#include "shim/format.h"
#include <ctype.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static char out_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv) {
	(void)argc;
	(void)argv;
	snprintf(out_path, sizeof out_path, "/tmp/memtally-fuzz.%d.out", (int)getpid());
	int null = open("/dev/null", O_WRONLY);
	dup2(null, 1); /* the commands' reports */
	close(null);
	return 0;
}

static void
one_opt(int (*cmd)(struct opts *), const char *path, const char *out, int folded, int v113) {
	char *paths[1] = {(char *)path};
	struct opts o = {.top = 10, .kind = -1, .warmup = 0.2, .metric = "live", .snapshot = SNAP_DEFAULT,
			 .out = out, .paths = paths, .npaths = 1, .folded = folded,
			 .torch_version = v113 ? 113 : 2};
	jmp_buf jb;
	mt_fuzz_jmp = &jb;
	if (!setjmp(jb))
		cmd(&o);
	mt_fuzz_jmp = NULL;
}

static void
one(int (*cmd)(struct opts *), const char *path, const char *out) {
	one_opt(cmd, path, out, 0, 0);
}

#ifdef FUZZ_NAMES
/* --- checks of what the writers wrote --- */

static char *
slurp_fd(int fd, size_t *n) {
	struct stat st;
	if (fstat(fd, &st))
		abort();
	char *p = malloc((size_t)st.st_size + 1);
	if (!p || pread(fd, p, (size_t)st.st_size, 0) != st.st_size)
		abort();
	p[st.st_size] = 0;
	*n = (size_t)st.st_size;
	return p;
}

static char *
slurp(const char *path, size_t *n) {
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	char *p = slurp_fd(fd, n);
	close(fd);
	return p;
}

#define FAIL(...) (fprintf(stderr, "fuzz_names: " __VA_ARGS__), fputc('\n', stderr), abort())

static void
check_utf8(const char *what, const char *p, size_t n) {
	for (size_t i = 0; i < n;) {
		size_t k = mt_utf8_len((const unsigned char *)p + i, n - i);
		if (!k)
			FAIL("%s: byte %zu (0x%02x) is not UTF-8", what, i, (unsigned char)p[i]);
		i += k;
	}
}

static void
check_json(const char *what, char *p, size_t n) {
	struct jdoc d = {0};
	const char *err;
	size_t col;
	while (n && (p[n - 1] == '\n'))
		p[--n] = 0;
	if (n && !json_parse(&d, p, n, &err, &col))
		FAIL("%s: not JSON: %s at column %zu", what, err, col + 1);
	json_free(&d);
}

/* XML well-formedness as far as the SVG uses XML: a prolog, elements with
 * quoted attributes, matched end tags, text and attribute values without
 * '<' and with '&' only in entities, CDATA sections, comments; no C0
 * control but tab, newline, return. */
static void
check_xml(const char *p, size_t n) {
	check_utf8("svg", p, n);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
			FAIL("svg: control character 0x%02x at %zu", (unsigned char)p[i], i);
	const char *stack[64];
	size_t len[64];
	int depth = 0, roots = 0;
	size_t i = 0;
#define AT(s) (n - i >= sizeof(s) - 1 && !memcmp(p + i, s, sizeof(s) - 1))
#define ENTITY()                                                                              \
	do {                                                                                  \
		size_t e = i + 1;                                                             \
		while (e < n && e - i < 12 && p[e] != ';')                                    \
			e++;                                                                  \
		const char *x = p + i + 1;                                                    \
		size_t l = e - i - 1;                                                         \
		int ok = e < n && p[e] == ';' &&                                              \
			 ((l == 2 && (!memcmp(x, "lt", 2) || !memcmp(x, "gt", 2))) ||        \
			  (l == 3 && !memcmp(x, "amp", 3)) ||                                 \
			  (l == 4 && (!memcmp(x, "quot", 4) || !memcmp(x, "apos", 4))) ||     \
			  (l >= 2 && x[0] == '#'));                                           \
		if (!ok)                                                                      \
			FAIL("svg: a bare '&' at %zu", i);                                    \
		i = e + 1;                                                                    \
	} while (0)
	while (i < n) {
		if (AT("<?")) {
			const char *e = memmem(p + i, n - i, "?>", 2);
			if (!e || depth)
				FAIL("svg: a processing instruction at %zu", i);
			i = (size_t)(e - p) + 2;
		} else if (AT("<!--")) {
			const char *e = memmem(p + i + 4, n - i - 4, "-->", 3);
			if (!e)
				FAIL("svg: an unended comment at %zu", i);
			i = (size_t)(e - p) + 3;
		} else if (AT("<![CDATA[")) {
			const char *e = memmem(p + i, n - i, "]]>", 3);
			if (!e || !depth)
				FAIL("svg: a CDATA section at %zu", i);
			i = (size_t)(e - p) + 3;
		} else if (AT("<!DOCTYPE")) {
			const char *e = memchr(p + i, '>', n - i);
			if (!e || depth || roots)
				FAIL("svg: a DOCTYPE at %zu", i);
			i = (size_t)(e - p) + 1;
		} else if (AT("</")) {
			size_t s = i + 2, e = s;
			while (e < n && p[e] != '>' && p[e] != ' ')
				e++;
			if (!depth || len[depth - 1] != e - s || memcmp(stack[depth - 1], p + s, e - s))
				FAIL("svg: an end tag at %zu matches no open element", i);
			depth--;
			while (e < n && p[e] == ' ')
				e++;
			if (e >= n || p[e] != '>')
				FAIL("svg: an end tag at %zu is not closed", i);
			i = e + 1;
		} else if (p[i] == '<') {
			size_t s = ++i;
			while (i < n && (isalnum((unsigned char)p[i]) || p[i] == ':' || p[i] == '-' || p[i] == '_'))
				i++;
			if (i == s)
				FAIL("svg: a '<' at %zu starts no tag", s - 1);
			const char *name = p + s;
			size_t nl = i - s;
			int empty = 0;
			for (;;) {
				while (i < n && strchr(" \t\n\r", p[i]))
					i++;
				if (i >= n)
					FAIL("svg: a tag at %zu runs to the end", s - 1);
				if (p[i] == '>') {
					i++;
					break;
				}
				if (AT("/>")) {
					i += 2, empty = 1;
					break;
				}
				size_t a = i;
				while (i < n && (isalnum((unsigned char)p[i]) || strchr(":-_.", p[i])))
					i++;
				if (i == a || i >= n || p[i] != '=' || i + 1 >= n ||
				    (p[i + 1] != '"' && p[i + 1] != '\''))
					FAIL("svg: a bad attribute at %zu", a);
				char q = p[i + 1];
				i += 2;
				while (i < n && p[i] != q) {
					if (p[i] == '<')
						FAIL("svg: a '<' in an attribute value at %zu", i);
					if (p[i] == '&')
						ENTITY();
					else
						i++;
				}
				if (i >= n)
					FAIL("svg: an attribute value at %zu is not closed", a);
				i++;
			}
			if (!depth && roots++)
				FAIL("svg: a second root element at %zu", s - 1);
			if (!empty) {
				if (depth == 64)
					FAIL("svg: nested too deep");
				stack[depth] = name, len[depth++] = nl;
			}
		} else if (p[i] == '&') {
			ENTITY();
		} else {
			if (!depth && !strchr(" \t\n\r", p[i]))
				FAIL("svg: text outside the root element at %zu", i);
			i++;
		}
	}
	if (depth || roots != 1)
		FAIL("svg: %d elements left open, %d roots", depth, roots);
#undef AT
#undef ENTITY
}

static void
check_page(char *p, size_t n) {
	check_utf8("html", p, n);
	const char *open_tag = "<script id=\"mt-data\" type=\"application/json\">";
	char *s = strstr(p, open_tag);
	if (!s)
		FAIL("html: no data block");
	s += strlen(open_tag);
	char *e = strstr(s, "</script>");
	if (!e)
		FAIL("html: the data block is not closed");
	if (memchr(s, '<', (size_t)(e - s)))
		FAIL("html: a '<' in the page's data");
	check_json("html data", s, (size_t)(e - s));
}

/* --- the file made of the input's strings --- */

#define NFIELDS 14
enum { F_ARGV0, F_ARGV1, F_HOST, F_EXE, F_MOD, F_PYFILE, F_PYFUNC, F_PYFUNC2, F_LABEL, F_MARK,
       F_OOMKIND, F_API, F_ERROR, F_OP };

/* Field k of the input as the inside of a JSON string. */
static void
field(struct sb *o, const uint8_t *data, size_t size, int k) {
	size_t i = 0;
	int f = 0;
	for (; f < k && i < size; i++)
		if (!data[i])
			f++;
	if (f < k) { /* the input has fewer fields */
		sb_puts(o, "x");
		return;
	}
	size_t start = i;
	for (; i < size && data[i] && i - start < 400; i++) {
		uint8_t c = data[i];
		if (c == 1 && i + 2 < size) {
			sb_printf(o, "\\u%02x%02x", data[i + 1], data[i + 2]);
			i += 2;
		} else if (c == '"' || c == '\\')
			sb_printf(o, "\\%c", c);
		else if (c < 0x20)
			sb_printf(o, "\\u%04x", c);
		else
			sb_putc(o, (char)c);
	}
}

#define S(k) (sb_putc(&b, '"'), field(&b, data, size, k), sb_putc(&b, '"'))

static void
make_files(const uint8_t *data, size_t size, struct sb *proc, struct sb *dump) {
	struct sb *bs[2] = {proc, dump};
	for (int w = 0; w < 2; w++) {
		struct sb b = {0};
		sb_puts(&b, "{\"type\":\"header\",\"version\":2,\"pid\":7,\"ppid\":1,\"rank\":0,"
			    "\"local_rank\":0,\"world_size\":1,\"host\":");
		S(F_HOST);
		sb_puts(&b, ",\"exe\":");
		S(F_EXE);
		sb_puts(&b, ",\"argv\":[");
		S(F_ARGV0);
		sb_putc(&b, ',');
		S(F_ARGV1);
		sb_puts(&b, "],\"start_wall_ns\":1700000000000000000,\"start_mono_ns\":0,"
			    "\"sample_bytes\":0}\n{\"type\":\"maps\",\"modules\":[{\"path\":");
		S(F_MOD);
		sb_puts(&b, ",\"base\":\"0x400000\",\"start\":\"0x400000\",\"end\":\"0x500000\","
			    "\"offset\":\"0x0\"}]}\n{\"type\":\"python\",\"version\":\"3.11.2\"}\n"
			    "{\"type\":\"pyframe\",\"id\":1,\"file\":");
		S(F_PYFILE);
		sb_puts(&b, ",\"func\":");
		S(F_PYFUNC);
		sb_puts(&b, ",\"line\":12}\n{\"type\":\"pyframe\",\"id\":2,\"file\":");
		S(F_PYFILE);
		sb_puts(&b, ",\"func\":");
		S(F_PYFUNC2);
		sb_puts(&b, ",\"line\":40}\n{\"type\":\"pystack\",\"id\":1,\"frames\":[1,2],"
			    "\"entry\":[0,1]}\n{\"type\":\"stack\",\"id\":1,\"py\":1,"
			    "\"pcs\":[\"0x401000\",\"0x402000\"]}\n{\"type\":\"stack\",\"id\":2,\"py\":0,"
			    "\"pcs\":[\"0x403000\"]}\n");
		if (w == 1) {
			sb_puts(&b, "{\"type\":\"oom\",\"kind\":");
			S(F_OOMKIND);
			sb_puts(&b, ",\"api\":");
			S(F_API);
			sb_puts(&b, ",\"requested_bytes\":1073741824,\"error\":");
			S(F_ERROR);
			sb_puts(&b, ",\"sampled\":false,\"device\":0,\"driver_free_bytes\":1024,"
				    "\"driver_total_bytes\":4096,\"elapsed_ms\":900}\n");
			for (int k = 0; k < 3; k++)
				sb_printf(&b, "{\"type\":\"segment\",\"kind\":\"cuda\",\"address\":\"0x%x\","
					      "\"size\":%d,\"stack\":%d,\"time_ms\":%d,\"device\":0,"
					      "\"stream\":0,\"mapped\":false}\n",
					  0x7000000 + k * 0x100000, 4096 << k, 1 + k % 2, 100 * k);
			sb_puts(&b, "{\"type\":\"trace\",\"kind\":\"cuda\",\"op\":");
			S(F_OP);
			sb_puts(&b, ",\"address\":\"0x7000000\",\"size\":4096,\"stack\":1,\"time_ms\":5}\n"
				    "{\"type\":\"trace\",\"kind\":\"cuda\",\"op\":\"alloc\","
				    "\"address\":\"0x7100000\",\"size\":8192,\"stack\":2,\"time_ms\":105}\n");
		}
		for (int k = 0; k < (w ? 1 : 6); k++) {
			sb_printf(&b, "{\"type\":\"snapshot\",\"seq\":%d,\"reason\":\"%s\",\"label\":", k,
				  w ? "oom" : k == 5 ? "exit" : "request");
			S(F_LABEL);
			sb_printf(&b, ",\"wall_ns\":%lld,\"mono_ns\":%lld,\"elapsed_ms\":%d,"
				      "\"proc\":{\"rss_bytes\":%d},\"marks\":{",
				  1700000000000000000LL + k * 1000000000LL, k * 1000000000LL, k * 1000,
				  (40 + k) << 20);
			S(F_MARK);
			sb_printf(&b, ":%d},\"heap\":{\"live_bytes\":%d,\"peak_bytes\":%d},"
				      "\"callsites_mode\":\"full\",\"callsites\":["
				      "{\"stack\":1,\"kind\":\"heap\",\"live_bytes\":%d,\"live_count\":%d,"
				      "\"allocs\":%d,\"alloc_bytes\":%d,\"frees\":0,\"peak_bytes\":%d},"
				      "{\"stack\":2,\"kind\":\"cuda\",\"live_bytes\":12288,\"live_count\":2,"
				      "\"allocs\":2,\"alloc_bytes\":12288,\"frees\":0,\"peak_bytes\":12288}]}\n",
				  k * 10, (k + 1) << 20, (k + 1) << 20, (k + 1) << 20, k + 1, k + 1,
				  (k + 1) << 20, (k + 1) << 20);
		}
		*bs[w] = b;
	}
}

static int
memfd_of(const char *name, const struct sb *b, char *path, size_t n) {
	int fd = memfd_create(name, 0);
	if (fd < 0 || (b->len && write(fd, b->p, b->len) != (ssize_t)b->len))
		abort();
	snprintf(path, n, "/proc/self/fd/%d", fd);
	return fd;
}

/* Run cmd with stdout captured; the output (NUL-ended) or NULL if it
 * failed (a refused input is not a writer's fault). */
static char *
captured(int (*cmd)(struct opts *), char **paths, int npaths, int json, const char *out,
	 size_t *n) {
	static int cap = -1;
	if (cap < 0)
		cap = memfd_create("memtally.fuzz.out", 0);
	if (ftruncate(cap, 0))
		abort();
	fflush(stdout);
	int saved = dup(1);
	dup2(cap, 1);
	lseek(cap, 0, SEEK_SET);
	struct opts o = {.top = 10, .kind = -1, .warmup = 0.2, .metric = "live", .snapshot = SNAP_DEFAULT,
			 .out = out, .paths = paths, .npaths = npaths, .json = json};
	jmp_buf jb;
	int rc = -1;
	mt_fuzz_jmp = &jb;
	if (!setjmp(jb))
		rc = cmd(&o);
	mt_fuzz_jmp = NULL;
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	if (rc != 0)
		return NULL;
	return slurp_fd(cap, n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct sb proc, dump;
	make_files(data, size, &proc, &dump);
	const char *emit = getenv("MT_FUZZ_EMIT");
	if (emit) {
		static int seq;
		char p[4096];
		for (int w = 0; w < 2; w++) {
			snprintf(p, sizeof p, "%s/memtally.n%d.p7%s.jsonl", emit, seq, w ? ".oom1" : "");
			FILE *f = fopen(p, "w");
			if (!f || fwrite(w ? dump.p : proc.p, 1, w ? dump.len : proc.len, f) !=
					  (w ? dump.len : proc.len) || fclose(f))
				abort();
		}
		seq++;
	}
	char pp[64], dp[64];
	int pfd = memfd_of("memtally.fuzz.jsonl", &proc, pp, sizeof pp);
	int dfd = memfd_of("memtally.fuzz.oom1.jsonl", &dump, dp, sizeof dp);
	char *one_p[1] = {pp}, *one_d[1] = {dp}, *two[2] = {pp, dp};
	struct { const char *name; int (*fn)(struct opts *); char **paths; int n; } text[] = {
		{"report", cmd_report, one_p, 1}, {"leaks", cmd_leaks, one_p, 1},
		{"ranks", cmd_ranks, two, 2},     {"diff", cmd_diff, two, 2},
		{"oom", cmd_oom, one_d, 1},       {"report(dump)", cmd_report, one_d, 1},
	};
	for (size_t k = 0; k < sizeof text / sizeof text[0]; k++)
		for (int json = 0; json < 2; json++) {
			size_t n;
			char *out = captured(text[k].fn, text[k].paths, text[k].n, json, NULL, &n);
			if (!out)
				continue;
			if (json) {
				check_utf8(text[k].name, out, n);
				check_json(text[k].name, out, n);
			} else { /* text reaches a terminal through main.c's filter */
				struct textesc t = {0};
				struct sb e = {0};
				text_escape(&t, out, n, &e);
				check_utf8(text[k].name, e.p ? e.p : "", e.len);
				for (size_t i = 0; i < e.len; i++)
					if (((unsigned char)e.p[i] < 0x20 && e.p[i] != '\n' && e.p[i] != '\t') ||
					    e.p[i] == 0x7f)
						FAIL("%s: control character 0x%02x", text[k].name, e.p[i]);
				sb_free(&e);
			}
			free(out);
		}
	size_t n;
	char *o;
	if ((o = captured(cmd_flame, one_p, 1, 0, out_path, &n))) {
		free(o);
		if ((o = slurp(out_path, &n)))
			check_xml(o, n), free(o);
	}
	if ((o = captured(cmd_flame, one_d, 1, 0, out_path, &n))) {
		free(o);
		if ((o = slurp(out_path, &n)))
			check_xml(o, n), free(o);
	}
	if ((o = captured(cmd_html, two, 2, 0, out_path, &n))) {
		free(o);
		if ((o = slurp(out_path, &n)))
			check_page(o, n), free(o);
	}
	if ((o = captured(cmd_torch, one_d, 1, 0, out_path, &n))) {
		free(o);
		/* the pickle: loaded by Python's own pickle in run.sh */
	}
	close(pfd);
	close(dfd);
	sb_free(&proc);
	sb_free(&dump);
	return 0;
}
#else
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	int fd = memfd_create("memtally.fuzz.jsonl", 0);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
#ifdef FUZZ_WRITERS
	one(cmd_torch, path, out_path);
	one_opt(cmd_torch, path, out_path, 0, 1);
	one(cmd_html, path, out_path);
	one(cmd_flame, path, out_path);
	one_opt(cmd_flame, path, out_path, 1, 0);
	one(cmd_pprof, path, out_path);
#else
	one(cmd_report, path, NULL);
	one(cmd_leaks, path, NULL);
	one(cmd_ranks, path, NULL);
	one(cmd_oom, path, NULL);
	one(cmd_functions, path, NULL);
	one(cmd_top, path, NULL); /* stdout is not a terminal: one frame */
#endif
	close(fd);
	return 0;
}
#endif
