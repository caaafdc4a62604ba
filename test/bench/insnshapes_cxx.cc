// insnshapes_cxx — C++'s shapes of test/bench/insn.sh (insnshapes.c
// says the method): argv[2] units, each one object made and destroyed
// through operator new/delete, built -O2 without frame pointers.
//
//   unique   std::make_unique of a 64-byte object, dropped at once
//   vector   a std::vector<int> of 4 to 1024 elements (one heap block),
//            filled once and dropped
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static size_t
next_size() {
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return 4 + (size_t)(rng % 1021);
}

struct obj {
	uint64_t a[8];
};

__attribute__((noinline)) static uint64_t
one_unique(uint64_t i) {
	auto p = std::make_unique<obj>();
	p->a[i & 7] = i;
	__asm__ volatile("" : : "r"(p.get()) : "memory");
	return p->a[0];
}

__attribute__((noinline)) static uint64_t
one_vector(size_t n) {
	std::vector<int> v(n);
	__asm__ volatile("" : : "r"(v.data()) : "memory");
	return (uint64_t)v[n - 1];
}

int
main(int argc, char **argv) {
	if (argc < 3 || (strcmp(argv[1], "unique") && strcmp(argv[1], "vector"))) {
		fprintf(stderr, "usage: insnshapes_cxx unique|vector UNITS\n");
		return 2;
	}
	long units = atol(argv[2]);
	uint64_t sum = 0;
	if (!strcmp(argv[1], "unique"))
		for (long i = 0; i < units; i++)
			sum += one_unique((uint64_t)i);
	else
		for (long i = 0; i < units; i++)
			sum += one_vector(next_size());
	return (int)(sum & 0);
}
