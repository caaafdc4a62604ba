/*
 * phases.h — phases of a program (a checkpoint save, an evaluation, the
 * DataLoader's handoff of a batch) begun and ended through the C API
 * (memtally_phase), and the workload of the step (memtally_workload): every
 * snapshot names the phase open at it (`"phase"`), lists the phases' spans
 * that ended since the previous snapshot (`"phases"`), and carries the
 * latest workload object (`"workload"`); each kind's total says the phase
 * and step its peak was reached in.  State layer: calls only the platform.
 * Rules: never calls malloc; any thread; one lock, held for a few dozen
 * instructions and never across a call out (a child made by fork gets it
 * free again: mt_phases_postfork_child).
 */
#ifndef MT_PHASES_H
#define MT_PHASES_H
#include "platform/glue.h"
#include "state/stacks.h"
#include <stdint.h>

#define MT_PHASE_NAMES 16 /* distinct phase names */

/* The innermost open phase's index + 1 (0: none), read by the peaks. */
extern MT_HIDDEN uint8_t mt_phase_now;
/* Per peak slot (a kind's total, a device's): the phase (index + 1) and
 * the "step" mark when its peak last moved (totals.h: mt_peak_moved). */
extern MT_HIDDEN uint8_t mt_peak_phase[MT_PEAK_SLOTS];
extern MT_HIDDEN int32_t mt_peak_step[MT_PEAK_SLOTS];

/* Begin (begin 1) or end (0) phase name (<= 31 bytes).  Phases nest; an
 * end closes the innermost open phase of that name.  0, or -1 when the
 * name is empty, the name table is full, or no such phase is open (an
 * end) or 8 are open already (a begin). */
int mt_phase_mark(const char *name, int begin);
/* The workload object (one line of JSON, "{...}", at most 1023 bytes)
 * every later snapshot carries; NULL clears it.  0, or -1 when refused. */
int mt_workload_set(const char *json, size_t n);
/* `"phase":...,"phases":{...},"workload":{...},` for a snapshot; spans are
 * listed once (advance: a snapshot of the main file, not a dump). */
struct mt_buf;
void mt_phases_json(struct mt_buf *b, int advance);
/* `,"peak_phase":"...","peak_step":N` for peak slot k, when stamped. */
void mt_phases_peak_json(struct mt_buf *b, int slot);
void mt_phases_postfork_child(void);

#endif
