/* json.h — a JSON parser for one JSONL line at a time: the line is parsed
 * in place (strings unescaped into the line's own bytes) into nodes kept in
 * a reusable arena, so reading a file allocates only as the largest line
 * grows.  Nesting is limited to 64 levels. */
#ifndef MTA_JSON_H
#define MTA_JSON_H
#include <stddef.h>
#include <stdint.h>

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	uint8_t type;      /* enum jtype */
	uint8_t is_int;    /* J_NUM that fits int64 exactly */
	uint8_t is_u64;    /* J_NUM above INT64_MAX that fits uint64 exactly (i: its bits) */
	uint32_t len;      /* J_STR bytes, J_ARR/J_OBJ children */
	uint32_t keylen;   /* member key length (object members) */
	const char *key;   /* member key, or NULL */
	uint32_t next;     /* next sibling's index, 0 = none */
	uint32_t first;    /* J_ARR/J_OBJ: first child's index, 0 = none */
	union {
		double d;      /* J_NUM */
		const char *s; /* J_STR (NUL-terminated in place) */
	};
	int64_t i;         /* J_NUM as an integer (truncated when !is_int) */
};

struct jdoc {
	struct jv *v;      /* arena; v[0] is unused, the root is v[1] */
	uint32_t n, cap;
};

/* Parse s[0..len) (modified in place; s[len] must be writable).  Returns
 * the root or NULL, with *err naming the problem and *col its offset. */
struct jv *json_parse(struct jdoc *d, char *s, size_t len, const char **err,
		      size_t *col);
void json_free(struct jdoc *d);

struct jv *json_get(struct jdoc *d, struct jv *obj, const char *key);
struct jv *json_child(struct jdoc *d, struct jv *v);  /* first child */
struct jv *json_next(struct jdoc *d, struct jv *v);   /* next sibling */
/* Typed access with defaults; *ok (if given) is cleared on a type error. */
int64_t json_int(struct jdoc *d, struct jv *obj, const char *key, int64_t def);
double json_num(struct jdoc *d, struct jv *obj, const char *key, double def);
const char *json_str(struct jdoc *d, struct jv *obj, const char *key);
/* A number that is a whole uint64 (0 .. 2^64-1): 1 and *out, else 0. */
int json_u64(const struct jv *v, uint64_t *out);
/* "0x1f" strings (addresses); 1 and *out on success. */
int json_hex(const struct jv *v, uint64_t *out);

#endif
