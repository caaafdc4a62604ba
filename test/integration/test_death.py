"""Deaths by signal leave a final snapshot (issues 40 and 45), and change
nothing else.  Each program is run without the shim and under it: the
same termination (the same signal, the same core flag), the same stdout
and stderr; under the shim the file ends with one snapshot whose reason
names the signal, holding what the process held when it died.  Shapes:
C and Python; SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, abort(); sent by
the process itself, by the test while it waits, with threads allocating;
a program's own handler (sigaction, signal, Python's signal.signal) runs
as without the shim and sees what it would have seen; SIG_DFL put back
re-arms ours; SIG_IGN set by the program or inherited is kept; a spawn
and a fork Pool's workers stopped by pool.terminate(); faults (SIGSEGV, SIGBUS) best
effort: the same termination, never a hang; a process snapshotting on
every allocation (the writer lock busy) killed at any moment: it dies of
the signal, and nothing follows a final snapshot; with one thread, whose
own write the signal interrupts, the final snapshot is written when that
write ends."""
import os, re, signal, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
PROG = os.path.join(B, 'test', 'prog_die')
PYDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'py')
PY = '/usr/bin/python3'
REASON = {'term': 'signal-term', 'int': 'signal-int', 'hup': 'signal-hup', 'quit': 'signal-quit',
          'abrt': 'signal-abrt', 'abort': 'signal-abrt', 'segv': 'signal-segv', 'bus': 'signal-bus',
          'fault': 'signal-segv', 'buserr': 'signal-bus'}
SIGNUM = {'term': 15, 'int': 2, 'hup': 1, 'quit': 3, 'abrt': 6, 'abort': 6, 'segv': 11, 'bus': 7,
          'fault': 11, 'buserr': 7}
n = [0]


def run(argv, shim, send=None, env=None, ignore=None, core=False, delay=0):
    """Run argv (with the shim into a fresh directory, or without); send:
    a signal sent once it prints "ready".  Returns (raw wait status,
    stdout, stderr, outdir)."""
    n[0] += 1
    out = os.path.join(OUT, 'r%d' % n[0])
    os.makedirs(out)
    e = dict(os.environ, **(env or {}))
    e.pop('LD_PRELOAD', None)
    if shim:
        e.update(LD_PRELOAD=SHIM, MEMTALLY_OUT=out)

    def pre():
        if ignore:
            signal.signal(ignore, signal.SIG_IGN)
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (-1, -1) if core else (0, 0))
    so, se = open(os.path.join(out, 'stdout'), 'w+'), open(os.path.join(out, 'stderr'), 'w+')
    p = subprocess.Popen(argv, env=e, stdout=so if not send else subprocess.PIPE, stderr=se,
                         preexec_fn=pre, cwd=out, text=True)
    seen = ''
    if send:
        while not seen.endswith('ready\n'):
            line = p.stdout.readline()
            if not line:
                break
            seen += line
        mt.check(seen.endswith('ready\n'), '%s: ready (%r)' % (argv[-2:], seen))
        if delay:
            time.sleep(delay)  # lets snapshots start; nothing is timed
        p.send_signal(send)
        seen += p.stdout.read()
    # a hang would be caught by the watchdog of test/run.sh; no timing here
    _, st = os.waitpid(p.pid, 0)
    p.returncode = 0
    so.seek(0)
    se.seek(0)
    stdout, stderr = (seen if send else so.read()), se.read()
    for c in os.listdir(out):
        if c.startswith('core'):
            os.unlink(os.path.join(out, c))
    return st, stdout, stderr, out


def describe(st):
    if os.WIFSIGNALED(st):
        return 'killed by %d%s' % (os.WTERMSIG(st), ', core' if os.WCOREDUMP(st) else '')
    return 'exit %d' % os.WEXITSTATUS(st)


def files_of(out):
    return [f for f in mt.files(out)]


def final_check(what, out, want, live_at_least=0):
    """The file of the one process in out ends with a snapshot of reason
    want, and it is the only final one."""
    fs = files_of(out)
    if not fs:
        mt.check(False, '%s: a file' % what)
        return None
    f = fs[0]
    reasons = [s['reason'] for s in f.snapshots]
    mt.eq(reasons[-1], want, '%s: the last snapshot\'s reason (of %s)' % (what, reasons))
    killed = [r for r in reasons if r.startswith('signal-') or r == 'exit']
    mt.eq(len(killed), 1, '%s: one final snapshot' % what)
    if live_at_least:
        live = f.final().get('heap', {}).get('live_bytes', 0)
        mt.check(live >= live_at_least, '%s: the final snapshot holds what was live (%d >= %d)'
                 % (what, live, live_at_least))
    return f


