/* flame.c — flame graphs (flame.h; `memtally flame` is flame_cmd.c).
 *
 * The tree: all -> [process] -> kind -> outermost frame -> ... -> the
 * allocating line.  A Python frame is "func (file.py:LINE)": train.py:29
 * and train.py:35 are two frames, and every module's <module> its own;
 * native siblings merge by function name (the innermost frame keeps its
 * file:line) and their tooltip names the lines that merged.  Widths are
 * the chosen metric; a parent is the sum of its children and what it
 * holds itself, so children never overflow it.  The SVG carries
 * each frame's position as fractions (data-x, data-w) and its value
 * (data-v: bytes or allocations, exact) so the embedded
 * script can zoom by rescaling; labels are clipped to fit when written, so
 * the file reads the same in a viewer that runs no script. */
#include "export/flame.h"
#include "cmd/cmd.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fnode {
	char *name;
	char **lines;         /* a native frame's distinct "file.c:12" (tooltip) */
	int nlines, more;     /* how many (up to KEEP_LINES); more: there were others */
	int kind;             /* for colour */
	int64_t value;
	struct fnode **kids;
	size_t nkids, cap;
	uint32_t *hix;        /* past HASH_FROM kids: kid index + 1 by hash of kind, name */
	size_t hcap;
	size_t shash;         /* str_hash(name) */
};

#define HASH_FROM 8

static size_t
str_hash(const char *name) {
	size_t h = 1469598103934665603ull;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

static size_t
kid_hash(size_t shash, int kind) {
	return (shash ^ (size_t)(kind + 2)) * 0x9e3779b97f4a7c15ull >> 7;
}

/* n's kids in its hash (hcap a power of two, at most half full). */
static void
kids_rehash(struct fnode *n) {
	free(n->hix);
	n->hcap = 16;
	while (n->hcap < 2 * n->cap)
		n->hcap *= 2;
	n->hix = xcalloc(n->hcap, sizeof *n->hix);
	for (size_t i = 0; i < n->nkids; i++) {
		size_t h = kid_hash(n->kids[i]->shash, n->kids[i]->kind) & (n->hcap - 1);
		while (n->hix[h])
			h = (h + 1) & (n->hcap - 1);
		n->hix[h] = (uint32_t)i + 1;
	}
}

struct fnode *
flame_new(void) {
	struct fnode *n = xcalloc(1, sizeof *n);
	n->name = xstrdup("all");
	n->shash = str_hash(n->name);
	n->kind = -1;
	return n;
}

/* n's kid of that name (shash: its str_hash) and kind, made if new. */
static struct fnode *
child_h(struct fnode *n, const char *name, size_t shash, int kind) {
	size_t h = 0;
	if (n->hix) { /* a wide node: by its hash */
		h = kid_hash(shash, kind) & (n->hcap - 1);
		for (; n->hix[h]; h = (h + 1) & (n->hcap - 1)) {
			struct fnode *k = n->kids[n->hix[h] - 1];
			if (k->shash == shash && k->kind == kind && !strcmp(k->name, name))
				return k;
		}
	} else {
		for (size_t i = 0; i < n->nkids; i++) {
			struct fnode *k = n->kids[i];
			if (k->shash == shash && k->kind == kind && !strcmp(k->name, name))
				return k;
		}
	}
	struct fnode *c = xcalloc(1, sizeof *c);
	c->name = xstrdup(name);
	c->shash = shash;
	c->kind = kind;
	if (n->nkids == n->cap) {
		n->cap = n->cap ? n->cap * 2 : 4;
		n->kids = xrealloc(n->kids, n->cap * sizeof *n->kids);
	}
	n->kids[n->nkids++] = c;
	if (n->nkids > HASH_FROM && (!n->hix || 2 * n->nkids > n->hcap))
		kids_rehash(n);
	else if (n->hix)
		n->hix[h] = (uint32_t)n->nkids; /* the empty slot the probe ended on */
	return c;
}

static struct fnode *
child(struct fnode *n, const char *name, int kind) {
	return child_h(n, name, str_hash(name), kind);
}

/* A native frame merged by function name keeps the lines it came from
 * for its tooltip: up to KEEP_LINES distinct ones, SHOW_LINES shown and
 * how many more. */
#define KEEP_LINES 16
#define SHOW_LINES 3
static void
add_line(struct fnode *n, const char *t) {
	for (int i = 0; i < n->nlines; i++)
		if (!strcmp(n->lines[i], t))
			return;
	if (n->nlines == KEEP_LINES) {
		n->more = 1;
		return;
	}
	if (!n->lines)
		n->lines = xcalloc(KEEP_LINES, sizeof *n->lines);
	n->lines[n->nlines++] = xstrdup(t);
}

/* The node name of a frame: a Python frame and the allocating (innermost)
 * frame with their file:line, other native frames by function. */
static const char *
frame_label(const struct frame *fr, int innermost, char *t, size_t n) {
	if (fr->func && fr->file && fr->line && (fr->python == 1 || innermost)) {
		const char *b = strrchr(fr->file, '/');
		snprintf(t, n, "%s (%s:%d)", fr->func, b ? b + 1 : fr->file, fr->line);
	} else if (fr->func) {
		snprintf(t, n, "%s", fr->func);
	} else {
		sym_text(fr, t, n, 0);
	}
	return t;
}

/* A frame's node name and its line for the tooltip, made once a frame
 * for one flame_add_sites: it names ~40 frames a site over tens of
 * thousands of sites (two snprintf's and a hash each), and a frame's
 * strings are its file's own, alive while the file is (symbolize.h), so
 * a frame is known by them. */
struct flab {
	const char *func, *file, *module;
	uint64_t pc;
	int line, python, inner;
	char *label, *where; /* where: a native frame's "file.c:12", or NULL */
	size_t shash;        /* str_hash(label) */
};
struct flabs {
	struct flab *v;
	size_t cap, n; /* cap a power of two, at most half full */
};

static size_t
flab_hash(const struct flab *e) {
	size_t h = (size_t)(uintptr_t)e->func * 0x9e3779b97f4a7c15ull;
	h ^= (size_t)(uintptr_t)e->file * 0xc2b2ae3d27d4eb4full ^ (size_t)(uintptr_t)e->module;
	h ^= (size_t)e->pc * 0x165667b19e3779f9ull;
	h ^= ((size_t)(unsigned)e->line << 3 | (size_t)(e->python & 3) << 1 | (size_t)e->inner) *
	     0x27d4eb2f165667c5ull;
	return h ^ h >> 29;
}

static void
flabs_grow(struct flabs *t) {
	struct flabs u = {.cap = t->cap ? 2 * t->cap : 1024, .n = t->n};
	u.v = xcalloc(u.cap, sizeof *u.v);
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].label) {
			size_t h = flab_hash(&t->v[i]) & (u.cap - 1);
			while (u.v[h].label)
				h = (h + 1) & (u.cap - 1);
			u.v[h] = t->v[i];
		}
	free(t->v);
	*t = u;
}

