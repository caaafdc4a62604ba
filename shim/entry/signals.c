/*
 * signals.c — the shim's two uses of signals, and the program's own
 * handlers for the signals it uses.
 *
 * 1. The snapshot signal (MEMTALLY_SIGNAL, default SIGUSR1).  Our handler
 *    stays installed in the kernel; sigaction() and signal() are
 *    interposed for that one signal so the program installs, queries and
 *    removes *its* handler as if we were not there, and ours calls it
 *    after waking the writer.  Handlers the program installed before we
 *    started are chained the same way.  SA_RESETHAND is honoured for the
 *    program's handler; a program handler of SIG_DFL or SIG_IGN never
 *    terminates the process on our signal (the signal has been given to
 *    memtally).
 *
 * 2. Deaths by signal (issues 40 and 45): SIGTERM, SIGINT, SIGHUP,
 *    SIGQUIT, SIGABRT, and best effort SIGSEGV and SIGBUS.  While the
 *    program's disposition of one of them is SIG_DFL, our handler stands
 *    in for the default: it writes the process's final snapshot (reason
 *    "signal-term", "signal-int", "signal-hup", "signal-quit",
 *    "signal-abrt", "signal-segv", "signal-bus": doc/FORMAT.md), puts the
 *    default action back and re-raises, so the process ends exactly as it
 *    would have (killed by the same signal, a core where the default
 *    makes one).  We step aside for everything else:
 *     - a disposition that is not SIG_DFL at start (SIG_IGN inherited
 *       from nohup or a shell, a handler of a library loaded before us)
 *       is left alone;
 *     - a handler or SIG_IGN the program installs (sigaction, signal,
 *       bsd_signal, ssignal, sysv_signal, sigset, sigignore) is installed
 *       in the kernel as asked, replacing ours: ours never runs before or
 *       after it, and never chains into it;
 *     - sigaction's oldact (and signal's return) say what the program
 *       would have seen without the shim: SIG_DFL where ours stands;
 *     - the program setting SIG_DFL again puts ours back (CPython does
 *       this before re-raising SIGINT after an uncaught
 *       KeyboardInterrupt, faulthandler before re-raising a fault);
 *     - PID 1 (a container's init) gets none: the kernel drops a
 *       SIG_DFL signal to it, and a handler would change that.
 *    siginterrupt() and the kernel's rt_sigaction called directly (Go's
 *    runtime) are not seen: they only ever replace ours.
 *
 * Writing from a signal handler.  The handler writes the snapshot itself,
 * in the thread that took the signal, as exit() does in the thread that
 * calls it, and only when that is safe; otherwise it writes nothing and
 * the process dies as it would have.  Handing the write to the writer
 * thread instead was not chosen: it often does not run (it starts only
 * when something needs it, and cannot be started from a handler), and it
 * would wait for the very locks the interrupted thread may hold.  Safe
 * means (final_snapshot below):
 *  - the thread holds no shim lock and is not taking one
 *    (mt_locks_held == 0, platform/glue.h): everything the snapshot
 *    takes is then held, if at all, by other threads, which run on;
 *  - for a fault (SIGSEGV, SIGBUS raised by the kernel), in addition, the
 *    thread is not inside the shim at all (mt_self.guard == 0): a fault
 *    there says the shim's own state is in doubt, so no snapshot;
 *  - the writer lock is waited for at most 2 s (mt_snapshot_final): its
 *    holder, another thread, could wait on what the interrupted code
 *    holds (the loader's lock); then no snapshot;
 *  - the snapshot path calls no malloc, no stdio, nothing but raw system
 *    calls, the vDSO clocks and dl_iterate_phdr (whose loader lock is
 *    recursive); the allocator's figures (mallinfo2, jemalloc's mallctl),
 *    which take the allocator's locks, are left out of a death's snapshot
 *    ("omitted":"death"): glibc reports a double free from inside free()
 *    with the arena locked, and the snapshot waited on itself for ever;
 *    and no thread reads them while it holds the writer lock (they are
 *    read before it is taken: output/procstat.h), so the writer lock's
 *    holder never waits on an arena lock the dying thread holds;
 *  - the whole of it is bounded in time (MEMTALLY_DEATH_WAIT, bounded_final
 *    below): what it may still wait on belongs to other threads (the
 *    loader's lock held by a thread that itself waits on an arena lock
 *    the dying thread holds; a hung filesystem), and past the bound the
 *    process dies of its signal without the snapshot;
 *  - a vfork child (another pid in our memory) writes nothing.
 * A second signal of the set is blocked while the handler runs (the
 * first one decides how the process ends); a fault inside the handler
 * meets SIG_DFL-like kernel behaviour (a blocked SIGSEGV/SIGBUS kills),
 * so nothing ever hangs or loops.
 */