def compare(what, argv, want_reason, send=None, env=None, ignore=None, core=False, live=0,
            want_status=None, err_tail=False):
    a = run(argv, False, send, env, ignore, core)
    b = run(argv, True, send, env, ignore, core)
    mt.eq(describe(b[0]), describe(a[0]), what + ': termination as without the shim')
    if want_status:
        mt.eq(describe(a[0]), want_status, what + ': termination')
    mt.eq(b[1], a[1], what + ': stdout as without the shim')
    if err_tail:  # where a signal from outside lands varies: its traceback's last line
        mt.eq(b[2].splitlines()[-1:], a[2].splitlines()[-1:], what + ': stderr\'s end as without the shim')
    else:  # addresses differ from run to run (faulthandler's thread ids)
        mt.eq(re.sub('0x[0-9a-f]+', '0x?', b[2]), re.sub('0x[0-9a-f]+', '0x?', a[2]),
              what + ': stderr as without the shim')
    if want_reason:
        final_check(what, b[3], want_reason, live)
    return a, b


# ---- C: each signal, each way it comes ------------------------------------
if mt.case('c'):
    for s in ('term', 'int', 'hup', 'quit', 'abrt', 'abort', 'segv', 'bus'):
        core = s in ('quit', 'abrt', 'abort', 'segv', 'bus')
        compare('C %s self' % s, [PROG, s, 'self'], REASON[s], core=core, live=640000,
                want_status='killed by %d%s' % (SIGNUM[s], ', core' if core else ''))
    for s, threads in (('term', '0'), ('int', '2'), ('hup', '0'), ('quit', '2'), ('term', '4')):
        compare('C %s from outside, %s threads' % (s, threads), [PROG, s, 'wait', threads],
                REASON[s], send=SIGNUM[s], live=640000)
    compare('C abort() with threads', [PROG, 'abort', 'self', '3'], 'signal-abrt', core=True,
            live=640000)

# ---- C: the program's own handler -----------------------------------------
if mt.case('own'):
    for s in ('term', 'int', 'hup', 'quit', 'abort'):
        a, b = compare('C %s own handler' % s, [PROG, s, 'own'], 'exit', want_status='exit 7')
        mt.check('sigaction\'s oldact: SIG_DFL' in b[1] and 'at start: SIG_DFL flags 0 mask 0' in b[1],
                 'C %s: the program sees SIG_DFL before its own handler (%r)' % (s, b[1]))
    # the snapshot signal's handler, kept by the shim for the program:
    # sigaction reads it back as the kernel would (SA_RESTORER, glibc's
    # restorer: issue 51)
    compare('C usr1 own handler (the snapshot signal)', [PROG, 'usr1', 'own'], 'exit',
            want_status='exit 7')
    for s in ('term', 'int', 'quit'):
        compare('C %s own handler, then SIG_DFL again' % s, [PROG, s, 'reset'], REASON[s],
                live=640000, want_status='killed by %d%s' % (SIGNUM[s], ', core' if s == 'quit' else ''),
                core=True)
    for s in ('term', 'int'):  # the rest of the signal() family, back to SIG_DFL
        compare('C %s through sysv_signal, sigset, bsd_signal, sigignore, ssignal' % s,
                [PROG, s, 'family'], REASON[s], live=640000, want_status='killed by %d' % SIGNUM[s])
    for s in ('term', 'hup'):
        compare('C %s ignored by the program' % s, [PROG, s, 'ignore'], 'exit', want_status='exit 0')
    for s in ('term', 'int', 'hup'):
        a, b = compare('C %s ignored from the start (inherited)' % s, [PROG, s, 'self'], 'exit',
                       ignore=SIGNUM[s], want_status='exit 0')
        mt.check('at start: SIG_IGN' in b[1], 'C %s: inherited SIG_IGN is seen (%r)' % (s, b[1]))

