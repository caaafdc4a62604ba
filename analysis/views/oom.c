/* oom.c — `memtally oom`: what was live at an OOM dump (host, CUDA or
 * pre-OOM), by call site and by segment, with the last events before it
 * and what became of the failure (recovered, failed again, raised by
 * PyTorch).  With PyTorch's snapshot of the moment beside a CUDA dump
 * (<dump>.torch.jsonl), the joined table (answer/join.h): torch's
 * segments with their driver allocations and blocks, the device memory
 * outside torch, and the totals that reconcile.  Takes dump files or run
 * directories (their *.oom<N>.jsonl). */
#include "cmd/cmd.h"
#include "answer/join.h"
#include "answer/sites.h"
#include "base/util.h"
#include "read/torchsnap.h"
#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {"allocated", "pending_free", "inactive"};

/* What became of the failure (the dump's outcome line), in words. */
static void
outcome_text(const struct oominfo *m) {
	char a[16], b[16], c[16];
	if (!m->outcome[0]) {
		if (!strcmp(m->kind, "cuda"))
			printf("  outcome: not known (no allocation on the device after it, or an older shim)\n");
		return;
	}
	int64_t after = m->out_ms >= 0 ? m->out_ms - m->elapsed_ms : -1;
	if (!strcmp(m->outcome, "recovered"))
		printf("  outcome: recovered: the next allocation on the device succeeded %s later, after %lld "
		       "free%s (%s) -- the caching allocator released its cache and retried\n",
		       after >= 0 ? human_ms(after, a) : "?", (long long)m->out_frees,
		       m->out_frees == 1 ? "" : "s", human(m->out_freed, b));
	else if (!strcmp(m->outcome, "failed_again"))
		printf("  outcome: failed again: after %lld free%s (%s) the retry failed too (the next dump)\n",
		       (long long)m->out_frees, m->out_frees == 1 ? "" : "s", human(m->out_freed, b));
	else if (!strcmp(m->outcome, "raised"))
		printf("  outcome: raised: PyTorch's OutOfMemoryError, the failure the program saw (its OOM "
		       "observer: %s asked, limit %s, driver free %s)\n",
		       human(m->torch_size, a), human(m->torch_limit, b), human(m->torch_free, c));
	else
		printf("  outcome: %s\n", m->outcome);
}

static void
outcome_json(struct sb *j, const struct oominfo *m) {
	sb_puts(j, ",\"outcome\":");
	if (!m->outcome[0]) {
		sb_puts(j, "null");
		return;
	}
	sb_puts(j, "{\"outcome\":");
	sb_json_str(j, m->outcome);
	sb_printf(j, ",\"time_ms\":%lld,\"frees\":%lld,\"freed_bytes\":%lld,\"by_torch\":%s",
		  (long long)m->out_ms, (long long)m->out_frees, (long long)m->out_freed,
		  m->by_torch ? "true" : "false");
	if (m->by_torch)
		sb_printf(j, ",\"torch_size\":%lld,\"torch_limit_bytes\":%lld,\"torch_free_bytes\":%lld",
			  (long long)m->torch_size, (long long)m->torch_limit, (long long)m->torch_free);
	sb_putc(j, '}');
}

/* A driver allocation: "cuda 0x7f.. 30.0 MiB by make_weights (x.py:36)". */
static const char *
drv_name(const struct mfile *f, const struct segment *s, char *buf, size_t n) {
	char nm[512], a[16];
	snprintf(buf, n, "%s%s 0x%llx %s by %s", kind_names[s->kind], s->mapped ? " mapping" : "",
		 (unsigned long long)s->addr, human((int64_t)s->size, a),
		 site_name(f, s->stack, 0, nm, sizeof nm));
	return buf;
}

