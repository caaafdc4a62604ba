"""Deaths at random moments (issue 51): a dying process never hangs, ends
as it would without the shim, and leaves its final snapshot whenever one
could be written.

Each death is drawn at random (a fixed seed, printed, so a failure can be
replayed with MT_DEATH_SEED): a C program whose threads malloc,
realloc, free (tcache, arena and mmap sizes), write through stdio and
dlopen/dlclose a library, or a Python program whose threads allocate, or a
PyTorch training loop; killed from outside by SIGTERM, SIGINT, SIGHUP or
SIGQUIT after a random delay, or dying by itself: abort(), a double free
that glibc finds inside free() with the arena locked, a fault (a store
through NULL), each while the other threads allocate; under the cadence,
or (the C program) MEMTALLY_EVERY=1 or 50 (the writer lock nearly always
busy), plain or compressed.  For each death:
  - it ends within the watchdog (a hang fails the test: the death path
    took a lock the interrupted thread held: mallinfo2 under the arena
    lock hung every double free with a second thread);
  - its termination (signal, core flag) equals the bare run's of the same
    kind;
  - its file ends with one final snapshot whose reason names the signal,
    nothing after it, and the memtally command reads the file.
And inside dlclose (case dlclose): SIGTERM sent to a thread that dlopens
and dlcloses without pause, so that it is often taken with the loader's
lock held and an object half unmapped: the process dies of SIGTERM (the
final snapshot read the unmapped object's headers and died of SIGSEGV),
its final snapshot written (it was lost after 2 s when the writer lock's
holder waited for the loader's lock in its maps record).
And the bound: a process whose final snapshot can never be written (a
thread holds the loader's lock for ever) dies of its SIGTERM within
MEMTALLY_DEATH_WAIT, its file ending at its previous snapshot.

MT_DEATHS sets the number of deaths (default 40; MT_FULL=1, make check's
suite, 400)."""
import os, random, signal, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
PROG = os.path.join(B, 'test', 'prog_deaths')
LIB = os.path.join(B, 'test', 'lib_alloc.so')
PYPROG = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'py', 'py_deaths.py')
PY = '/usr/bin/python3'
N = int(os.environ.get('MT_DEATHS') or (400 if mt.full() else 40))
SEED = int(os.environ.get('MT_DEATH_SEED', '51'))
# a death that hangs is caught here, long before run.sh's watchdog: the
# slowest honest one (PyTorch's import under the shim on a loaded
# machine) takes a few seconds
HANG = mt.slack(90)
REASON = {signal.SIGTERM: 'signal-term', signal.SIGINT: 'signal-int', signal.SIGHUP: 'signal-hup',
          signal.SIGQUIT: 'signal-quit', signal.SIGABRT: 'signal-abrt', signal.SIGSEGV: 'signal-segv'}
count = [0]


def describe(st):
    if st is None:
        return 'hung'
    if os.WIFSIGNALED(st):
        return 'killed by %d%s' % (os.WTERMSIG(st), ', core' if os.WCOREDUMP(st) else '')
    return 'exit %d' % os.WEXITSTATUS(st)


def run(argv, shim, send=None, delay=0.0, env=None):
    """(wait status or None for a hang, outdir)."""
    count[0] += 1
    out = os.path.join(OUT, 'd%d' % count[0])
    os.makedirs(out)
    e = dict(os.environ, **(env or {}))
    e.pop('LD_PRELOAD', None)
    if shim:
        e.update(LD_PRELOAD=SHIM, MEMTALLY_OUT=out)

    def pre():
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    p = subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         preexec_fn=pre, cwd=out, text=True)
    deadline = time.monotonic() + HANG
    if send:
        line = p.stdout.readline()
        mt.check(line == 'ready\n', '%s: ready (%r)' % (argv[1:3], line))
        time.sleep(delay)
        p.send_signal(send)
    st = None
    while time.monotonic() < deadline:
        pid, s = os.waitpid(p.pid, os.WNOHANG)
        if pid:
            st = s
            break
        time.sleep(0.01)
    if st is None:  # hung: kill it, and its state for the log
        try:
            with open('/proc/%d/task/%d/wchan' % (p.pid, p.pid)) as f:
                print('  hung in', f.read())
        except OSError:
            pass
        p.kill()
        os.waitpid(p.pid, 0)
    p.returncode = 0
    p.stdout.close()
    return st, out


