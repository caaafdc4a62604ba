/* prog_embed — an embedder that dlopen's libpython (argv[1]) RTLD_LOCAL
 * after start, so the shim finds the interpreter late (by name, from its
 * writer thread): Py_Initialize, a snapshot (by then the shim has looked),
 * Python code allocating 123456 + 1 bytes at line 3 of "<embedded>", and
 * a thread with no Python state allocating 654321 bytes; then a snapshot
 * "end".  Uses no Python headers: everything through dlsym. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *keep;

static void *
native_thread(void *a) {
	(void)a;
	keep = malloc(654321);
	return NULL;
}

int
main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 3;
	}
	void (*init)(void) = (void (*)(void))dlsym(h, "Py_Initialize");
	int (*run)(const char *) = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
	void *(*save)(void) = (void *(*)(void))dlsym(h, "PyEval_SaveThread");
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	if (!init || !run || !save || !snap)
		return 4;
	init();
	snap("init");
	if (run("keep = []\ndef grab(n):\n    keep.append(bytearray(n))\ngrab(123456)\n"))
		return 5;
	void *ts = save(); /* the GIL released: the native thread never takes it */
	(void)ts;
	pthread_t t;
	pthread_create(&t, NULL, native_thread, NULL);
	pthread_join(t, NULL);
	snap("end");
	printf("embedded ok\n");
	return 0;
}
