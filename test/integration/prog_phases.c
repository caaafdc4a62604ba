/* prog_phases — phases and the workload through the C API (memtally.h,
 * not linked to the shim): 40 steps, each marked with a workload object
 * ({"tokens": 100 * step}); at step 20 a phase "checkpoint_save" holds a
 * 16 MiB buffer (written to, then freed inside it), and the phases
 * "outer" > "inner" nest around a mark.  Prints the return values of
 * the calls that must be refused: an end of a phase never begun, an empty
 * name, a workload that is not one object. */
#include "memtally.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main(void) {
	char w[128];
	for (int step = 1; step <= 40; step++) {
		if (step == 20) {
			memtally_phase("checkpoint_save", 1);
			char *p = malloc(16 << 20);
			memset(p, 1, 16 << 20);
			free(p);
			memtally_phase("checkpoint_save", 0);
		}
		if (step == 30) {
			memtally_phase("outer", 1);
			memtally_phase("inner", 1);
			memtally_snapshot("nested");
			memtally_phase("inner", 0);
			memtally_phase("outer", 0);
		}
		snprintf(w, sizeof w, "{\"tokens\":%d,\"shapes\":[[4,%d]]}", 100 * step, 25 * step);
		memtally_workload(w);
		memtally_mark("step", step);
	}
	printf("%d %d %d\n", memtally_phase("never", 0), memtally_phase("", 1),
	       memtally_workload("[1,2]"));
	return 0;
}