#include "platform/glue.h"
#include "entry/signals.h"
#include "platform/dl.h"
#include "platform/config.h"
#include "state/trigger.h"
#include "platform/buf.h"
#include "capture/charge.h"
#include "capture/python.h"
#include "output/snapshot.h"
#include <dlfcn.h>
#include <signal.h>
#include <string.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;
#define NSIGS 65
static struct sigaction prog[NSIGS]; /* the program's view of a signal we manage */
static int owned;                    /* the snapshot signal's handler is installed */
static int ours[NSIGS];              /* a death signal whose default ours stands in for */
static long owner;                   /* the pid whose file the handler writes */
static int armed;                    /* deaths are ours to stand in for (after start) */

static const struct death {
	int sig;
	const char *reason;
	int fault; /* best effort: skipped inside the shim */
} deaths[] = {
	{SIGTERM, "signal-term", 0}, {SIGINT, "signal-int", 0},   {SIGHUP, "signal-hup", 0},
	{SIGQUIT, "signal-quit", 0}, {SIGABRT, "signal-abrt", 0}, {SIGSEGV, "signal-segv", 1},
	{SIGBUS, "signal-bus", 1},
};
#define NDEATHS (sizeof deaths / sizeof deaths[0])

static const struct death *
death_of(int sig) {
	if (sig == mt_cfg.signal) /* the snapshot signal is that, not a death */
		return NULL;
	for (size_t i = 0; i < NDEATHS; i++)
		if (deaths[i].sig == sig)
			return &deaths[i];
	return NULL;
}

/* ---- the snapshot signal ---------------------------------------------- */

static void
handler(int sig, siginfo_t *si, void *uc) {
	int saved = errno;
	mt_trigger(MT_REASON_SIGNAL); /* an atomic or and a futex wake */
	struct sigaction p = prog[sig];
	if (p.sa_flags & SA_RESETHAND) {
		prog[sig].sa_handler = SIG_DFL;
		prog[sig].sa_flags &= ~(SA_RESETHAND | SA_SIGINFO);
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
	const struct sigaction *p = &prog[mt_cfg.signal];
	memset(&a, 0, sizeof a);
	a.sa_sigaction = handler;
	a.sa_mask = p->sa_mask;
	/* The program's restart/stack/nodefer choices apply to its handler;
	 * without one, restart interrupted calls so memtally is invisible. */
	a.sa_flags = SA_SIGINFO | (p->sa_handler == SIG_DFL
					   ? SA_RESTART
					   : (p->sa_flags & (SA_RESTART | SA_ONSTACK | SA_NODEFER)));
	return real_sigaction(mt_cfg.signal, &a, NULL);
}

/* ---- deaths by signal ------------------------------------------------- */

/* The final snapshot, when it is safe to write one here (see the top of
 * this file for why each condition). */
static void
final_snapshot(const struct death *d, int fault) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return;
	if (mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0) != __atomic_load_n(&owner, __ATOMIC_RELAXED))
		return; /* a vfork child: our memory, not our process */
	if (mt_locks_held)
		return; /* a snapshot could wait on a lock this thread holds */
	if (fault && mt_self.guard)
		return; /* a fault inside the shim (or a call it forwards) */
	mt_self.guard++; /* nothing below allocates; if it did, untracked */
	const char *reason = d->reason;
	/* CPython ends an uncaught KeyboardInterrupt by finalizing, then
	 * setting SIG_DFL and re-raising SIGINT (3.8+): what it holds now is
	 * its teardown, as at exit(), not the state the signal found, so the
	 * snapshot says "exit" (the views read it as teardown). */
	if (d->sig == SIGINT && mt_py_finalizing()) {
		reason = "exit";
		mt_py_exit_hold(); /* as the exit snapshot (3.10's daemon threads) */
	}
	mt_snapshot_final(reason, 2000000000u);
	mt_self.guard--;
}