# The kinds of death: (name, argv(threads, delay_us), signal sent from
# outside or None, the final snapshot's reason).
def c_argv(how):
    return lambda threads, delay: [PROG, how, str(threads), str(delay), LIB]


def py_argv(how, torch=False):
    return lambda threads, delay: [PY, PYPROG, how, str(min(threads, 2))] + (['torch'] if torch else [])


KINDS = [('C SIGTERM', c_argv('wait'), signal.SIGTERM, 'signal-term'),
         ('C SIGINT', c_argv('wait'), signal.SIGINT, 'signal-int'),
         ('C SIGHUP', c_argv('wait'), signal.SIGHUP, 'signal-hup'),
         ('C SIGQUIT', c_argv('wait'), signal.SIGQUIT, 'signal-quit'),
         ('C abort', c_argv('abort'), None, 'signal-abrt'),
         ('C double free', c_argv('dfree'), None, 'signal-abrt'),
         ('C fault', c_argv('fault'), None, 'signal-segv'),
         ('Python SIGTERM', py_argv('wait'), signal.SIGTERM, 'signal-term'),
         ('Python abort', py_argv('abort'), None, 'signal-abrt'),
         ('Python fault', py_argv('fault'), None, 'signal-segv')]
TORCH = ('PyTorch SIGTERM', py_argv('wait', True), signal.SIGTERM, 'signal-term')

bare = {}


def bare_status(kind):
    """The kind's termination without the shim (it does not depend on
    the moment: each is run once)."""
    name, argv, send, _ = kind
    if name not in bare:
        st, _ = run(argv(2, 20000), False, send, 0.05)
        bare[name] = describe(st)
    return bare[name]


wrongs = []


def wrong(msg):
    """A death that went wrong: failed now, and listed again after the
    table (a long run's log is read from its tail)."""
    mt.check(False, msg)
    wrongs.append(msg)
    return False


def warnings(out):
    """The file's warning records and the last snapshot's dropped count:
    what the shim could say of a final snapshot it could not write."""
    try:
        fs = mt.files(out)
        if not fs:
            return 'no file'
        last = fs[0].snapshots[-1] if fs[0].snapshots else {}
        return 'warnings %s, dropped_snapshots %s' % (fs[0].warnings or 'none',
                                                      last.get('dropped_snapshots'))
    except Exception as e:  # noqa: BLE001 (a diagnostic only)
        return 'unread: %s' % e


def one(rng, kind, k):
    name, argv, send, reason = kind
    threads, delay = rng.choice((0, 1, 2, 4)), rng.randrange(0, 200000)
    # the writer lock busy: a snapshot every allocation or every 50, in
    # the C program (Python's start-up makes ~10^5 allocations, PyTorch's
    # 10^6: those keep to the cadence)
    every = rng.choice(('0', '0', '1', '50')) if argv is not None and name.startswith('C') else '0'
    env = {'MEMTALLY_EVERY': every, 'MEMTALLY_COMPRESS': rng.choice('01')}
    what = 'death %d: %s, %d threads, %.3f s, MEMTALLY_EVERY=%s' % (k, name, threads, delay / 1e6, every)
    st, out = run(argv(threads, delay), True, send, delay / 1e6, env)
    got, want = describe(st), bare_status(kind)
    if got != want:
        return wrong(what + ': termination as without the shim: %s, bare %s' % (got, want))
    fs = mt.files(out)
    if len(fs) != 1:
        return wrong(what + ': one file (%d)' % len(fs))
    reasons = [s['reason'] for s in fs[0].snapshots]
    finals = [i for i, r in enumerate(reasons) if r.startswith('signal-') or r == 'exit']
    if finals != [len(reasons) - 1] or reasons[-1] != reason:
        return wrong(what + ': the file ends with one final snapshot, %s (%s; %s)'
                     % (reason, reasons[-3:], warnings(out)))
    r = subprocess.run([os.path.join(B, 'memtally'), 'report', out], capture_output=True, text=True,
                       timeout=120)
    if r.returncode:
        return wrong(what + ': memtally report reads it (%s)' % r.stderr[-300:])
    return True