static void
join_text(const struct mfile *f, const struct tsnap *t, const struct join *jn, const struct opts *o) {
	char a[16], b[16], c[16], d[16], line[512], nm[800];
	const char *base = strrchr(t->path, '/');
	printf("  PyTorch's snapshot of the moment: %s (torch %s)\n", base ? base + 1 : t->path, t->torch);
	printf("  device %d: driver live %s = torch allocated %s + torch cached %s + outside torch %s",
	       jn->device, human(jn->live, a), human(jn->allocated, b), human(jn->cached, c),
	       human(jn->outside, d));
	if (!jn->mismatch)
		printf("  (reconciles to the byte)\n");
	else
		printf("\n  DOES NOT RECONCILE: torch's segments hold %s, the driver allocations under them %s "
		       "(%lld bytes apart: allocations memtally did not see, or the two were not taken at one "
		       "moment)\n", human(jn->reserved, a), human(jn->inside, b), (long long)jn->mismatch);
	if (jn->pending)
		printf("  of torch cached, %s is freed but still in use by a stream (pending free)\n",
		       human(jn->pending, a));
	if (jn->driver_used >= 0 && jn->driver_used > jn->live)
		printf("  the driver's used memory is %s more (CUDA context, modules, other processes: not "
		       "allocations memtally sees)\n", human(jn->driver_used - jn->live, a));
	printf("  torch's segments, largest first (the driver allocations under each; its blocks, largest first):\n");
	int bmax = o->top < 8 ? o->top : 8;
	for (size_t k = 0; k < jn->nsegs && (int)k < o->top; k++) {
		const struct jseg *g = &jn->segs[k];
		printf("    segment 0x%llx %s %s%s: %s allocated, %s cached; %s\n",
		       (unsigned long long)g->t->addr, human((int64_t)g->t->size, a), g->t->type,
		       g->t->expandable ? " expandable" : "", human(g->allocated, b),
		       human((int64_t)g->t->size - g->allocated, c),
		       g->ndrv == 1 ? drv_name(f, &f->segs[g->drv[0]], nm, sizeof nm)
		       : g->ndrv ? "" : "NO driver allocation under it");
		if (g->ndrv > 1) {
			printf("      %zu driver allocations, %s:\n", g->ndrv, human(g->drv_bytes, a));
			for (size_t q = 0; q < g->ndrv && (int)q < bmax; q++)
				printf("        %s\n", drv_name(f, &f->segs[g->drv[q]], nm, sizeof nm));
			if (g->ndrv > (size_t)bmax)
				printf("        ... %zu more\n", g->ndrv - (size_t)bmax);
		}
		int64_t rest = 0;
		for (size_t q = 0; q < g->nblocks; q++) {
			const struct tblock *bl = &t->blocks[g->blocks[q]];
			if ((int)q >= bmax) {
				rest += (int64_t)bl->size;
				continue;
			}
			tsnap_line(t, bl->stack, line, sizeof line);
			printf("      %11s  %-12s %s\n", human((int64_t)bl->size, a), state_names[bl->state],
			       bl->state == TB_INACTIVE ? "" : line[0] ? line : "(no frames: history off?)");
		}
		if (g->nblocks > (size_t)bmax)
			printf("      %11s  ... %zu more blocks\n", human(rest, a), g->nblocks - (size_t)bmax);
	}
	if (jn->nsegs > (size_t)o->top)
		printf("    ... %zu more segments (--top)\n", jn->nsegs - (size_t)o->top);
	printf("  outside torch (device memory in no torch segment):\n");
	if (!jn->nouts)
		printf("    none\n");
	for (size_t k = 0; k < jn->nouts && (int)k < o->top; k++) {
		const struct jout *x = &jn->outs[k];
		if (x->seg == SIZE_MAX) {
			printf("    %11s  %-10s VMM handles (cuMemCreate) no listed mapping shows\n",
			       human(x->bytes, a), "unmapped");
			continue;
		}
		const struct segment *s = &f->segs[x->seg];
		printf("    %11s  %-10s %s%s\n", human(x->bytes, a), x->owner ? x->owner : "other",
		       site_name(f, s->stack, 1, nm, sizeof nm), s->mapped ? " [VMM mapping]" : "");
	}
	if (jn->nouts > (size_t)o->top)
		printf("    ... %zu more (--top)\n", jn->nouts - (size_t)o->top);
	if (jn->pinned)
		printf("  pinned host memory (not device memory): %s\n", human(jn->pinned, a));
}

