/* prog_mpi — an MPI job (built with mpicc) where every rank churns and
 * rank argv[1] also keeps 64 KiB per step; 60 steps with a barrier each,
 * a snapshot requested every 3 steps. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void work(int step) {
	void *t[100];
	for (int i = 0; i < 100; i++)
		t[i] = malloc(100 + (i * step) % 3000);
	for (int i = 0; i < 100; i++)
		free(t[i]);
}
static void *kept[1000];
__attribute__((noinline)) static void rank_leak(int step) {
	kept[step] = malloc(65536);
	memset(kept[step], 1, 65536);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size, leaker = argc > 1 ? atoi(argv[1]) : -1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	int (*mark)(const char *, double) =
		(int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	for (int step = 1; step <= 60; step++) {
		if (mark)
			mark("step", step);
		work(step);
		if (rank == leaker)
			rank_leak(step);
		MPI_Barrier(MPI_COMM_WORLD);
		if (snap && step % 3 == 0)
			snap("step");
	}
	if (rank == 0)
		printf("mpi: %d ranks done\n", size);
	MPI_Finalize();
	return 0;
}