if mt.case('random'):
    rng = random.Random(SEED)
    print('seed %d, %d deaths' % (SEED, N))
    kinds = list(KINDS)
    # PyTorch's deaths are the slow ones: one in 20 (at least one)
    plan = [TORCH] + [TORCH if rng.random() < 0.05 else rng.choice(kinds) for _ in range(N - 1)]
    ok = 0
    by = {}
    for k, kind in enumerate(plan):
        good = one(rng, kind, k)
        ok += good
        by.setdefault(kind[0], [0, 0])[0 if good else 1] += 1
    for name, (g, b) in sorted(by.items()):
        print('  %-16s %3d right, %d wrong (bare: %s)' % (name, g, b, bare.get(name)))
    for w in wrongs:
        print('  wrong: ' + w)
    mt.eq(ok, len(plan), 'deaths that ended as without the shim with their final snapshot')

if mt.case('bound'):
    # The final snapshot needs the loader's lock (the maps record), which
    # another thread holds for ever: without a bound the process hung.
    for wait in ('0.2', '1'):
        what = 'bound %s s' % wait
        t0 = time.monotonic()
        st, out = run(c_argv('bound')(2, 0), True, env={'MEMTALLY_DEATH_WAIT': wait})
        took = time.monotonic() - t0
        mt.eq(describe(st), 'killed by 15', what + ': killed by its SIGTERM')
        # not a cost assertion: a hang is caught at HANG s; this says the
        # bound, not the watchdog, ended it
        mt.check(st is not None and took < HANG / 2, what + ': ended by the bound (%.1f s)' % took)
        fs = mt.files(out)
        reasons = [s['reason'] for s in fs[0].snapshots] if fs else []
        mt.check(not any(r.startswith('signal-') for r in reasons),
                 what + ': no final snapshot could be written (%s)' % reasons[-2:])
    mt.eq(bare_status(('C bound', c_argv('bound'), None, None)), 'killed by 15', 'bound: bare')

if mt.case('dlclose'):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    rng = random.Random(SEED)
    n = 200 if mt.full() else 40
    res = {}
    for k in range(n):
        every = rng.choice(('0', '1', '50'))
        out = os.path.join(OUT, 'dlclose%d' % k)
        os.makedirs(out)
        e = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, MEMTALLY_EVERY=every)
        p = subprocess.Popen([PROG, 'dlclose', str(rng.choice((0, 1, 2))), '0', LIB], env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=out, text=True)
        line = p.stdout.readline().split()
        if line[:1] != ['ready']:
            mt.check(False, 'dlclose %d: ready (%r)' % (k, line))
            p.kill(), p.wait()
            continue
        time.sleep(rng.random() * 0.05)
        libc.syscall(234, p.pid, int(line[1]), signal.SIGTERM)  # tgkill: that thread
        try:
            rc = p.wait(timeout=HANG)
            got = 'killed by %d' % -rc if rc < 0 else 'exit %d' % rc
        except subprocess.TimeoutExpired:
            p.kill(), p.wait()
            got = 'hung'
        p.stdout.close()
        fs = mt.files(out)
        reasons = [s['reason'] for s in fs[0].snapshots] if fs else []
        key = (got, reasons[-1] if reasons else None)
        res[key] = res.get(key, 0) + 1
    print('  dlclose: %s' % res)
    mt.eq(res, {('killed by 15', 'signal-term'): n},
          'SIGTERM inside dlclose: killed by it, its final snapshot written, every time')

if mt.case('double-free'):
    # The red team's program: two threads, a double free found with the
    # arena locked; bare: "double free or corruption", killed by SIGABRT.
    for every in ('0', '1'):
        st, out = run(c_argv('dfree')(1, 1000), True, env={'MEMTALLY_EVERY': every})
        mt.eq(describe(st), 'killed by 6', 'double free, MEMTALLY_EVERY=%s: killed by SIGABRT' % every)
        fs = mt.files(out)
        last = fs[0].snapshots[-1] if fs and fs[0].snapshots else {}
        mt.eq(last.get('reason'), 'signal-abrt', 'double free: the final snapshot')
        mt.eq(last.get('allocator', {}).get('omitted'), 'death',
              'double free: the allocator\'s figures (its locks) left out of the death\'s snapshot')
        mt.check(last.get('heap', {}).get('live_bytes', 0) >= 640000,
                 'double free: the final snapshot holds what was live')

mt.done()
