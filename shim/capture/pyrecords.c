/*
 * pyrecords.c — the Python records of a snapshot file or an OOM dump
 * (doc/FORMAT.md): the python record (version, how the layout was found,
 * depth), a pyframe per (code object, line) and a pystack per stack of
 * them, each written once per file and again after the file is re-created
 * or a write failed (mt_py_forget_written).
 *
 * Rules: called by the writer (snapshot lock held) or a dump; reads the
 * tables of python.c without py_lock (ids below the published counts,
 * pyint.h) and alone writes their `written` flags.  Never calls malloc.
 */
#include "platform/glue.h"
#include "capture/pyint.h"
#include "capture/python.h"
#include "platform/buf.h"
#include "platform/config.h"

static int python_written; /* the file has its python record */

static void
frame_line(struct mt_buf *b, uint32_t id) {
	struct pyframe *p = mt_chunk_at(&mt_pyt.frame, id);
	struct pycode *c = mt_chunk_at(&mt_pyt.code, p->code);
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_PYFRAME "\"," MT_KEY(MT_F_ID) "%u," MT_KEY(MT_F_FILE), id);
	mt_buf_jstr(b, c->file);
	mt_buf_puts(b, "," MT_KEY(MT_F_FUNC));
	mt_buf_jstr(b, c->name);
	mt_buf_printf(b, "," MT_KEY(MT_F_LINE) "%d}\n", p->line);
}

static void
python_line(struct mt_buf *b) {
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_PYTHON "\"," MT_KEY(MT_F_VERSION) "\"%d.%d.%d\"," MT_KEY(MT_F_HEX) "\"",
		      (int)(mt_pyi.hex >> 24), (int)(mt_pyi.hex >> 16 & 255), (int)(mt_pyi.hex >> 8 & 255));
	mt_buf_hex(b, mt_pyi.hex);
	mt_buf_printf(b, "\"," MT_KEY(MT_F_OFFSETS) "\"%s\"," MT_KEY(MT_F_DEPTH) "%lu}\n", mt_pyi.L.how,
		      (unsigned long)mt_cfg.pydepth);
}

static void
stack_line(struct mt_buf *b, uint32_t id) {
	struct pystack *s = mt_chunk_at(&mt_pyt.stack, id);
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_PYSTACK "\"," MT_KEY(MT_F_ID) "%u," MT_KEY(MT_F_FRAMES) "[", id);
	for (int i = 0; i < s->n; i++)
		mt_buf_printf(b, "%s%u", i ? "," : "", s->frames[i]);
	mt_buf_puts(b, "]," MT_KEY(MT_F_ENTRY) "[");
	for (int i = 0; i < s->n; i++)
		mt_buf_printf(b, "%s%d", i ? "," : "", (int)(s->entry >> i & 1));
	mt_buf_puts(b, "]");
	if (s->truncated)
		mt_buf_puts(b, "," MT_KEY(MT_F_TRUNCATED) "true");
	if (s->elided) /* both ends kept: the frames between left out */
		mt_buf_printf(b, "," MT_KEY(MT_F_ELIDED) "%u," MT_KEY(MT_F_ELIDED_AT) "%u",
			      (unsigned)s->elided, (unsigned)s->elided_at);
	mt_buf_puts(b, "}\n");
}

void
mt_py_emit(struct mt_buf *b, uint32_t id) {
	if (!mt_py_on)
		return;
	if (!python_written) {
		python_line(b);
		python_written = 1;
	}
	if (!id || id >= mt_load(&mt_pyt.nstacks))
		return;
	struct pystack *s = mt_chunk_at(&mt_pyt.stack, id);
	if (s->written)
		return;
	for (int i = 0; i < s->n; i++) {
		struct pyframe *p = mt_chunk_at(&mt_pyt.frame, s->frames[i]);
		if (!p->written) {
			frame_line(b, s->frames[i]);
			p->written = 1;
		}
	}
	stack_line(b, id);
	s->written = 1;
}

void
mt_py_emit_all(struct mt_buf *b) {
	if (!mt_py_on)
		return;
	python_line(b);
	uint32_t nf = mt_load(&mt_pyt.nframes), ns = mt_load(&mt_pyt.nstacks);
	for (uint32_t i = 1; i < nf; i++)
		frame_line(b, i);
	for (uint32_t i = 1; i < ns; i++)
		stack_line(b, i);
}

void
mt_py_forget_written(void) {
	python_written = 0;
	for (uint32_t i = 1; i < mt_load(&mt_pyt.nframes); i++)
		((struct pyframe *)mt_chunk_at(&mt_pyt.frame, i))->written = 0;
	for (uint32_t i = 1; i < mt_load(&mt_pyt.nstacks); i++)
		((struct pystack *)mt_chunk_at(&mt_pyt.stack, i))->written = 0;
}

/* The child: py_lock released as in the parent; its file has no python
 * record yet. */
void
mt_py_postfork_child(int follow) {
	(void)follow;
	mt_py_postfork_parent();
	python_written = 0;
}
