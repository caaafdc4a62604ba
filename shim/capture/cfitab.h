/*
 * cfitab.h — the rule table all threads share: return address -> rule
 * word (ehframe.h), lock free, forgotten at once on dlclose.
 *
 * 2^12 entries of (key, rule) at start (64 KiB), 2^17 (2 MiB) once half
 * of those are taken (cfitab.c: a small program's address space keeps
 * the difference).  key = pc (48 bits) | generation << 48
 * (15 bits) | PENDING (bit 63).  An inserter claims an empty or stale
 * (older generation) entry with a CAS to pc | gen | PENDING, writes the
 * rule, then publishes the key without PENDING (release); a reader loads
 * the key (acquire), the rule, and the key again: unchanged means the rule
 * is that key's.  Nobody waits on a PENDING entry (a signal handler that
 * interrupts an inserter computes its own rule and inserts nothing).
 * dlclose bumps the generation (mt_cfi_forget): every older entry is
 * stale at once, and an unloaded object's rules cannot serve a new one
 * mapped at the same address.  The keys hold its low 15 bits: when those
 * wrap to 0 (every 32768 dlcloses) every key is cleared, so an entry of
 * 32768 generations ago cannot come back (only one put racing with that
 * clear could).  Entries are never removed otherwise; a full
 * neighbourhood (16 entries) means the rule is computed each time.
 *
 * Rules: never calls malloc; takes no lock; async-signal-safe.
 */
#ifndef MT_CFITAB_H
#define MT_CFITAB_H
#include "platform/glue.h"
#include <stdint.h>

#define MT_CFI_GEN_MASK 0x7fffull

/* dlcloses so far (mt_cfi_forget); the keys hold gen & MT_CFI_GEN_MASK. */
extern MT_HIDDEN uint64_t mt_cfi_gen;

/* Map the small table (64 KiB, its pages touched as it fills); 1 when it
 * is there.  Idempotent. */
int mt_cfitab_init(void);
/* 1 and *r when pc's rule of generation g (masked) is in the table. */
int mt_cfitab_get(uintptr_t pc, uint64_t g, uint64_t *r);
/* Put pc's rule of generation g (masked), unless pc is there already or
 * its neighbourhood is full. */
void mt_cfitab_put(uintptr_t pc, uint64_t g, uint64_t r);

#endif
