/* oom.c — `memtally oom`: what was live at an OOM dump (host, CUDA or
 * pre-OOM), by call site and by segment, with the last events before it.
 * Takes dump files or run directories (their *.oom<N>.jsonl). */
#include "cmd/cmd.h"
#include "answer/sites.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>

static int
cmp_seg(const void *a, const void *b) {
	const struct segment *x = a, *y = b;
	return x->size < y->size ? 1 : x->size > y->size ? -1 : (x->addr > y->addr) - (x->addr < y->addr);
}

static void
one(struct mfile *f, struct opts *o, struct sb *j, int first) {
	const struct oominfo *m = f->oom;
	char a[16], b[16], c[16], name[512];
	if (!m)
		die(EXIT_BAD_INPUT, "%s: not an OOM dump (no oom record)", f->path);
	if (!f->nsnaps)
		die(EXIT_BAD_INPUT, "%s: the dump has no snapshot (cut short?)", f->path);
	const struct snap *s = &f->snaps[f->nsnaps - 1];
	size_t ns;
	struct site *v = sites_sorted(f, s, &ns);
	int cuda = !strcmp(m->kind, "cuda");
	/* figures over the segments the dump lists (device ones for a CUDA
	 * dump; mappings of VMM handles are not memory of their own) */
	int64_t live = 0;
	size_t nlive = 0;
	for (size_t i = 0; i < f->nsegs; i++)
		if (!f->segs[i].mapped)
			live += (int64_t)f->segs[i].size, nlive++;
	struct segment *sv = xmalloc((f->nsegs + 1) * sizeof *sv);
	if (f->nsegs) /* f->segs is NULL in a dump without segments */
		memcpy(sv, f->segs, f->nsegs * sizeof *sv);
	xqsort(sv, f->nsegs, sizeof *sv, cmp_seg);
	size_t ev0 = f->nevents > 15 ? f->nevents - 15 : 0;
	if (o->json) {
		if (!first)
			sb_putc(j, ',');
		file_json_head(j, f);
		sb_puts(j, ",\"kind\":");
		sb_json_str(j, m->kind);
		sb_puts(j, ",\"api\":");
		sb_json_str(j, m->api);
		sb_puts(j, ",\"error\":");
		sb_json_str(j, m->error);
		sb_printf(j, ",\"requested_bytes\":%llu,\"device\":%lld,"
			     "\"driver_free_bytes\":%lld,\"driver_total_bytes\":%lld,"
			     "\"cgroup_current_bytes\":%lld,\"cgroup_max_bytes\":%lld,\"elapsed_ms\":%lld,"
			     "\"live_bytes\":%lld,\"live_count\":%zu,\"callsites\":[",
			  (unsigned long long)m->requested, (long long)m->device,
			  (long long)m->drv_free, (long long)m->drv_total, (long long)m->cg_current,
			  (long long)m->cg_max, (long long)m->elapsed_ms, (long long)live, nlive);
		int shown = 0;
		for (size_t i = 0; i < ns && shown < o->top; i++) {
			if ((v[i].kind >= K_CUDA) != cuda && strcmp(m->kind, "preoom"))
				continue;
			if (!v[i].live_bytes)
				break;
			if (shown++)
				sb_putc(j, ',');
			sb_printf(j, "{\"kind\":\"%s\",\"live_bytes\":%lld,\"live_count\":%lld,",
				  kind_names[v[i].kind], (long long)v[i].live_bytes,
				  (long long)v[i].live_count);
			site_json_names(j, f, v[i].stack);
			sb_putc(j, '}');
		}
		sb_puts(j, "],\"segments\":[");
		for (size_t i = 0; i < f->nsegs && (int)i < o->top; i++) {
			sb_printf(j, "%s{\"kind\":\"%s\",\"%s\":\"0x%llx\",\"size\":%llu,\"device\":%d,"
				     "\"stream\":%d,\"mapped\":%s,\"time_ms\":%lld,\"function\":",
				  i ? "," : "", kind_names[sv[i].kind], sv[i].is_handle ? "handle" : "address",
				  (unsigned long long)sv[i].addr, (unsigned long long)sv[i].size,
				  sv[i].device, sv[i].stream, sv[i].mapped ? "true" : "false",
				  (long long)sv[i].time_ms);
			sb_json_str(j, site_func(f, sv[i].stack, name, sizeof name));
			sb_putc(j, '}');
		}
		sb_puts(j, "],\"events\":[");
		for (size_t i = ev0; i < f->nevents; i++) {
			const struct event *e = &f->events[i];
			sb_printf(j, "%s{\"op\":", i > ev0 ? "," : "");
			sb_json_str(j, e->op);
			sb_printf(j, ",\"kind\":\"%s\",\"address\":\"0x%llx\",\"size\":%llu,"
				     "\"time_ms\":%lld,\"function\":",
				  kind_names[e->kind],
				  (unsigned long long)e->addr, (unsigned long long)e->size,
				  (long long)e->time_ms);
			sb_json_str(j, e->stack ? site_func(f, e->stack, name, sizeof name) : "");
			sb_putc(j, '}');
		}
		sb_puts(j, "]}");
	} else {
		file_title(f);
		printf("  %s OOM: %s(%s) failed with %s at %s\n", m->kind, m->api,
		       human_u64(m->requested, a), m->error, human_ms(m->elapsed_ms, b));
		if (m->drv_total > 0)
			printf("  device %lld: driver free %s of %s\n", (long long)m->device,
			       human(m->drv_free, a), human(m->drv_total, b));
		if (m->cg_max > 0)
			printf("  cgroup: %s of %s\n", human(m->cg_current, a), human(m->cg_max, b));
		printf("  live at the OOM: %s in %zu allocation%s%s\n", human(live, c), nlive,
		       nlive == 1 ? "" : "s", m->sampled ? " (heap sampled: estimates)" : "");
		printf("  by call site:\n  %11s %9s %-12s %s\n", "live", "count", "kind", "where");
		/* the failing side's sites; rows that print alike are one */
		struct site *w = xmalloc((ns ? ns : 1) * sizeof *w);
		size_t nw = 0;
		for (size_t q = 0; q < ns; q++)
			if (((v[q].kind >= K_CUDA) == cuda || !strcmp(m->kind, "preoom")) && v[q].live_bytes)
				w[nw++] = v[q];
		size_t nr;
		struct site_row *r = site_rows(f, w, nw, -1, o->stacks, 4 * o->top + 64, 0, &nr);
		int shown = 0;
		for (size_t q = 0; q < nr && shown < o->top; q++) {
			site_row_name(&r[q], 37, o->stacks, name, sizeof name);
			printf("  %11s %9lld %-12s %s\n", human(r[q].v[0], a), (long long)r[q].v[1],
			       kind_names[r[q].kind], name);
			if (o->stacks)
				site_print_stack(stdout, f, r[q].stack, "        ");
			shown++;
		}
		site_rows_free(r, nr);
		free(w);
		printf("  largest segments:\n  %-18s %11s %-12s %4s %s\n", "address", "size", "kind",
		       "dev", "allocated by");
		for (size_t i = 0; i < f->nsegs && (int)i < o->top; i++) {
			char dv[16] = "-";
			if (sv[i].device >= 0)
				snprintf(dv, sizeof dv, "%d", sv[i].device);
			site_func(f, sv[i].stack, name, sizeof name);
			printf("  %s0x%-16llx %11s %-12s %4s %s%s\n", sv[i].is_handle ? "h" : " ",
			       (unsigned long long)sv[i].addr, human((int64_t)sv[i].size, a),
			       kind_names[sv[i].kind], dv, name, sv[i].mapped ? " [mapped]" : "");
		}
		printf("  last events before it:\n  %9s %-5s %-12s %11s %s\n", "time", "op", "kind", "size",
		       "where");
		for (size_t i = ev0; i < f->nevents; i++) {
			const struct event *e = &f->events[i];
			/* to the millisecond: events of one second told apart */
			char t[32];
			snprintf(t, sizeof t, "%.3fs", (double)e->time_ms / 1000);
			printf("  %9s %-5s %-12s %11s %s\n", t, e->op,
			       kind_names[e->kind], human((int64_t)e->size, b),
			       e->stack ? site_func(f, e->stack, name, sizeof name) : "");
		}
		printf("\n");
	}
	free(v);
	free(sv);
}

int
cmd_oom(struct opts *o) {
	struct run r;
	cmd_list(o, &r, 1); /* read one at a time */
	return each_file(&r, o, "dumps", one);
}