static const struct flab *
flab_of(struct flabs *t, const struct frame *fr, int inner) {
	if (2 * (t->n + 1) > t->cap)
		flabs_grow(t);
	struct flab k = {fr->func, fr->file, fr->module, fr->pc, fr->line, fr->python, !!inner, NULL, NULL, 0};
	size_t h = flab_hash(&k) & (t->cap - 1);
	for (; t->v[h].label; h = (h + 1) & (t->cap - 1)) {
		const struct flab *e = &t->v[h];
		if (e->func == k.func && e->file == k.file && e->module == k.module && e->pc == k.pc &&
		    e->line == k.line && e->python == k.python && e->inner == k.inner)
			return e;
	}
	char lab[600];
	k.label = xstrdup(frame_label(fr, inner, lab, sizeof lab));
	k.shash = str_hash(k.label);
	if (!fr->python && fr->file && fr->line) {
		const char *b = strrchr(fr->file, '/');
		snprintf(lab, sizeof lab, "%s:%d", b ? b + 1 : fr->file, fr->line);
		k.where = xstrdup(lab);
	}
	t->v[h] = k;
	t->n++;
	return &t->v[h];
}

static void
flabs_free(struct flabs *t) {
	for (size_t i = 0; i < t->cap; i++) {
		free(t->v[i].label);
		free(t->v[i].where);
	}
	free(t->v);
}

static int64_t
metric_of(const struct site *s, const char *metric) {
	if (!strcmp(metric, "allocs"))
		return s->allocs;
	if (!strcmp(metric, "alloc_bytes"))
		return s->alloc_bytes;
	return s->live_bytes;
}

void
flame_add(struct fnode *root, struct mfile *f, const struct snap *s, const char *metric,
	  const char *label, int kind_filter) {
	size_t n;
	struct site *v = snap_sites(f, s, &n);
	flame_add_sites(root, f, v, n, metric, label, kind_filter);
	free(v);
}