static void
join_json(struct sb *j, const struct mfile *f, const struct tsnap *t, const struct join *jn,
	  const struct opts *o) {
	char line[512], nm[512];
	const char *base = strrchr(t->path, '/');
	sb_puts(j, ",\"torch\":{\"file\":");
	sb_json_str(j, base ? base + 1 : t->path);
	sb_puts(j, ",\"version\":");
	sb_json_str(j, t->torch);
	sb_printf(j, ",\"device\":%d,\"driver_live_bytes\":%lld,\"torch_allocated_bytes\":%lld,"
		     "\"torch_cached_bytes\":%lld,\"torch_pending_free_bytes\":%lld,"
		     "\"torch_reserved_bytes\":%lld,\"inside_bytes\":%lld,\"outside_bytes\":%lld,"
		     "\"unmapped_bytes\":%lld,\"pinned_host_bytes\":%lld,\"mismatch_bytes\":%lld,"
		     "\"reconciles\":%s,\"segments\":[",
		  jn->device, (long long)jn->live, (long long)jn->allocated, (long long)jn->cached,
		  (long long)jn->pending, (long long)jn->reserved, (long long)jn->inside,
		  (long long)jn->outside, (long long)(jn->unmapped > 0 ? jn->unmapped : 0),
		  (long long)jn->pinned, (long long)jn->mismatch, jn->mismatch ? "false" : "true");
	for (size_t k = 0; k < jn->nsegs && (int)k < o->top; k++) {
		const struct jseg *g = &jn->segs[k];
		sb_printf(j, "%s{\"address\":\"0x%llx\",\"size\":%llu,\"type\":", k ? "," : "",
			  (unsigned long long)g->t->addr, (unsigned long long)g->t->size);
		sb_json_str(j, g->t->type);
		sb_printf(j, ",\"expandable\":%s,\"allocated_bytes\":%lld,\"pending_free_bytes\":%lld,"
			     "\"inactive_bytes\":%lld,\"driver_bytes\":%lld,\"driver\":[",
			  g->t->expandable ? "true" : "false", (long long)g->allocated, (long long)g->pending,
			  (long long)g->inactive, (long long)g->drv_bytes);
		for (size_t q = 0; q < g->ndrv; q++) {
			const struct segment *s = &f->segs[g->drv[q]];
			sb_printf(j, "%s{\"kind\":\"%s\",\"address\":\"0x%llx\",\"size\":%llu,\"mapped\":%s,"
				     "\"function\":", q ? "," : "", kind_names[s->kind],
				  (unsigned long long)s->addr, (unsigned long long)s->size,
				  s->mapped ? "true" : "false");
			sb_json_str(j, site_func(f, s->stack, nm, sizeof nm));
			sb_putc(j, '}');
		}
		sb_puts(j, "],\"blocks\":[");
		for (size_t q = 0; q < g->nblocks; q++) {
			const struct tblock *bl = &t->blocks[g->blocks[q]];
			sb_printf(j, "%s{\"address\":\"0x%llx\",\"size\":%llu,\"requested_size\":%llu,"
				     "\"state\":\"%s\",\"line\":", q ? "," : "", (unsigned long long)bl->addr,
				  (unsigned long long)bl->size, (unsigned long long)bl->requested,
				  state_names[bl->state]);
			sb_json_str(j, tsnap_line(t, bl->stack, line, sizeof line));
			sb_putc(j, '}');
		}
		sb_puts(j, "]}");
	}
	sb_puts(j, "],\"outside\":[");
	for (size_t k = 0; k < jn->nouts; k++) {
		const struct jout *x = &jn->outs[k];
		sb_printf(j, "%s{\"size\":%lld,\"owner\":", k ? "," : "", (long long)x->bytes);
		if (x->seg == SIZE_MAX) {
			sb_puts(j, "\"unmapped VMM handles\",\"function\":\"\"}");
			continue;
		}
		const struct segment *s = &f->segs[x->seg];
		sb_json_str(j, x->owner ? x->owner : "other");
		sb_printf(j, ",\"kind\":\"%s\",\"%s\":\"0x%llx\",\"mapped\":%s,\"function\":",
			  kind_names[s->kind], s->is_handle ? "handle" : "address",
			  (unsigned long long)s->addr, s->mapped ? "true" : "false");
		sb_json_str(j, site_func(f, s->stack, nm, sizeof nm));
		sb_putc(j, '}');
	}
	sb_puts(j, "]}");
}

static int
cmp_seg(const void *a, const void *b) {
	const struct segment *x = a, *y = b;
	return x->size < y->size ? 1 : x->size > y->size ? -1 : (x->addr > y->addr) - (x->addr < y->addr);
}

/* What `oom` shows of one dump, gathered once for the text and the JSON. */
struct dumpview {
	struct mfile *f;
	const struct oominfo *m;
	int cuda;
	struct site *v;     /* call sites at the dump's snapshot, sorted */
	size_t ns;
	int64_t live;       /* over the segments the dump lists (device ones for a */
	size_t nlive;       /* CUDA dump); mappings of VMM handles are not memory of their own */
	struct segment *sv; /* the segments, largest first */
	size_t ev0;         /* the first of the last 15 events */
	struct tsnap *t;    /* PyTorch's snapshot of the same moment, beside it, */
	struct join *tj;    /* and the two joined; NULL without */
};