/* The bound on a death (MEMTALLY_DEATH_WAIT).  Nothing on the snapshot's
 * path waits on a lock the dying thread holds (the allocator's figures
 * are left out, the shim's own locks are not held: final_snapshot), but
 * it may wait on another thread (the writer lock, up to 2 s; the
 * loader's lock in dl_iterate_phdr, whose holder may itself wait on an
 * arena lock the dying thread holds; a write to a hung filesystem).  So
 * the thread arms a POSIX timer of its own (raw timer_create, a signal to
 * this thread: no allocation, no lock) that sends it the death's own
 * signal when the bound passes, and unblocks that one signal: taken
 * during the snapshot (the timer's, or the same signal sent again), the
 * handler finds the thread dying and dies at once, of that signal, as
 * without us.  The other death signals stay blocked: the first decides.
 * If no timer can be made (RLIMIT_SIGPENDING), the snapshot runs
 * unbounded, as before. */
static MT_TLS int dying;

struct ksigevent { /* the kernel's struct sigevent, SIGEV_THREAD_ID */
	uint64_t value;
	int signo, notify, tid, pad[11];
};
#define MT_SIGEV_THREAD_ID 4

static void
bounded_final(const struct death *d, int fault) {
	int tid = (int)mt_sys(SYS_gettid, 0, 0, 0, 0, 0, 0), timer = -1;
	struct ksigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.signo = d->sig;
	ev.notify = MT_SIGEV_THREAD_ID;
	ev.tid = tid;
	dying = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!mt_sys(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer, 0, 0, 0)) {
		double w = mt_cfg.death_wait > 0 ? mt_cfg.death_wait : 10;
		struct itimerspec its;
		memset(&its, 0, sizeof its);
		its.it_value.tv_sec = (time_t)w;
		its.it_value.tv_nsec = (long)((w - (double)(time_t)w) * 1e9);
		if (!its.it_value.tv_sec && its.it_value.tv_nsec < 1000)
			its.it_value.tv_nsec = 1000;
		mt_sys(SYS_timer_settime, timer, 0, &its, NULL, 0, 0);
		uint64_t set = 1ull << (d->sig - 1);
		mt_sys(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, sizeof set, 0, 0);
	} else {
		timer = -1;
	}
	final_snapshot(d, fault);
	if (timer >= 0) {
		uint64_t set = 1ull << (d->sig - 1);
		mt_sys(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, sizeof set, 0, 0);
		mt_sys(SYS_timer_delete, timer, 0, 0, 0, 0, 0);
	}
}

/* The default action for sig, as without us: a fault the kernel raised
 * comes back by itself when the faulting instruction runs again under
 * SIG_DFL; any other is sent again to this thread and unblocked (the
 * handler blocks it while it runs), so it is taken at once. */
static void
die_by(int sig, int fault) {
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	/* (a vfork child shares our memory, not our handlers: its flag
	 * would be the parent's) */
	if (mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0) == __atomic_load_n(&owner, __ATOMIC_RELAXED))
		__atomic_store_n(&ours[sig], 0, __ATOMIC_RELEASE);
	real_sigaction(sig, &dfl, NULL);
	if (!fault) {
		uint64_t set = 1ull << (sig - 1);
		mt_sys(SYS_tgkill, mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0),
		       mt_sys(SYS_gettid, 0, 0, 0, 0, 0, 0), sig, 0, 0, 0);
		mt_sys(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, sizeof set, 0, 0);
	}
}

