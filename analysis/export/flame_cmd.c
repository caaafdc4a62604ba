/* flame_cmd.c — `memtally flame`: the flame graph (flame.h) of a file or
 * a directory's processes at the moment every view reads (the peak, or
 * the snapshot named), as SVG or, with --folded, the folded stacks that
 * flamegraph.pl, inferno and speedscope read. */
#include "export/flame.h"
#include "cmd/cmd.h"
#include "answer/sites.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
cmd_flame(struct opts *o) {
	if (!o->out && !o->folded)
		die(EXIT_USAGE, "flame needs -o FILE.svg");
	struct run r;
	cmd_load(o, &r);
	struct fnode *root = flame_new();
	char lab[128], title[256];
	/* The moment answer.h gives every view: the peak (exact where the
	 * file keeps each site's bytes at it: a default run's only snapshot is
	 * at exit, after the program let go of what it held), --snapshot, or
	 * a file's own FILE@N.  Allocation counts are totals to a moment: the
	 * last snapshot unless one is named. */
	struct ask ask = o->ask;
	if (ask.snapshot == SNAP_DEFAULT && strcmp(o->metric, "live"))
		ask.snapshot = SNAP_LAST;
	int peak = 0;
	for (size_t i = 0; i < r.nfiles; i++) {
		const struct snap *s;
		int at_peak;
		size_t n;
		struct site *v = answer_sites(&r.files[i], &ask, &s, &at_peak, &n);
		peak |= at_peak;
		flame_add_sites(root, &r.files[i], v, n, o->metric,
				r.nfiles > 1 ? file_label(&r.files[i], lab, sizeof lab) : NULL, o->kind);
		free(v);
	}
	const char *what = !strcmp(o->metric, "live")     ? "live memory"
			   : !strcmp(o->metric, "allocs") ? "allocations"
							  : "bytes allocated";
	if (r.nfiles == 1)
		snprintf(title, sizeof title, "%s: %s by call site %s",
			 file_label(&r.files[0], lab, sizeof lab), what,
			 answer_moment_name(&r.files[0], &ask));
	else
		snprintf(title, sizeof title, "%zu processes: %s by call site%s", r.nfiles, what,
			 peak ? " at the peak" : "");
	struct sb s = {0};
	if (o->folded) { /* flamegraph.pl, inferno, speedscope: frame;frame bytes */
		flame_folded(&s, root);
		if (o->out) {
			write_output(o->out, s.p ? s.p : "", s.len);
			fprintf(stderr, "memtally: wrote %s\n", o->out);
		} else if (s.len) {
			fwrite(s.p, 1, s.len, stdout);
		}
		sb_free(&s);
		flame_free(root);
		return 0;
	}
	sb_puts(&s, "<?xml version=\"1.0\" standalone=\"no\"?>\n");
	flame_svg(&s, root, title, o->metric, 1200, 1);
	write_output(o->out, s.p, s.len);
	fprintf(stderr, "memtally: wrote %s\n", o->out);
	sb_free(&s);
	flame_free(root);
	return 0;
}