void
flame_add_sites(struct fnode *root, struct mfile *f, const struct site *v, size_t n,
		const char *metric, const char *label, int kind_filter) {
	struct flabs labs = {0};
	for (size_t i = 0; i < n; i++) {
		int64_t val = metric_of(&v[i], metric);
		if (val <= 0 || (kind_filter >= 0 && v[i].kind != kind_filter))
			continue;
		struct fnode *cur = root;
		cur->value += val;
		if (label) {
			cur = child(cur, label, -1);
			cur->value += val;
		}
		cur = child(cur, kind_names[v[i].kind], v[i].kind);
		cur->value += val;
		/* frames outermost first; inline chains expanded */
		struct frame fr[256];
		int nf = site_frames(f, v[i].stack, fr, 256);
		if (!nf) {
			cur = child(cur, "[unknown stack]", v[i].kind);
			cur->value += val;
		}
		for (int k = nf - 1; k >= 0; k--) {
			const struct flab *L = flab_of(&labs, &fr[k], k == 0);
			cur = child_h(cur, L->label, L->shash, v[i].kind);
			cur->value += val;
			if (k > 0 && L->where)
				add_line(cur, L->where);
		}
	}
	flabs_free(&labs);
}

static int
depth(const struct fnode *n) {
	int d = 0;
	for (size_t i = 0; i < n->nkids; i++) {
		int k = depth(n->kids[i]);
		if (k > d)
			d = k;
	}
	return d + 1;
}

static int
cmp_node(const void *a, const void *b) {
	const struct fnode *x = *(struct fnode *const *)a, *y = *(struct fnode *const *)b;
	return strcmp(x->name, y->name);
}

static void
xml_text(struct sb *o, const char *s, size_t max) {
	/* max counts characters, not bytes: a cut inside a UTF-8 sequence
	 * made the SVG ill-formed (the browser showed an XML error page), and
	 * bytes that are not UTF-8 become U+FFFD */
	size_t n = 0;
	const unsigned char *p = (const unsigned char *)s;
	while (*p && n < max) {
		size_t len = mt_utf8_len(p, SIZE_MAX);
		n++;
		if (!len) {
			sb_puts(o, "\xef\xbf\xbd");
			p++;
			continue;
		}
		if (len > 1) {
			/* U+FFFE and U+FFFF are UTF-8 but not XML characters
			 * (XML 1.0's Char): U+FFFD for them too */
			if (len == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe)
				sb_puts(o, "\xef\xbf\xbd");
			else
				for (size_t k = 0; k < len; k++)
					sb_putc(o, (char)p[k]);
			p += len;
			continue;
		}
		switch (*p) {
		case '<': sb_puts(o, "&lt;"); break;
		case '>': sb_puts(o, "&gt;"); break;
		case '&': sb_puts(o, "&amp;"); break;
		case '"': sb_puts(o, "&quot;"); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				sb_putc(o, ' ');
			else
				sb_putc(o, (char)*p);
		}
		p++;
	}
}

/* Characters in s, as xml_text counts them. */
static size_t
text_chars(const char *s) {
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
		size_t len = mt_utf8_len(p, SIZE_MAX);
		p += len ? len : 1;
	}
	return n;
}

static void
colour(char *buf, size_t n, const char *name, int kind) {
	unsigned h = 2166136261u;
	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	int hue;
	if (kind >= K_CUDA)
		hue = 90 + (int)(h % 50);      /* device memory: greens */
	else if (kind == K_MMAP || kind == K_MMAP_FILE)
		hue = 190 + (int)(h % 40);     /* mappings: blues */
	else if (kind < 0)
		hue = 40;
	else
		hue = (int)(h % 45);           /* heap: warm */
	snprintf(buf, n, "hsl(%d,%d%%,%d%%)", hue, 65 + (int)(h >> 8) % 25, 55 + (int)(h >> 16) % 12);
}

struct draw {
	struct sb *o;
	int64_t total;
	int width, height, rowh;
	const char *unit;
};

/* A frame is drawn from MIN_PX wide (narrower ones, and their children,
 * are left out: the folded output keeps them); GAP_PX is left between
 * neighbours, on frames wide enough to keep a width of at least the gap
 * (a frame of 0.3-0.5 px drew with a negative width: 624 rects in a
 * PyTorch trainer's flame graph, each a console error in a browser). */
#define MIN_PX 0.3
#define GAP_PX 0.5

static double
drawn_width(double px) {
	return px >= 2 * GAP_PX ? px - GAP_PX : px;
}

