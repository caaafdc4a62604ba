"""memtally — marks and on-demand snapshots from Python, when the shim is
loaded (LD_PRELOAD=libmemtally.so, or `memtally run`); a silent no-op when
it is not, so a trainer can keep these lines in every run.

    import memtally
    for step, batch in enumerate(loader):
        memtally.mark("step", step)     # snapshots carry the latest step
        ...
        if step % 1000 == 0:
            memtally.snapshot("step %d" % step)

Under `memtally run` this module is on the path already, and each
optimizer step of a PyTorch program is marked "step" without these lines
(the start-up hook's _memtally/steps.py, doc/python.md); a program's own
"step" mark through mark() wins over the automatic one.

Phases and the workload (doc/python.md): checkpoints, evaluations,
batches, backward and optimizer steps are phases without code; name the
rest, and say what a step worked on:

    with memtally.phase("rollout"):
        seqs = policy.generate(prompts)
    memtally.mark("step", step, meta={"tokens": seqs.numel()})

The process's own figures, while it runs under the shim:

    memtally.peak_reset()
    model(batch)
    f = memtally.figures()      # f.recording is False without the shim
    print(f.host_peak - f.host_live, f.peak['cuda'])

Pure ctypes; nothing is imported beyond the standard library."""
import ctypes
import os
import sys

__all__ = ['mark', 'phase', 'snapshot', 'active', 'on_step', 'figures', 'peak_reset', 'Figures']

try:
    _lib = ctypes.CDLL(None)
    _mark = _lib.memtally_mark
    _mark.argtypes = [ctypes.c_char_p, ctypes.c_double]
    _mark.restype = ctypes.c_int
    _snap = _lib.memtally_snapshot
    _snap.argtypes = [ctypes.c_char_p]
    _snap.restype = ctypes.c_int
except (OSError, AttributeError):
    _mark = _snap = None

try:
    _phase = ctypes.CDLL(None).memtally_phase
    _phase.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _phase.restype = ctypes.c_int
    _workload = ctypes.CDLL(None).memtally_workload
    _workload.argtypes = [ctypes.c_char_p]
    _workload.restype = ctypes.c_int
except (OSError, AttributeError):
    _phase = _workload = None

# doc/FORMAT.md's kinds, in the order of memtally_figures' arrays
KINDS = ('heap', 'mmap', 'mmap_file', 'cuda', 'cuda_host', 'cuda_managed', 'cuda_vmm')


class _CFigures(ctypes.Structure):
    _fields_ = [('nkinds', ctypes.c_uint), ('live', ctypes.c_ulonglong * 8),
                ('peak', ctypes.c_ulonglong * 8)] + [
        (n, ctypes.c_ulonglong) for n in ('host_live', 'host_peak', 'device_live', 'device_peak')]


try:
    _figs = ctypes.CDLL(None).memtally_figures
    _figs.argtypes = [ctypes.POINTER(_CFigures), ctypes.c_ulong]
    _figs.restype = ctypes.c_int
    _reset = ctypes.CDLL(None).memtally_peak_reset
    _reset.restype = ctypes.c_int
except (OSError, AttributeError):
    _figs = _reset = None

NOT_RECORDING = ('memtally is not recording this process (libmemtally.so is not loaded: '
                 'run it under `memtally run -- ...` or with LD_PRELOAD=libmemtally.so)')


def active():
    """True when the shim is loaded in this process."""
    return _snap is not None


def mark(name, value, meta=None):
    """Record the current value of a progress counter ("step", 1200);
    returns True when recorded.  Up to 8 names of up to 31 bytes.  meta
    (a dict of JSON values: {"tokens": 4096, "rollouts": 8}) says what the
    step worked on: the snapshots from this mark on carry it as their
    workload, with the DataLoader's batch shapes the start-up hook saw
    since the previous step; `memtally leaks` tells growth that follows
    its numbers from a leak."""
    if _mark is None:
        return False
    steps = _steps() if name == 'step' else None
    if meta is not None:
        ph = sys.modules.get('_memtally.phases')
        if ph is not None and getattr(ph, '_phase', None) is not None and steps is not None:
            ph.set_meta(meta)  # sent with the batches' shapes, before the mark
        elif _workload is not None:
            import json
            w = dict(meta)
            if name == 'step':
                w.setdefault('step', value)
            _workload(json.dumps(w, separators=(',', ':'), default=str).encode())
    if steps is not None and hasattr(steps, 'user_step_before'):
        # what describes the step (torch's allocator figures) goes to the
        # shim first: the step's snapshot is written as it is marked
        steps.user_step_before(value)
    ok = _mark(str(name).encode(), float(value)) == 0
    if ok and steps is not None:
        steps.user_step(value)  # the automatic marks stop; callbacks run
    return ok


