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

Pure ctypes; nothing is imported beyond the standard library."""
import ctypes
import os
import sys

__all__ = ['mark', 'snapshot', 'active', 'on_step']

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


def active():
    """True when the shim is loaded in this process."""
    return _snap is not None


def mark(name, value):
    """Record the current value of a progress counter ("step", 1200);
    returns True when recorded.  Up to 8 names of up to 31 bytes."""
    if _mark is None:
        return False
    ok = _mark(str(name).encode(), float(value)) == 0
    if ok and name == 'step':
        steps = _steps()
        if steps is not None:
            steps.user_step(value)  # the automatic marks stop; callbacks run
    return ok


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
