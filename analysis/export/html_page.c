/* html_page.c — the static parts of `memtally html`'s page, embedded at
 * build time from analysis/page/report.css and report.js (real files, so
 * they can be read, edited and linted as what they are).  The page reads
 * its data from <script id="mt-data" type="application/json">, draws with
 * SVG built in the DOM, and asks nothing of the network.
 * .incbin paths are relative to the repository root, where every build
 * (make, the fuzzers, the unit tests) runs the compiler. */
#include "export/html_page.h"

#define EMBED(sym, file)                                                       \
	__asm__(".pushsection .rodata\n"                                       \
		".globl " #sym "\n"                                            \
		".type " #sym ", @object\n"                                    \
		".p2align 4\n" #sym ":\n"                                      \
		".incbin \"" file "\"\n"                                       \
		".byte 0\n"                                                    \
		".size " #sym ", . - " #sym "\n"                               \
		".popsection\n")

EMBED(html_css, "analysis/export/page/report.css");
EMBED(html_js, "analysis/export/page/report.js");
