/*
 * signals.c — the snapshot signal (MEMTALLY_SIGNAL, default SIGUSR1) and
 * the program's own handler for it.  Our handler stays installed in the
 * kernel; sigaction() and signal() are interposed for that one signal so
 * the program installs, queries and removes *its* handler as if we were
 * not there, and ours calls it after waking the writer.  Handlers the
 * program installed before we started are chained the same way.
 * SA_RESETHAND is honoured for the program's handler; a program handler of
 * SIG_DFL or SIG_IGN never terminates the process on our signal (the
 * signal has been given to memtally).  Every other signal passes through.
 */
#include "platform/glue.h"
#include "entry/signals.h"
#include "platform/dl.h"
#include "platform/config.h"
#include "state/trigger.h"
#include "platform/buf.h"
#include <dlfcn.h>
#include <signal.h>
#include <string.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;
static struct sigaction prog;  /* the program's view of the signal */
static int owned;              /* our handler is installed */

static void
handler(int sig, siginfo_t *si, void *uc) {
	int saved = errno;
	mt_trigger(MT_REASON_SIGNAL); /* an atomic or and a futex wake */
	struct sigaction p = prog;
	if (p.sa_flags & SA_RESETHAND) {
		prog.sa_handler = SIG_DFL;
		prog.sa_flags &= ~(SA_RESETHAND | SA_SIGINFO);
	}
	errno = saved;
	if (p.sa_flags & SA_SIGINFO) {
		if (p.sa_sigaction)
			p.sa_sigaction(sig, si, uc);
	} else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
		p.sa_handler(sig);
	}
}

static int
install(void) {
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_sigaction = handler;
	a.sa_mask = prog.sa_mask;
	/* The program's restart/stack/nodefer choices apply to its handler;
	 * without one, restart interrupted calls so memtally is invisible. */
	a.sa_flags = SA_SIGINFO | (prog.sa_handler == SIG_DFL
					   ? SA_RESTART
					   : (prog.sa_flags & (SA_RESTART | SA_ONSTACK |
								SA_NODEFER)));
	return real_sigaction(mt_cfg.signal, &a, NULL);
}

static void
resolve(void) {
	if (!real_sigaction)
		real_sigaction = (sigaction_fn)mt_dlsym(RTLD_NEXT, "sigaction");
}

void
mt_signal_init(void) {
	resolve();
	if (!mt_cfg.signal || !real_sigaction)
		return;
	if (real_sigaction(mt_cfg.signal, NULL, &prog))
		return;
	if (install() == 0)
		owned = 1;
	else
		mt_warn("cannot install the snapshot signal handler");
}

MT_EXPORT int
sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
	resolve();
	if (!owned || sig != mt_cfg.signal)
		return real_sigaction(sig, act, old);
	if (old)
		*old = prog;
	if (act) {
		prog = *act;
		install();
	}
	return 0;
}

MT_EXPORT sighandler_t
signal(int sig, sighandler_t h) {
	resolve();
	if (!owned || sig != mt_cfg.signal) {
		struct sigaction a, o;
		memset(&a, 0, sizeof a);
		a.sa_handler = h;
		a.sa_flags = SA_RESTART; /* glibc's BSD semantics */
		if (real_sigaction(sig, &a, &o))
			return SIG_ERR;
		return o.sa_handler;
	}
	sighandler_t o = (prog.sa_flags & SA_SIGINFO)
				 ? (sighandler_t)(void (*)(void))prog.sa_sigaction
				 : prog.sa_handler;
	memset(&prog, 0, sizeof prog);
	prog.sa_handler = h;
	prog.sa_flags = SA_RESTART;
	install();
	return o;
}