static void
dumpview_load(struct dumpview *dv, struct mfile *f) {
	const struct oominfo *m = f->oom;
	if (!m)
		die(EXIT_BAD_INPUT, "%s: not an OOM dump (no oom record)", f->path);
	if (!f->nsnaps)
		die(EXIT_BAD_INPUT, "%s: the dump has no snapshot (cut short?)", f->path);
	*dv = (struct dumpview){.f = f, .m = m, .cuda = !strcmp(m->kind, "cuda")};
	dv->v = sites_sorted(f, &f->snaps[f->nsnaps - 1], &dv->ns);
	for (size_t i = 0; i < f->nsegs; i++)
		if (!f->segs[i].mapped)
			dv->live += (int64_t)f->segs[i].size, dv->nlive++;
	dv->sv = xmalloc((f->nsegs + 1) * sizeof *dv->sv);
	if (f->nsegs) /* f->segs is NULL in a dump without segments */
		memcpy(dv->sv, f->segs, f->nsegs * sizeof *dv->sv);
	xqsort(dv->sv, f->nsegs, sizeof *dv->sv, cmp_seg);
	dv->ev0 = f->nevents > 15 ? f->nevents - 15 : 0;
	dv->t = dv->cuda ? tsnap_for_dump(f) : NULL;
	dv->tj = dv->t ? join_compute(f, dv->t) : NULL;
}

static void
dumpview_free(struct dumpview *dv) {
	free(dv->v);
	free(dv->sv);
	join_free(dv->tj);
	tsnap_free(dv->t);
}

/* Whether a call site is on the failing side: device sites for a CUDA
 * dump, host ones for a host dump, either before an OOM (preoom). */
static int
failing_side(const struct dumpview *dv, const struct site *s) {
	return (s->kind >= K_CUDA) == dv->cuda || !strcmp(dv->m->kind, "preoom");
}

/* --json: the failure, the figures and the failing side's call sites. */
static void
head_json(struct sb *j, const struct dumpview *dv, const struct opts *o) {
	const struct oominfo *m = dv->m;
	file_json_head(j, dv->f);
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
		  (long long)m->cg_max, (long long)m->elapsed_ms, (long long)dv->live, dv->nlive);
	int shown = 0;
	for (size_t i = 0; i < dv->ns && shown < o->top; i++) {
		const struct site *v = &dv->v[i];
		if (!failing_side(dv, v))
			continue;
		if (!v->live_bytes)
			break;
		if (shown++)
			sb_putc(j, ',');
		sb_printf(j, "{\"kind\":\"%s\",\"live_bytes\":%lld,\"live_count\":%lld,",
			  kind_names[v->kind], (long long)v->live_bytes, (long long)v->live_count);
		site_json_names(j, dv->f, v->stack);
		sb_putc(j, '}');
	}
	sb_putc(j, ']');
}

/* --json: the largest segments and the last events. */
static void
segs_events_json(struct sb *j, const struct dumpview *dv, const struct opts *o) {
	const struct mfile *f = dv->f;
	char name[512];
	sb_puts(j, ",\"segments\":[");
	for (size_t i = 0; i < f->nsegs && (int)i < o->top; i++) {
		const struct segment *s = &dv->sv[i];
		sb_printf(j, "%s{\"kind\":\"%s\",\"%s\":\"0x%llx\",\"size\":%llu,\"device\":%d,"
			     "\"stream\":%d,\"mapped\":%s,\"time_ms\":%lld,\"function\":",
			  i ? "," : "", kind_names[s->kind], s->is_handle ? "handle" : "address",
			  (unsigned long long)s->addr, (unsigned long long)s->size, s->device, s->stream,
			  s->mapped ? "true" : "false", (long long)s->time_ms);
		sb_json_str(j, site_func(f, s->stack, name, sizeof name));
		sb_putc(j, '}');
	}
	sb_puts(j, "],\"events\":[");
	for (size_t i = dv->ev0; i < f->nevents; i++) {
		const struct event *e = &f->events[i];
		sb_printf(j, "%s{\"op\":", i > dv->ev0 ? "," : "");
		sb_json_str(j, e->op);
		sb_printf(j, ",\"kind\":\"%s\",\"address\":\"0x%llx\",\"size\":%llu,"
			     "\"time_ms\":%lld,\"function\":",
			  kind_names[e->kind], (unsigned long long)e->addr, (unsigned long long)e->size,
			  (long long)e->time_ms);
		sb_json_str(j, e->stack ? site_func(f, e->stack, name, sizeof name) : "");
		sb_putc(j, '}');
	}
	sb_putc(j, ']');
}

