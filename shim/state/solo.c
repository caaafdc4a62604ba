/*
 * solo.c — the waiting side and the start of one recording thread
 * (solo.h states the handshake).
 */
#include "platform/glue.h"
#include "state/solo.h"
#include <linux/membarrier.h>

struct mt_solo mt_solo __attribute__((aligned(64)));
MT_TLS int mt_solo_me;
int mt_membarrier_ok;

void
mt_solo_start(void) {
	mt_solo.busy = 0;
	mt_solo_me = 0;
	__atomic_store_n(&mt_solo.one, 0, __ATOMIC_RELEASE);
	/* registration is per address space: a fork child registers again */
	mt_membarrier_ok = 0;
	if (mt_sys(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0, 0, 0, 0))
		return;
	__atomic_store_n(&mt_membarrier_ok, 1, __ATOMIC_RELEASE);
	mt_solo_me = 1;
	__atomic_store_n(&mt_solo.one, 1, __ATOMIC_RELEASE);
}

void
mt_membarrier(void) {
	mt_sys(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0, 0, 0, 0);
}

void
mt_solo_end(void) {
	static mt_lock_t ending;
	mt_lock(&ending);
	if (__atomic_load_n(&mt_solo.one, __ATOMIC_ACQUIRE) == 1) {
		__atomic_store_n(&mt_solo.one, 2, __ATOMIC_SEQ_CST);
		/* registered by mt_solo_start (its errors come at
		 * registration); a fork child registers again */
		mt_membarrier();
		for (int spins = 0; __atomic_load_n(&mt_solo.busy, __ATOMIC_ACQUIRE);)
			if (++spins > 64) {
				mt_sys(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
				spins = 0;
			} else {
				__builtin_ia32_pause();
			}
		__atomic_store_n(&mt_solo.one, 0, __ATOMIC_RELEASE);
	}
	mt_unlock(&ending);
}
