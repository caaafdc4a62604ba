/* flame.h — flame graph SVG from call-site figures: our own renderer (no
 * external script), click to zoom, search, tooltips; a plain image viewer
 * shows the static picture. */
#ifndef MTA_FLAME_H
#define MTA_FLAME_H
#include "model/model.h"
#include "base/util.h"

struct fnode;
/* A tree to add stacks to; metric: "live", "allocs" or "alloc_bytes". */
struct fnode *flame_new(void);
/* Add one snapshot's call sites of f under a root frame named label
 * (NULL: none). */
void flame_add(struct fnode *root, struct mfile *f, const struct snap *s, const char *metric,
	       const char *label, int kind);
/* The same from a set of call sites (sites_for). */
void flame_add_sites(struct fnode *root, struct mfile *f, const struct site *v, size_t n,
		     const char *metric, const char *label, int kind);
/* The <svg> element; script: with its own zoom/search script (a file),
 * else the page calls mtFlameInit(svg) from flame_js. */
void flame_svg(struct sb *out, struct fnode *root, const char *title, const char *metric,
	       int width, int script);
extern const char flame_js[];
/* Folded stacks ("frame;frame;frame value" a line, outermost first; the
 * value a frame holds itself), as flamegraph.pl, inferno and speedscope
 * read them. */
void flame_folded(struct sb *out, const struct fnode *root);

void flame_free(struct fnode *root);

#endif
