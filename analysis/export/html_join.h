/* html_join.h — the html page's section for CUDA OOM dumps with PyTorch's
 * snapshot beside them: the joined table of `memtally oom` (answer/join.h). */
#ifndef MTA_HTML_JOIN_H
#define MTA_HTML_JOIN_H
#include "model/model.h"
#include "base/util.h"

/* Append the section (static HTML, escaped) for the dumps of d that have
 * a PyTorch snapshot beside them; nothing when none has. */
void html_join(struct sb *page, struct run *d);

#endif