# ---- faults: best effort, never a hang -----------------------------------
if mt.case('fault'):
    for s in ('fault', 'buserr'):
        a, b = compare('C %s' % s, [PROG, s, 'self'], None, core=True,
                       want_status='killed by %d, core' % SIGNUM[s])
        fs = files_of(b[3])
        mt.check(fs and fs[0].snapshots[-1]['reason'] == REASON[s],
                 'C %s: the file ends with %s (best effort; here no shim lock was held)'
                 % (s, REASON[s]))
    # Python's faulthandler: its handler prints the traceback, puts back
    # what it replaced (SIG_DFL, so ours again) and raises the signal
    for code in ('import ctypes; ctypes.string_at(0)', 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'):
        a, b = compare('Python -X faulthandler: %s' % code, [PY, '-X', 'faulthandler', '-c', code],
                       'signal-segv', want_status='killed by 11')
        mt.check('Fatal Python error' in b[2], 'faulthandler printed its report (%r)' % b[2][:100])
    a, b = compare('C fault with threads', [PROG, 'fault', 'self', '3'], None,
                   want_status='killed by 11')
    mt.check(b[1] == a[1], 'C fault with threads: no hang, same termination')

# ---- Python ---------------------------------------------------------------
if mt.case('python'):
    script = os.path.join(PYDIR, 'py_die.py')
    for s in ('TERM', 'HUP', 'QUIT', 'ABRT'):
        compare('Python %s self' % s, [PY, script, s, 'self'], REASON[s.lower()],
                live=640000, want_status='killed by %d' % SIGNUM[s.lower()])
    compare('Python TERM from outside', [PY, script, 'TERM', 'wait'], 'signal-term',
            send=signal.SIGTERM, live=640000, want_status='killed by 15')
    # An uncaught KeyboardInterrupt: Python prints the traceback, finalizes,
    # then re-raises SIGINT with SIG_DFL (3.8+): killed by SIGINT, and the
    # final snapshot is ours, written after the interpreter's teardown, so
    # named "exit" as the views read teardown.
    a, b = compare('Python KeyboardInterrupt', [PY, script, 'INT', 'self'], 'exit',
                   want_status='killed by 2')
    mt.check('KeyboardInterrupt' in b[2], 'Python KeyboardInterrupt: the traceback (%r)' % b[2][-200:])
    compare('Python KeyboardInterrupt from outside', [PY, script, 'INT', 'wait'], 'exit',
            send=signal.SIGINT, want_status='killed by 2', err_tail=True)
    # SIG_DFL set by the program (through Python's sigaction): ours again
    for s in ('INT', 'TERM'):
        compare('Python %s set to SIG_DFL' % s, [PY, script, s, 'default'], REASON[s.lower()],
                live=640000, want_status='killed by %d' % SIGNUM[s.lower()])
    for s in ('TERM', 'INT', 'HUP'):
        a, b = compare('Python %s own handler' % s, [PY, script, s, 'own'], 'exit',
                       want_status='exit 7')
        want = 'previous: %s' % ('default_int_handler' if s == 'INT' else 'SIG_DFL')
        mt.check(want in b[1] and 'own handler' in b[1] and 'now: own' in b[1],
                 'Python %s: signal.signal returned what it would have, its handler ran (%r)'
                 % (s, b[1]))

# ---- a spawn Pool terminated ----------------------------------------------
if mt.case('pool'):
    script = os.path.join(PYDIR, 'py_diepool.py')
    for shim, ctx in ((False, 'spawn'), (True, 'spawn'), (True, 'fork')):
        d = tempfile.mkdtemp(dir=OUT)
        st, so, se, out = run([PY, script, d, ctx], shim)
        mt.eq((describe(st), so), ('exit 0', 'terminated 2\n'), 'pool %s (shim %s): ends as asked (%r)'
              % (ctx, shim, se[-300:]))
        if not shim:
            continue
        pids = sorted(int(p) for p in os.listdir(d))
        byp = {f.header['pid']: f for f in files_of(out)}
        for pid in pids:
            f = byp.get(pid)
            mt.check(f is not None and f.snapshots[-1]['reason'] == 'signal-term',
                     'pool %s worker %d: its file ends with signal-term (%s)'
                     % (ctx, pid, f and [s['reason'] for s in f.snapshots]))
        main = byp.get(min(byp)) if byp else None
        mt.check(main is not None and main.snapshots[-1]['reason'] == 'exit',
                 'pool %s: the main process ends with exit' % ctx)

# ---- the writer lock busy: killed at any moment, no hang ------------------
if mt.case('busy'):
    for k, (threads, every) in enumerate((('0', '1'), ('2', '1'), ('4', '7'), ('2', '100'),
                                          ('4', '1'), ('1', '3'), ('0', '3'), ('0', '1'))):
        # threads 0: the main thread itself allocates (churn), writing a
        # snapshot every MEMTALLY_EVERY allocations; else it waits while
        # the threads do
        st, so, se, out = run([PROG, 'term', 'churn' if threads == '0' else 'wait', threads], True,
                              send=signal.SIGTERM,
                              env={'MEMTALLY_EVERY': every, 'MEMTALLY_COMPRESS': str(k % 2),
                                   'MEMTALLY_SAMPLE': '0'}, delay=0.05 * k)
        what = 'busy %d (threads %s, MEMTALLY_EVERY=%s)' % (k, threads, every)
        mt.eq(describe(st), 'killed by 15', what + ': killed by SIGTERM')
        fs = files_of(out)
        if fs:
            reasons = [s['reason'] for s in fs[0].snapshots]
            finals = [i for i, r in enumerate(reasons) if r.startswith('signal-')]
            mt.check(not finals or finals == [len(reasons) - 1],
                     what + ': nothing after the final snapshot (%s)' % reasons[-3:])
            if threads == '0':
                # one thread, nearly always inside a snapshot of its own
                # when the signal comes: the death waits for that write
                # to end, then writes the final one (it was lost: a pool
                # worker's own cadence snapshot in progress at SIGTERM)
                mt.check(finals == [len(reasons) - 1],
                         what + ': the last snapshot is the death\'s (%s)' % reasons[-3:])
        r = subprocess.run([os.path.join(B, 'memtally'), 'report', out], capture_output=True,
                           text=True, timeout=120)
        mt.eq(r.returncode, 0, what + ': memtally report reads it (%s)' % r.stderr[-200:])

mt.done()