static void
draw(struct draw *d, struct fnode *n, double x, int level) {
	double w = (double)n->value / (double)d->total;
	double px = w * d->width;
	if (px < MIN_PX)
		return;
	int y = d->height - 30 - (level + 1) * d->rowh; /* the root at the bottom */
	char col[48], v[16];
	colour(col, sizeof col, n->name, n->kind);
	sb_printf(d->o, "<g class=\"f\" data-x=\"%.6f\" data-w=\"%.6f\" data-v=\"%lld\" data-n=\"", x,
		  w, (long long)n->value);
	xml_text(d->o, n->name, 400);
	sb_printf(d->o, "\"><title>");
	xml_text(d->o, n->name, 400);
	for (int i = 0; i < n->nlines && i < SHOW_LINES; i++) {
		sb_puts(d->o, i ? ", " : " at ");
		xml_text(d->o, n->lines[i], 300);
	}
	if (n->nlines > SHOW_LINES || n->more)
		sb_printf(d->o, " and %d%s more lines", n->nlines > SHOW_LINES ? n->nlines - SHOW_LINES : 0,
			  n->more ? "+" : "");
	if (!strcmp(d->unit, "allocations"))
		sb_printf(d->o, " — %lld allocations", (long long)n->value);
	else
		sb_printf(d->o, " — %s", human(n->value, v));
	sb_printf(d->o, " (%.2f%%)</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
			"fill=\"%s\" rx=\"2\"/><text x=\"%.1f\" y=\"%d\">",
		  100.0 * w, x * d->width, y, drawn_width(px), d->rowh - 1, col, x * d->width + 3,
		  y + d->rowh - 4);
	int chars = (int)((px - 6) / 7);
	if (chars >= 3) {
		if (text_chars(n->name) <= (size_t)chars) {
			xml_text(d->o, n->name, 400);
		} else {
			xml_text(d->o, n->name, (size_t)(chars - 2));
			sb_puts(d->o, "..");
		}
	}
	sb_puts(d->o, "</text></g>\n");
	xqsort(n->kids, n->nkids, sizeof *n->kids, cmp_node);
	free(n->hix); /* its indexes moved: rebuilt at the next new kid */
	n->hix = NULL;
	n->hcap = 0;
	double cx = x;
	for (size_t i = 0; i < n->nkids; i++) {
		draw(d, n->kids[i], cx, level + 1);
		cx += (double)n->kids[i]->value / (double)d->total;
	}
}

const char flame_js[] =
	"function mtFlameInit(svg){"
	"var W=+svg.getAttribute('data-width');var gs=svg.querySelectorAll('g.f');"
	"var info=svg.querySelector('.info');"
	"function label(g,px){var t=g.querySelector('text'),n=g.getAttribute('data-n');"
	"var c=Math.floor((px-6)/7);t.textContent=c<3?'':(n.length<=c?n:n.slice(0,c-2)+'..');}"
	"function zoom(x0,w0){gs.forEach(function(g){var x=+g.getAttribute('data-x'),w=+g.getAttribute('data-w');"
	"var r=g.querySelector('rect'),t=g.querySelector('text');"
	"if(x+w<=x0+1e-9||x>=x0+w0-1e-9){g.style.display='none';return;}"
	"var nx=Math.max(0,(x-x0)/w0*W),nw=Math.min(W,(x+w-x0)/w0*W)-nx;g.style.display='';"
	"r.setAttribute('x',nx);r.setAttribute('width',nw>=1?nw-0.5:nw);t.setAttribute('x',nx+3);label(g,nw);});}"
	"gs.forEach(function(g){g.addEventListener('click',function(){zoom(+g.getAttribute('data-x'),+g.getAttribute('data-w'));"
	"if(info)info.textContent='zoomed: '+g.getAttribute('data-n');});"
	"g.addEventListener('mouseover',function(){if(info)info.textContent=g.querySelector('title').textContent;});});"
	"var reset=svg.querySelector('.reset');if(reset)reset.addEventListener('click',function(){zoom(0,1);"
	"if(info)info.textContent='';});"
	"var search=svg.querySelector('.search');if(search)search.addEventListener('click',function(){"
	"var q=window.prompt('Search frames (regular expression)');if(q===null)return;var re;"
	"try{re=new RegExp(q);}catch(e){return;}var hit=0,tot=0;"
	"gs.forEach(function(g){var r=g.querySelector('rect');if(!r.getAttribute('data-fill'))"
	"r.setAttribute('data-fill',r.getAttribute('fill'));var m=q&&re.test(g.getAttribute('data-n'));"
	"r.setAttribute('fill',m?'rgb(230,0,230)':r.getAttribute('data-fill'));});"
	"if(info)info.textContent=q?'search: '+q:'';});"
	"svg.flameSearch=function(q){var re=new RegExp(q),n=0;gs.forEach(function(g){var r=g.querySelector('rect');"
	"if(!r.getAttribute('data-fill'))r.setAttribute('data-fill',r.getAttribute('fill'));"
	"var m=re.test(g.getAttribute('data-n'));if(m)n++;r.setAttribute('fill',m?'rgb(230,0,230)':r.getAttribute('data-fill'));});return n;};"
	"svg.flameZoom=zoom;}";

