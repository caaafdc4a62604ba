/* antest_userline — rows led by the user's line (answer/userline.c):
 * memtally's own frames and the importlib frames that only lead into
 * them dropped, the program's own frames told from the library's, and a
 * line's source text (comment cut, blanks folded, cut short). */
#include "../test.h"
#include "answer/sites.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *__asan_default_options(void);
const char *
__asan_default_options(void) {
	return "detect_leaks=0";
}

static struct frame
py(const char *func, const char *file, int line) {
	return (struct frame){.func = func, .file = file, .line = line, .python = 1};
}

#define BOOT "<frozen importlib._bootstrap>"
#define EXT "<frozen importlib._bootstrap_external>"
#define HOOK "/usr/share/memtally/python/sitecustomize.py"

TEST(own_frames) {
	struct frame f = py("_MemtallyTorchFinder.find_spec.<locals>.exec_module", HOOK, 123);
	EXPECT(site_own_frame(&f));
	f = py("_memtally_on_torch", "/x/sitecustomize.py", 140);
	EXPECT(site_own_frame(&f));
	f = py("install", "/opt/mt/python/_memtally/torchhook.py", 20);
	EXPECT(site_own_frame(&f));
	f = py("_step", "/opt/mt/memtally_torch.py", 20);
	EXPECT(site_own_frame(&f));
	f = py("wrap", "/opt/mt/memtally_cuda.py", 20);
	EXPECT(site_own_frame(&f));
	/* a program's own sitecustomize (Debian's) is not memtally's */
	f = py("<module>", "/usr/lib/python3.11/sitecustomize.py", 3);
	EXPECT(!site_own_frame(&f));
	f = py("forward", "/home/u/model.py", 17);
	EXPECT(!site_own_frame(&f) && site_py_user(&f));
	f = py("relu", "/usr/lib/python3/dist-packages/torch/nn/functional.py", 1457);
	EXPECT(!site_py_user(&f));
	f = py("_find_and_load", BOOT, 1178);
	EXPECT(!site_py_user(&f));
	f = py("_memtally_start", HOOK, 150);
	EXPECT(!site_py_user(&f));
}

/* The import of torch under the hook: the hook's wrapper goes, importlib's
 * frames around it stay (they are the import's, memtally or not). */
TEST(import_through_the_hook) {
	struct frame fr[] = {
		{.func = "malloc", .module = "libc.so.6"},
		py("<module>", "/usr/lib/python3/dist-packages/torch/__init__.py", 21),
		py("_call_with_frames_removed", BOOT, 241),
		py("_LoaderBasics.exec_module", EXT, 940),
		py("_MemtallyTorchFinder.find_spec.<locals>.exec_module", HOOK, 123),
		py("_load_unlocked", BOOT, 690),
		py("_find_and_load", BOOT, 1178),
		py("<module>", "/home/u/train.py", 1),
	};
	int n = site_drop_own(fr, 8);
	EXPECT(n == 7);
	for (int i = 0; i < n; i++)
		EXPECT(!strstr(fr[i].func, "Memtally"));
	EXPECT(!strcmp(fr[4].func, "_load_unlocked") && fr[6].line == 1);
}

/* memtally's own work under an import: its frames and the importlib
 * frames that only lead into them go; the program's import line is left. */
TEST(hook_work_is_the_import_line) {
	struct frame fr[] = {
		{.func = "PyObject_Malloc", .module = "python3.11"},
		py("_memtally_on_torch", HOOK, 140),
		py("_MemtallyTorchFinder.find_spec.<locals>.exec_module", HOOK, 130),
		py("_load_unlocked", BOOT, 690),
		py("_find_and_load_unlocked", BOOT, 1149),
		py("_find_and_load", BOOT, 1178),
		py("<module>", "/home/u/train.py", 1),
	};
	int n = site_drop_own(fr, 7);
	EXPECT(n == 2);
	EXPECT(!fr[0].python && !strcmp(fr[1].file, "/home/u/train.py"));
	/* no memtally frame: nothing dropped */
	struct frame g[] = {py("_find_and_load", BOOT, 1178), py("<module>", "/home/u/t.py", 3)};
	EXPECT(site_drop_own(g, 2) == 2);
}

TEST(source_text) {
	char path[] = "/tmp/antest_userlineXXXXXX";
	int fd = mkstemp(path);
	EXPECT(fd >= 0);
	FILE *o = fdopen(fd, "w");
	fputs("import torch\n"
	      "    out  =\tmodel(x)   # the forward pass\n"
	      "s = \"a # not a comment\"  # one\n"
	      "x = 'it''s'\n"
	      "y = [0] * 1000 + [1] * 1000 + [2] * 1000 + [3] * 1000 + [4] * 1000 + [5] * 1000\n"
	      "# only a comment\n"
	      "z = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9\xc3\xa9\xc3\xa9'\n",
	      o);
	fclose(o);
	char b[128];
	EXPECT(!strcmp(site_src_line(path, 1, b, sizeof b), "import torch"));
	EXPECT(!strcmp(site_src_line(path, 2, b, sizeof b), "out = model(x)"));
	EXPECT(!strcmp(site_src_line(path, 3, b, sizeof b), "s = \"a # not a comment\""));
	EXPECT(!strcmp(site_src_line(path, 4, b, sizeof b), "x = 'it''s'"));
	/* cut at 60 bytes and "...", whatever the buffer held (it read a
	 * byte it had not written: some runs cut one character more) */
	memset(b, 0x80, sizeof b);
	site_src_line(path, 5, b, sizeof b);
	EXPECT(strlen(b) == 63 && !strcmp(b + 60, "..."));
	/* a cut inside a 2-byte character leaves the whole character out:
	 * 60 bytes are "z = '", 54 a's and the first byte of an e-acute */
	memset(b, 0x80, sizeof b);
	site_src_line(path, 7, b, sizeof b);
	EXPECT(strlen(b) == 62 && !strcmp(b + 58, "a..."));
	EXPECT(!strcmp(site_src_line(path, 6, b, sizeof b), ""));
	EXPECT(!strcmp(site_src_line(path, 8, b, sizeof b), ""));
	EXPECT(!strcmp(site_src_line(path, 0, b, sizeof b), ""));
	unlink(path);
	/* read once: the text stays as it was read */
	EXPECT(!strcmp(site_src_line(path, 1, b, sizeof b), "import torch"));
	EXPECT(!strcmp(site_src_line("/nonexistent/x.py", 1, b, sizeof b), ""));
}

TEST(row_keys) {
	EXPECT(site_key_len("t.py:3  x = f()   via a.py:9 g") == strlen("t.py:3  x = f()"));
	EXPECT(site_same_row("t.py:3  x = f()   via a.py:9 g", "t.py:3  x = f()   via b.py:1 h"));
	EXPECT(site_same_row("t.py:3  x = f()", "t.py:3  x = f()   via b.py:1 h"));
	EXPECT(!site_same_row("t.py:3  x = f()", "t.py:4  x = f()"));
	EXPECT(!site_same_row("malloc < main", "malloc < main2"));
}

int
main(void) {
	RUN(own_frames);
	RUN(import_through_the_hook);
	RUN(hook_work_is_the_import_line);
	RUN(source_text);
	RUN(row_keys);
	return TEST_DONE();
}
