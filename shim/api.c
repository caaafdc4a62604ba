/*
 * api.c — the exported C API (memtally.h).  Thin: the work is in shim.c.
 */
#include "glue.h"
#include "memtally.h"
#include "shim.h"

MT_EXPORT int
memtally_snapshot(const char *label) {
	return mt_request_snapshot(label);
}
