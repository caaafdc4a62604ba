/* fields.c — a record's fields as the parsers take them (reader.h): each
 * accessor refuses, with bad(), what a record must not say (a missing
 * field, the wrong type, a negative size or time, a value out of range),
 * so a parser never sees it.  And the kinds' names. */
#include "read/reader.h"
#include "read/idmap.h"
#include "base/util.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kind_names[NKINDS] = MT_KIND_NAMES;

int
kind_parse(const char *s) {
	for (int k = 0; k < NKINDS; k++)
		if (!strcmp(s, kind_names[k]))
			return k;
	return -1;
}

void
bad(struct ctx *c, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(c->why, sizeof c->why, "%s:%ld: %s", c->f->path, c->line, msg);
	longjmp(*c->jb, 1);
}

int64_t
need_int(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	if (!v)
		bad(c, "missing field \"%s\"", key);
	if (v->type != J_NUM || !v->is_int)
		bad(c, "field \"%s\" is not an integer", key);
	return v->i;
}

int64_t
need_count(struct ctx *c, struct jv *o, const char *key) {
	int64_t v = need_int(c, o, key);
	if (v < 0)
		bad(c, "field \"%s\" is negative (%lld)", key, (long long)v);
	return v;
}

int64_t
opt_count(struct ctx *c, struct jv *o, const char *key, int64_t def, int64_t max) {
	struct jv *v = json_get(c->d, o, key);
	if (!v || v->type == J_NULL)
		return def;
	if (v->type != J_NUM || !v->is_int)
		bad(c, "field \"%s\" is not an integer", key);
	if (v->i < 0)
		bad(c, "field \"%s\" is negative (%lld)", key, (long long)v->i);
	if (v->i > max)
		bad(c, "field \"%s\" is %lld, beyond %lld", key, (long long)v->i, (long long)max);
	return v->i;
}

int64_t
opt_i64(struct ctx *c, struct jv *o, const char *key, int64_t def) {
	struct jv *v = json_get(c->d, o, key);
	if (!v || v->type == J_NULL)
		return def;
	if (v->type != J_NUM || !v->is_int)
		bad(c, "field \"%s\" is not an integer", key);
	return v->i;
}

const char *
str_field(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	if (!v || v->type == J_NULL)
		return NULL;
	if (v->type != J_STR)
		bad(c, "field \"%s\" is not a string", key);
	return v->s;
}

char *
opt_str(struct ctx *c, struct jv *o, const char *key) {
	const char *s = str_field(c, o, key);
	return s ? xstrdup(s) : NULL;
}

uint64_t
need_hex(struct ctx *c, struct jv *o, const char *key) {
	uint64_t x;
	if (!json_hex(json_get(c->d, o, key), &x))
		bad(c, "field \"%s\" is not a \"0x...\" address", key);
	return x;
}

int
flag(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	return v && v->type == J_TRUE;
}

int64_t
device_ordinal(struct ctx *c, struct jv *o) {
	struct jv *v = json_get(c->d, o, MT_F_DEVICE);
	if (!v || v->type == J_NULL)
		return -1;
	if (v->type != J_NUM)
		bad(c, "field \"%s\" is not an integer", MT_F_DEVICE);
	if (!v->is_int || v->i < 0 || v->i > 255)
		bad(c, "device ordinal %.0f out of range (0..255)", v->d);
	return v->i;
}

int
kind_of(struct ctx *c, struct jv *o) {
	const char *k = json_str(c->d, o, MT_F_KIND);
	if (!k)
		bad(c, "record without a \"kind\"");
	return kind_parse(k);
}

uint32_t
stack_ref(const struct mfile *f, int64_t id, int *missing) {
	uint32_t ix = id > 0 ? idmap_get(&f->stackmap, id) : 0;
	if (id != 0 && (!ix || !f->stacks[ix].pcs) && missing)
		*missing = 1;
	return ix && f->stacks[ix].pcs ? ix : 0;
}

