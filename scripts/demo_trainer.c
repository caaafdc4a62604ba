/* demo_trainer — the bundled example workload for `make demo`: a training
 * loop in miniature.  Each step does some arithmetic (the "forward and
 * backward pass"), allocates and frees activations, keeps a bounded batch
 * cache, writes an mmap'd checkpoint every 50 steps, and keeps each step's
 * "loss record" forever in keep_loss_history(): the leak the demo finds.
 * It marks "step" through memtally's C API when the shim is loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int (*mark)(const char *, double);
static void **history;
static int nhistory;

__attribute__((noinline)) static double forward_backward(int step) {
	int n = 96;
	double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
	double *c = calloc(n * n, sizeof *c), s = 0;
	for (int i = 0; i < n * n; i++)
		a[i] = (i % 7) * 0.1 + step, b[i] = (i % 5) * 0.2;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < n; k++)
			for (int j = 0; j < n; j++)
				c[i * n + j] += a[i * n + k] * b[k * n + j];
	for (int i = 0; i < n * n; i++)
		s += c[i];
	free(a), free(b), free(c);
	return s / (n * n);
}

static void *cache[64];
__attribute__((noinline)) static void batch_cache(int step) {
	int slot = step % 64;
	free(cache[slot]);
	cache[slot] = malloc(32768);
	memset(cache[slot], step, 32768);
}

__attribute__((noinline)) static void save_checkpoint(void) {
	size_t n = 16 << 20;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	memset(p, 7, n);
	munmap(p, n);
}

__attribute__((noinline)) static void keep_loss_history(int step, double loss) {
	double *rec = malloc(24576); /* the loss "with its graph": 24 KiB a step */
	rec[0] = step, rec[1] = loss;
	history[nhistory++] = rec;
}

int main(int argc, char **argv) {
	int steps = argc > 1 ? atoi(argv[1]) : 300;
	history = calloc(steps + 1, sizeof *history);
	mark = (int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	double loss = 0;
	for (int step = 1; step <= steps; step++) {
		if (mark)
			mark("step", step);
		loss = forward_backward(step);
		batch_cache(step);
		if (step % 50 == 0)
			save_checkpoint();
		keep_loss_history(step, loss);
	}
	printf("demo_trainer: %d steps, last loss %.3f\n", steps, loss);
	return 0;
}
