/* util.h — the base layer of the analysis command, all of it: mem.h
 * (allocation, errors and exit codes), sb.h (growable strings), text.h
 * (sizes, durations and rates as people read them; the terminal), files.h
 * (output files written whole), keyix.h (an index of byte strings).  It
 * knows nothing of memtally's files: every other layer stands on it. */
#ifndef MTA_UTIL_H
#define MTA_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include "shim/format.h" /* mt_utf8_len */
#include "base/mem.h"
#include "base/sb.h"
#include "base/text.h"
#include "base/files.h"
#include "base/keyix.h"

#endif
