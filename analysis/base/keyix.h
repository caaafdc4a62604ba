/* keyix.h — an open-addressing index of byte strings. */
#ifndef MTA_KEYIX_H
#define MTA_KEYIX_H
#include <stddef.h>
#include <stdint.h>

/* An open-addressing index of byte strings (pprof's tables, functions'
 * rows): keyix_slot gives the value slot for key k[0..n), the key copied
 * in and *fresh set when it was not there (its value then 0). */
struct keyix {
	char **key;
	size_t *len;
	uint64_t *val;
	size_t cap, n;
};
uint64_t *keyix_slot(struct keyix *x, const char *k, size_t n, int *fresh);
void keyix_free(struct keyix *x);
#endif
