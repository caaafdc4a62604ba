/* html_join.c — the joined table of a CUDA OOM dump and PyTorch's snapshot
 * of the same moment, as a section of the html page (html_join.h): the
 * totals that reconcile, torch's segments (largest first) with the driver
 * allocations under them and their blocks, and the device memory outside
 * torch, named by library.  Rendered here, not by the page's script: every
 * text from a file goes through esc(). */
#include "export/html_join.h"
#include "answer/join.h"
#include "answer/sites.h"
#include "read/torchsnap.h"
#include <string.h>

#define MAX_ROWS 200 /* segments, and blocks of a segment, shown */

static void
esc(struct sb *o, const char *s) {
	for (; *s; s++)
		switch (*s) {
		case '<': sb_puts(o, "&lt;"); break;
		case '>': sb_puts(o, "&gt;"); break;
		case '&': sb_puts(o, "&amp;"); break;
		case '"': sb_puts(o, "&quot;"); break;
		default: sb_putc(o, *s);
		}
}

static void
cell(struct sb *o, const char *s) {
	sb_puts(o, "<td>");
	esc(o, s);
	sb_puts(o, "</td>");
}

static void
one(struct sb *o, struct mfile *f, const struct tsnap *t) {
	static const char *const states[] = {"allocated", "pending free", "inactive"};
	char a[16], b[16], c[16], d[16], lab[128], nm[800], line[512];
	struct join *jn = join_compute(f, t);
	const struct oominfo *m = f->oom;
	struct sb h = {0};
	sb_printf(&h, "%s: %s(%s) failed, outcome %s", file_label(f, lab, sizeof lab), m->api,
		  human(m->requested, a), m->outcome[0] ? m->outcome : "not known");
	sb_puts(o, "<h3>");
	esc(o, h.p);
	sb_puts(o, "</h3>\n<div class=\"note\">");
	h.len = 0;
	sb_printf(&h, "device %d: driver live %s = torch allocated %s + torch cached %s + outside torch %s",
		  jn->device, human(jn->live, a), human(jn->allocated, b), human(jn->cached, c),
		  human(jn->outside, d));
	if (jn->mismatch)
		sb_printf(&h, "; does NOT reconcile: torch's segments %s, driver allocations under them %s",
			  human(jn->reserved, a), human(jn->inside, b));
	else
		sb_puts(&h, " (reconciles to the byte)");
	const char *base = strrchr(t->path, '/');
	sb_printf(&h, "; PyTorch's snapshot: %s, torch %s", base ? base + 1 : t->path, t->torch);
	esc(o, h.p);
	sb_free(&h);
	sb_puts(o, "</div>\n<table class=\"join\"><tr><th>torch segment</th><th>size</th><th>allocated</th>"
		   "<th>cached</th><th>driver allocations under it</th><th>blocks (largest first)</th></tr>\n");
	for (size_t k = 0; k < jn->nsegs && k < MAX_ROWS; k++) {
		const struct jseg *g = &jn->segs[k];
		struct sb x = {0};
		sb_puts(o, "<tr>");
		sb_printf(&x, "0x%llx %s%s", (unsigned long long)g->t->addr, g->t->type,
			  g->t->expandable ? " expandable" : "");
		cell(o, x.p);
		cell(o, human((int64_t)g->t->size, a));
		cell(o, human(g->allocated, a));
		cell(o, human((int64_t)g->t->size - g->allocated, a));
		x.len = 0;
		for (size_t q = 0; q < g->ndrv && q < 8; q++) {
			const struct segment *s = &f->segs[g->drv[q]];
			sb_printf(&x, "%s%s %s by %s", q ? "; " : "", kind_names[s->kind],
				  human((int64_t)s->size, a), site_name(f, s->stack, 0, nm, sizeof nm));
		}
		if (g->ndrv > 8)
			sb_printf(&x, "; %zu more", g->ndrv - 8);
		cell(o, g->ndrv ? x.p : "none");
		sb_puts(o, "<td>");
		for (size_t q = 0; q < g->nblocks && q < MAX_ROWS; q++) {
			const struct tblock *bl = &t->blocks[g->blocks[q]];
			x.len = 0;
			sb_printf(&x, "%s %s %s", human((int64_t)bl->size, a), states[bl->state],
				  bl->state == TB_INACTIVE ? "" : tsnap_line(t, bl->stack, line, sizeof line));
			if (q)
				sb_puts(o, "<br>");
			esc(o, x.p);
		}
		sb_puts(o, "</td></tr>\n");
		sb_free(&x);
	}
	sb_puts(o, "</table>\n<table class=\"join\"><tr><th>outside torch</th><th>size</th><th>made by</th></tr>\n");
	for (size_t k = 0; k < jn->nouts && k < MAX_ROWS; k++) {
		const struct jout *x = &jn->outs[k];
		sb_puts(o, "<tr>");
		cell(o, x->seg == SIZE_MAX ? "unmapped VMM handles" : x->owner ? x->owner : "other");
		cell(o, human(x->bytes, a));
		cell(o, x->seg == SIZE_MAX ? "" : site_name(f, f->segs[x->seg].stack, 2, nm, sizeof nm));
		sb_puts(o, "</tr>\n");
	}
	sb_puts(o, "</table>\n");
	join_free(jn);
}

void
html_join(struct sb *page, struct run *d) {
	int any = 0;
	for (size_t i = 0; i < d->nfiles; i++) {
		struct mfile *f = &d->files[i];
		if (!f->oom || strcmp(f->oom->kind, "cuda"))
			continue;
		struct tsnap *t = tsnap_for_dump(f);
		if (!t)
			continue;
		if (!any++)
			sb_puts(page, "<h2>PyTorch at the OOM: the driver's view joined with PyTorch's</h2>\n");
		one(page, f, t);
		tsnap_free(t);
	}
}