class phase:
    """A phase of the program, as a context manager (or a decorator):

        with memtally.phase("rollout"):
            ...

    Snapshots taken inside it, and a peak reached inside it, name it
    ("during rollout at step 30"); `memtally diff run@rollout run@eval`
    compares two phases.  Up to 16 names of up to 31 bytes; nests."""

    def __init__(self, name):
        self.name = str(name).encode()

    def __enter__(self):
        if _phase is not None:
            _phase(self.name, 1)
        return self

    def __exit__(self, *exc):
        if _phase is not None:
            _phase(self.name, 0)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def inside(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return inside


def on_step(fn):
    """Call fn(step) right after each step is marked: each optimizer step
    the start-up hook marks, and each mark("step", n) made here.  fn's
    exceptions are caught and reported once.  Returns False when the hook's
    step module (_memtally/steps.py, beside this file) cannot be loaded."""
    steps = _steps()
    if steps is None:
        return False
    steps.on_step(fn)
    return True


def _steps():
    """The start-up hook's step module: the one it loaded (sys.modules'
    "_memtally.steps"), else _memtally/steps.py beside this file, loaded by
    its path (never a module found on sys.path); None when it cannot be."""
    mod = sys.modules.get('_memtally.steps')
    if mod is not None:
        return mod
    try:
        import importlib.util
        key = '_memtally.steps'
        spec = importlib.util.spec_from_file_location(
            key, os.path.join(os.path.dirname(os.path.abspath(__file__)), '_memtally', 'steps.py'))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(key, None)
            raise
        return mod
    except Exception:
        return None


def snapshot(label=''):
    """Write a snapshot now and wait until it is on disk (at most 10 s);
    returns True when written."""
    if _snap is None:
        return False
    return _snap(str(label).encode()) == 0


class Figures:
    """Bytes live now and the highest live bytes since the last
    peak_reset() (or the first figures() call: the shim follows the
    peaks from the first call of either on): .live and .peak by kind
    ("heap", "mmap", "cuda", ...), .host_live/.host_peak (heap + mmap) and
    .device_live/.device_peak (cuda + cuda_managed + cuda_vmm) sums.
    Without the shim .recording is False, every figure 0, and .reason and
    str() say so."""

    def __init__(self, c=None):
        self.recording = c is not None
        self.reason = '' if self.recording else NOT_RECORDING
        n = c.nkinds if c is not None else 0
        self.live = {k: (c.live[i] if i < n else 0) for i, k in enumerate(KINDS)}
        self.peak = {k: (c.peak[i] if i < n else 0) for i, k in enumerate(KINDS)}
        for a in ('host_live', 'host_peak', 'device_live', 'device_peak'):
            setattr(self, a, getattr(c, a) if c is not None else 0)

    def __repr__(self):
        if not self.recording:
            return '<memtally.Figures: %s>' % self.reason
        return ('<memtally.Figures host %d live, %d peak; device %d live, %d peak>'
                % (self.host_live, self.host_peak, self.device_live, self.device_peak))

    __str__ = __repr__


def figures():
    """The process's own figures now (a Figures); lock-free in the shim,
    cheap enough for every step."""
    if _figs is None:
        return Figures()
    c = _CFigures()
    if _figs(ctypes.byref(c), ctypes.sizeof(c)) != 0:
        return Figures()
    return Figures(c)


def peak_reset():
    """Start figures()' peaks again from the live bytes now (a test, a
    step); the peaks snapshots carry are untouched.  Returns False when
    not recording."""
    return _reset is not None and _reset() == 0
