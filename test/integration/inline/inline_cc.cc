// Inlined C++ callers (test_inline): a member function inlined through a
// template and a namespace's static functions into main, and libstdc++'s
// allocator chain under std::vector.  Built by the test at -O2 and -O3.
#include <cstdio>
#include <memory>
#include <vector>
struct Pool {
	std::vector<std::unique_ptr<char[]>> blocks;
	void grab(size_t n) { blocks.emplace_back(new char[n]); }
	template <int K> void fill() {
		for (int i = 0; i < K; i++)
			grab(64 * (K + i));
	}
};
static Pool pool;
namespace app {
static inline void stage_one() { pool.fill<4>(); }
static inline void stage_two() { pool.fill<7>(); }
}
int main() {
	app::stage_one();
	app::stage_two();
	std::vector<int> v;
	v.reserve(1000);
	std::printf("%zu %zu\n", pool.blocks.size(), v.capacity());
	return 0;
}