/* A death taken while its thread holds a shim lock (a table's for a few
 * hundred instructions; the writer lock for the few ms of a snapshot it
 * writes itself: the cadence's in a process without a writer thread, a
 * step's, a record): the snapshot may need that very lock, so the
 * handler returns, the thread goes on to release it, and as its last
 * lock goes (glue.h mt_unlock -> mt_locks_after) the final snapshot is
 * written and the process dies as it would have.  (It was lost: a pool
 * worker killed by SIGTERM while it interned a stack or wrote its own
 * snapshot.)  Per thread: the thread that took the signal defers it. */
static MT_TLS const struct death *deferred;

static void
deferred_death(void) {
	const struct death *d = deferred;
	deferred = NULL;
	if (!d)
		return;
	int saved = errno;
	bounded_final(d, 0);
	die_by(d->sig, 0);
	errno = saved;
}

static void
death(int sig, siginfo_t *si, void *uc) {
	(void)uc;
	int saved = errno;
	const struct death *d = death_of(sig);
	/* A fault the kernel raised (si_code > 0) comes back by itself when
	 * the faulting instruction runs again under SIG_DFL, with the
	 * kernel's own siginfo in the core; one sent by kill, tgkill or
	 * raise (si_code <= 0) is sent again.  Either is a fault for the
	 * snapshot (faulthandler re-raises a real one with raise). */
	int fault = d && d->fault && si && si->si_code > 0;
	if (d && dying) {
		/* taken during this thread's death: its bound passed (the
		 * timer's signal), the same signal came again, or the snapshot
		 * faulted: the process dies now, of this signal */
		die_by(sig, fault);
		errno = saved;
		return;
	}
	if (d && !d->fault && mt_locks_held && __atomic_load_n(&mt_active, __ATOMIC_ACQUIRE)) {
		/* a shim lock held here: the death waits for its release (the
		 * first of the set taken decides; a second one meanwhile
		 * changes nothing) */
		if (!deferred) {
			deferred = d;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			mt_locks_after = deferred_death;
		}
		errno = saved;
		return;
	}
	if (d)
		bounded_final(d, d->fault);
	die_by(sig, fault);
	errno = saved;
}

/* Ours in the kernel for sig, standing in for SIG_DFL.  0 or -1. */
static int
install_death(int sig) {
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_sigaction = death;
	/* The rest of the set waits while one is handled: the first decides
	 * how the process ends.  No SA_ONSTACK: a handler on a small
	 * alternate stack could overflow it; without one, a fault on an
	 * exhausted stack is the kernel's to end, as without us. */
	sigemptyset(&a.sa_mask);
	for (size_t i = 0; i < NDEATHS; i++)
		if (!deaths[i].fault)
			sigaddset(&a.sa_mask, deaths[i].sig);
	a.sa_flags = SA_SIGINFO | SA_RESTART;
	return real_sigaction(sig, &a, NULL);
}

/* The real functions, looked up once (from the constructor, or the first
 * call if that comes before it): signal() is async-signal-safe, and a
 * handler that re-installs itself with it must not reach dlsym. */
typedef sighandler_t (*signal_fn)(int, sighandler_t);
static struct {
	signal_fn signal, bsd_signal, ssignal, sysv_signal, sigset;
	int (*sigignore)(int);
} real;

static void
resolve(void) {
	if (__atomic_load_n(&real_sigaction, __ATOMIC_ACQUIRE))
		return;
	real.signal = (signal_fn)mt_dlsym(RTLD_NEXT, "signal");
	real.bsd_signal = (signal_fn)mt_dlsym(RTLD_NEXT, "bsd_signal");
	real.ssignal = (signal_fn)mt_dlsym(RTLD_NEXT, "ssignal");
	real.sysv_signal = (signal_fn)mt_dlsym(RTLD_NEXT, "sysv_signal");
	real.sigset = (signal_fn)mt_dlsym(RTLD_NEXT, "sigset");
	real.sigignore = (int (*)(int))mt_dlsym(RTLD_NEXT, "sigignore");
	__atomic_store_n(&real_sigaction, (sigaction_fn)mt_dlsym(RTLD_NEXT, "sigaction"),
			 __ATOMIC_RELEASE);
}

