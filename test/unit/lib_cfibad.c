/* lib_cfibad — a library whose unwind information the build corrupts
 * after linking (test/unit/corrupt_eh_frame.py: every FDE's CIE pointer
 * points far outside the library), for test_cfi: the CFI walker must
 * refuse such a frame, not read where the pointer says. */
__attribute__((noinline)) int
cfibad_call(int (*cb)(void)) {
	int r = cb();
	__asm__ volatile("" ::: "memory"); /* no tail call: this frame stays */
	return r + 1;
}