/* Text: what failed, the device's and cgroup's figures, what was live. */
static void
head_text(const struct dumpview *dv) {
	const struct oominfo *m = dv->m;
	char a[16], b[16];
	file_title(dv->f);
	printf("  %s OOM: %s(%s) failed with %s at %s\n", m->kind, m->api,
	       human_u64(m->requested, a), m->error, human_ms(m->elapsed_ms, b));
	if (m->drv_total > 0)
		printf("  device %lld: driver free %s of %s\n", (long long)m->device,
		       human(m->drv_free, a), human(m->drv_total, b));
	if (m->cg_max > 0)
		printf("  cgroup: %s of %s\n", human(m->cg_current, a), human(m->cg_max, b));
	printf("  live at the OOM: %s in %zu allocation%s%s\n", human(dv->live, a), dv->nlive,
	       dv->nlive == 1 ? "" : "s", m->sampled ? " (heap sampled: estimates)" : "");
}

/* Text: the failing side's call sites; rows that print alike are one. */
static void
sites_text(const struct dumpview *dv, const struct opts *o) {
	char a[16], name[512];
	printf("  by call site:\n  %11s %9s %-12s %s\n", "live", "count", "kind", "where");
	struct site *w = xmalloc((dv->ns ? dv->ns : 1) * sizeof *w);
	size_t nw = 0;
	for (size_t q = 0; q < dv->ns; q++)
		if (failing_side(dv, &dv->v[q]) && dv->v[q].live_bytes)
			w[nw++] = dv->v[q];
	size_t nr;
	struct site_row *r = site_rows(dv->f, w, nw, -1, o->stacks, 4 * o->top + 64, 0, &nr);
	for (size_t q = 0; q < nr && (int)q < o->top; q++) {
		site_row_name(&r[q], 37, o->stacks, name, sizeof name);
		printf("  %11s %9lld %-12s %s\n", human(r[q].v[0], a), (long long)r[q].v[1],
		       kind_names[r[q].kind], name);
		if (o->stacks)
			site_print_stack(stdout, dv->f, r[q].stack, "        ");
	}
	site_rows_free(r, nr);
	free(w);
}

/* Text: the largest segments (without the joined table, which shows
 * them), then the last events. */
static void
segs_events_text(const struct dumpview *dv, const struct opts *o) {
	const struct mfile *f = dv->f;
	char a[16], name[512];
	if (!dv->tj) {
		printf("  largest segments:\n  %-18s %11s %-12s %4s %s\n", "address", "size", "kind", "dev",
		       "allocated by");
		for (size_t i = 0; i < f->nsegs && (int)i < o->top; i++) {
			const struct segment *s = &dv->sv[i];
			char dev[16] = "-";
			if (s->device >= 0)
				snprintf(dev, sizeof dev, "%d", s->device);
			site_func(f, s->stack, name, sizeof name);
			printf("  %s0x%-16llx %11s %-12s %4s %s%s\n", s->is_handle ? "h" : " ",
			       (unsigned long long)s->addr, human((int64_t)s->size, a), kind_names[s->kind], dev,
			       name, s->mapped ? " [mapped]" : "");
		}
	}
	printf("  last events before it:\n  %9s %-5s %-12s %11s %s\n", "time", "op", "kind", "size",
	       "where");
	for (size_t i = dv->ev0; i < f->nevents; i++) {
		const struct event *e = &f->events[i];
		/* to the millisecond: events of one second told apart */
		char when[32];
		snprintf(when, sizeof when, "%.3fs", (double)e->time_ms / 1000);
		printf("  %9s %-5s %-12s %11s %s\n", when, e->op, kind_names[e->kind],
		       human((int64_t)e->size, a), e->stack ? site_func(f, e->stack, name, sizeof name) : "");
	}
}

static void
one(struct mfile *f, struct opts *o, struct sb *j, int first) {
	struct dumpview dv;
	dumpview_load(&dv, f);
	if (o->json) {
		if (!first)
			sb_putc(j, ',');
		head_json(j, &dv, o);
		segs_events_json(j, &dv, o);
		outcome_json(j, dv.m);
		if (dv.tj)
			join_json(j, f, dv.t, dv.tj, o);
		sb_putc(j, '}');
	} else {
		head_text(&dv);
		outcome_text(dv.m);
		if (dv.tj)
			join_text(f, dv.t, dv.tj, o);
		sites_text(&dv, o);
		segs_events_text(&dv, o);
		printf("\n");
	}
	dumpview_free(&dv);
}

int
cmd_oom(struct opts *o) {
	struct run r;
	cmd_list(o, &r, 1); /* read one at a time */
	return each_file(&r, o, "dumps", one);
}
