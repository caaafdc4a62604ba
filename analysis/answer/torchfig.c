/* torchfig.c — PyTorch's caching allocator over a window (torchfig.h). */
#include "answer/torchfig.h"
#include <math.h>
#include <string.h>

size_t
answer_torchfigs(const struct mfile *f, size_t lo, size_t end, struct torchfig *out, size_t max) {
	size_t n = 0;
	for (size_t i = lo; i < end && i < f->nsnaps; i++) {
		const struct snap *s = &f->snaps[i];
		for (int k = 0; k < s->ntorch; k++) {
			const struct devtorch *d = &s->torch[k];
			size_t q = 0;
			while (q < n && out[q].device != d->device)
				q++;
			if (q == n) {
				if (n == max)
					continue;
				out[n++] = (struct torchfig){.device = d->device, .first = *d};
			}
			out[q].last = *d;
			out[q].n++;
		}
	}
	return n;
}

const char *
torchfig_text(const struct torchfig *t, char *buf, size_t n) {
	char a[16], b[16], c[16], d[16], e[16], g[16], st[48] = "";
	const struct devtorch *x = &t->first, *y = &t->last;
	int64_t da = y->allocated - x->allocated;
	int64_t cx = x->reserved - x->allocated, cy = y->reserved - y->allocated;
	int64_t dc = cy - cx, df = y->inactive_split - x->inactive_split;
	double steps = y->step - x->step;
	if (x->step >= 0 && y->step >= 0)
		snprintf(st, sizeof st, " steps %g-%g", x->step, y->step);
	const char *most = t->n < 2 || (da <= 0 && dc <= 0) ? ""
			   : da >= dc ? ": tensors grow most"
			   : df * 2 >= dc ? ": the cache grows most, fragmented (split blocks)"
					  : ": the cache grows most";
	char per[48] = "";
	if (steps > 0 && t->n >= 2) { /* steps may be 1e-300 apart: held to int64's range */
		double r = (double)da / steps;
		snprintf(per, sizeof per, ", %s/step",
			 human(r >= 9.2e18 ? INT64_MAX : r <= -9.2e18 ? -INT64_MAX : (int64_t)llround(r), g));
	}
	snprintf(buf, n, "cuda:%d%s: tensors %s (%s%s%s), cache %s (%s%s), fragmented %s (%s%s)%s",
		 t->device, st, human(y->allocated, a), da >= 0 ? "+" : "", human(da, b), per,
		 human(cy, c), dc >= 0 ? "+" : "", human(dc, d), human(y->inactive_split, e),
		 df >= 0 ? "+" : "", human(df, g), most);
	return buf;
}

static void
one_json(struct sb *j, const struct devtorch *d) {
	sb_printf(j, "{\"allocated_bytes\":%lld,\"reserved_bytes\":%lld,\"active_bytes\":%lld,"
		     "\"inactive_split_bytes\":%lld,\"step\":",
		  (long long)d->allocated, (long long)d->reserved, (long long)d->active,
		  (long long)d->inactive_split);
	sb_json_num(j, "%.17g", d->step);
	sb_putc(j, '}');
}

void
torchfig_json(struct sb *j, const struct torchfig *t, size_t n) {
	sb_putc(j, '[');
	for (size_t i = 0; i < n; i++) {
		sb_printf(j, "%s{\"device\":%d,\"snapshots\":%zu,\"first\":", i ? "," : "", t[i].device,
			  t[i].n);
		one_json(j, &t[i].first);
		sb_puts(j, ",\"last\":");
		one_json(j, &t[i].last);
		sb_putc(j, '}');
	}
	sb_putc(j, ']');
}