void
mt_signal_init(void) {
	resolve();
	if (!real_sigaction)
		return;
	long pid = mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	__atomic_store_n(&owner, pid, __ATOMIC_RELAXED);
	if (mt_cfg.signal && mt_cfg.signal < NSIGS &&
	    !real_sigaction(mt_cfg.signal, NULL, &prog[mt_cfg.signal])) {
		if (install() == 0)
			owned = 1;
		else
			mt_warn("cannot install the snapshot signal handler");
	}
	if (pid == 1)
		return; /* init: the kernel drops SIG_DFL signals to it */
	__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
	for (size_t i = 0; i < NDEATHS; i++) {
		int sig = deaths[i].sig;
		struct sigaction cur;
		if (!death_of(sig) || real_sigaction(sig, NULL, &cur) || cur.sa_handler != SIG_DFL)
			continue; /* SIG_IGN, or a handler from before us: theirs */
		prog[sig] = cur;
		if (install_death(sig) == 0)
			__atomic_store_n(&ours[sig], 1, __ATOMIC_RELEASE);
	}
}

void
mt_signal_postfork_child(void) {
	__atomic_store_n(&owner, mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0), __ATOMIC_RELAXED);
}

/* What the kernel would keep of a program's action: glibc's sigaction
 * adds SA_RESTORER and its restorer to every action it installs, and the
 * kernel hands them back in the old action; an action the shim keeps for
 * the program (not in the kernel) must read back the same.  The restorer
 * is the one the kernel holds for any action glibc installed (ours). */
#define MT_SA_RESTORER 0x04000000 /* the kernel's; glibc's headers keep it */
static void
as_kernel(int sig, struct sigaction *a) {
	static void (*restorer)(void);
	if (!restorer) {
		struct sigaction k;
		if (!real_sigaction(sig, NULL, &k) && (k.sa_flags & MT_SA_RESTORER))
			restorer = k.sa_restorer;
	}
	if (restorer && !(a->sa_flags & MT_SA_RESTORER)) {
		a->sa_flags |= MT_SA_RESTORER;
		a->sa_restorer = restorer;
	}
}

/* sigaction for a death signal. */
static int
death_action(int sig, const struct sigaction *act, struct sigaction *old) {
	if (!__atomic_load_n(&ours[sig], __ATOMIC_ACQUIRE)) {
		if (!act || act->sa_handler != SIG_DFL)
			return real_sigaction(sig, act, old);
		/* the program asks for the default: ours stands in for it */
		struct sigaction o;
		if (real_sigaction(sig, NULL, &o))
			return real_sigaction(sig, act, old);
		prog[sig] = *act;
		as_kernel(sig, &prog[sig]);
		if (install_death(sig))
			return real_sigaction(sig, act, old);
		__atomic_store_n(&ours[sig], 1, __ATOMIC_RELEASE);
		if (old)
			*old = o;
		return 0;
	}
	struct sigaction o = prog[sig]; /* act and old may be one struct */
	if (act) {
		if (act->sa_handler == SIG_DFL) { /* (sa_sigaction NULL: the same) */
			prog[sig] = *act;
			as_kernel(sig, &prog[sig]);
		} else {
			/* theirs replaces ours, in the kernel, as asked */
			int r = real_sigaction(sig, act, NULL);
			if (r)
				return r;
			__atomic_store_n(&ours[sig], 0, __ATOMIC_RELEASE);
		}
	}
	if (old)
		*old = o;
	return 0;
}