void
flame_svg(struct sb *o, struct fnode *root, const char *title, const char *metric, int width,
	  int script) {
	int rowh = 17, levels = depth(root);
	int height = levels * rowh + 60;
	const char *unit = !strcmp(metric, "allocs") ? "allocations" : "bytes";
	char v[16];
	sb_printf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"flame\" version=\"1.1\" "
		     "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" data-width=\"%d\">\n",
		  width, height, width, height, width);
	sb_puts(o, "<style>.f text{font:12px monospace;fill:#000;pointer-events:none}"
		   ".f:hover rect{stroke:#000;stroke-width:0.5}.f{cursor:pointer}"
		   ".hdr{font:15px sans-serif}.ctl{font:12px sans-serif;fill:#0645ad;cursor:pointer}"
		   ".info{font:12px monospace}</style>\n");
	sb_printf(o, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", width, height);
	sb_printf(o, "<text class=\"hdr\" x=\"10\" y=\"20\">");
	xml_text(o, title, 300);
	if (!strcmp(unit, "bytes"))
		sb_printf(o, " — %s %s</text>\n", human(root->value, v),
			  !strcmp(metric, "live") ? "live" : "allocated");
	else
		sb_printf(o, " — %lld allocations</text>\n", (long long)root->value);
	sb_printf(o, "<text class=\"ctl reset\" x=\"%d\" y=\"20\">Reset zoom</text>"
		     "<text class=\"ctl search\" x=\"%d\" y=\"20\">Search</text>\n",
		  width - 140, width - 60);
	sb_printf(o, "<text class=\"info\" x=\"10\" y=\"%d\"> </text>\n", height - 10);
	if (root->value > 0) {
		struct draw d = {o, root->value, width, height, rowh, unit};
		draw(&d, root, 0, -1);
	} else {
		sb_printf(o, "<text class=\"hdr\" x=\"10\" y=\"50\">nothing to show for this metric</text>\n");
	}
	if (script) {
		sb_puts(o, "<script><![CDATA[\n");
		sb_puts(o, flame_js);
		sb_puts(o, "\nmtFlameInit(document.currentScript.closest('svg'));\n]]></script>\n");
	}
	sb_puts(o, "</svg>\n");
}

/* One frame of a folded line: ';' separates frames and a line ends at a
 * newline, so ';' becomes ',' and control characters '?'; bytes that are
 * not UTF-8 become U+FFFD. */
static void
folded_name(struct sb *o, const char *s) {
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		size_t k = mt_utf8_len(p + i, n - i);
		if (!k) {
			sb_puts(o, "\xef\xbf\xbd");
			i++;
		} else if (k == 1) {
			sb_putc(o, p[i] == ';' ? ',' : p[i] < 0x20 || p[i] == 0x7f ? '?' : (char)p[i]);
			i++;
		} else {
			sb_puts_n(o, s + i, k);
			i += k;
		}
	}
}

static void
folded_walk(struct sb *o, const struct fnode *n, struct sb *path) {
	size_t mark = path->len;
	if (path->len)
		sb_putc(path, ';');
	folded_name(path, n->name);
	int64_t self = n->value;
	for (size_t i = 0; i < n->nkids; i++)
		self -= n->kids[i]->value;
	if (self > 0) {
		sb_puts_n(o, path->p, path->len);
		sb_printf(o, " %lld\n", (long long)self);
	}
	for (size_t i = 0; i < n->nkids; i++)
		folded_walk(o, n->kids[i], path);
	path->len = mark;
	if (path->p)
		path->p[mark] = 0;
}

void
flame_folded(struct sb *o, const struct fnode *root) {
	struct sb path = {0};
	for (size_t i = 0; i < root->nkids; i++) /* the "all" root is no frame */
		folded_walk(o, root->kids[i], &path);
	sb_free(&path);
}

void
flame_free(struct fnode *n) {
	for (size_t i = 0; i < n->nkids; i++)
		flame_free(n->kids[i]);
	free(n->kids);
	free(n->hix);
	for (int i = 0; i < n->nlines; i++)
		free(n->lines[i]);
	free(n->lines);
	free(n->name);
	free(n);
}
