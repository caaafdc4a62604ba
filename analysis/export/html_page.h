/* html_page.h — the static parts (CSS, JS) of `memtally html`'s page. */
#ifndef MTA_HTML_PAGE_H
#define MTA_HTML_PAGE_H
extern const char html_css[];
extern const char html_js[];
#endif