MT_EXPORT int
sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
	resolve();
	if (sig > 0 && sig < NSIGS && __atomic_load_n(&armed, __ATOMIC_ACQUIRE) && death_of(sig))
		return death_action(sig, act, old);
	if (!owned || sig != mt_cfg.signal)
		return real_sigaction(sig, act, old);
	if (old)
		*old = prog[sig];
	if (act) {
		prog[sig] = *act;
		as_kernel(sig, &prog[sig]);
		install();
	}
	return 0;
}

/* The handler a sigaction holds, as signal() returns it. */
static sighandler_t
handler_of(const struct sigaction *a) {
	return a->sa_handler; /* one union with sa_sigaction, as glibc's */
}

/* A signal we manage set as the signal() family does, through our
 * sigaction: SIG_ERR or the previous handler. */
static sighandler_t
set_like(int sig, sighandler_t h, int flags, int mask_self) {
	struct sigaction a, o;
	memset(&a, 0, sizeof a);
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	if (mask_self)
		sigaddset(&a.sa_mask, sig);
	a.sa_flags = flags;
	if (h == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	if (sigaction(sig, &a, &o))
		return SIG_ERR;
	return handler_of(&o);
}

static int
managed(int sig) {
	return sig > 0 && sig < NSIGS &&
	       ((owned && sig == mt_cfg.signal) ||
		(__atomic_load_n(&armed, __ATOMIC_ACQUIRE) && death_of(sig)));
}

/* glibc's signal, bsd_signal and ssignal are one function: BSD semantics
 * (SA_RESTART, the signal blocked in its handler). */
static sighandler_t
bsd_like(signal_fn own_real, int sig, sighandler_t h) {
	resolve();
	if (!managed(sig)) {
		signal_fn f = own_real ? own_real : real.signal;
		return f ? f(sig, h) : SIG_ERR;
	}
	return set_like(sig, h, SA_RESTART, 1);
}

MT_EXPORT sighandler_t
signal(int sig, sighandler_t h) {
	resolve();
	return bsd_like(real.signal, sig, h);
}

/* glibc declares it only for older standards' feature macros */
sighandler_t bsd_signal(int sig, sighandler_t h);

MT_EXPORT sighandler_t
bsd_signal(int sig, sighandler_t h) {
	resolve();
	return bsd_like(real.bsd_signal, sig, h);
}

MT_EXPORT sighandler_t
ssignal(int sig, sighandler_t h) {
	resolve();
	return bsd_like(real.ssignal, sig, h);
}

/* System V semantics: reset to SIG_DFL when taken, not blocked, no
 * restart (glibc's flags). */
MT_EXPORT sighandler_t
sysv_signal(int sig, sighandler_t h) {
	resolve();
	if (!managed(sig))
		return real.sysv_signal ? real.sysv_signal(sig, h) : SIG_ERR;
	return set_like(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}

/* sigset and sigignore (System V, obsolescent), as glibc makes them. */
MT_EXPORT sighandler_t
sigset(int sig, sighandler_t h) {
	resolve();
	if (!managed(sig))
		return real.sigset ? real.sigset(sig, h) : SIG_ERR;
	sigset_t s, os;
	sigemptyset(&s);
	sigaddset(&s, sig);
	if (h == SIG_HOLD) {
		struct sigaction o;
		if (sigprocmask(SIG_BLOCK, &s, &os) < 0)
			return SIG_ERR;
		if (sigismember(&os, sig))
			return SIG_HOLD;
		if (sigaction(sig, NULL, &o) < 0)
			return SIG_ERR;
		return handler_of(&o);
	}
	sighandler_t o = set_like(sig, h, 0, 0);
	if (o == SIG_ERR || sigprocmask(SIG_UNBLOCK, &s, &os) < 0)
		return SIG_ERR;
	return sigismember(&os, sig) ? SIG_HOLD : o;
}

MT_EXPORT int
sigignore(int sig) {
	resolve();
	if (!managed(sig))
		return real.sigignore ? real.sigignore(sig) : -1;
	return set_like(sig, SIG_IGN, 0, 0) == SIG_ERR ? -1 : 0;
}
