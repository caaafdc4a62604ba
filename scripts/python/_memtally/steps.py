"""_memtally.steps -- steps from PyTorch without code (doc/python.md).

sitecustomize.py (the start-up hook, in the folder above) loads this file
by its path, as "_memtally.steps", and calls on_torch(torch)
once `import torch` has run, in every Python process that `memtally run`
starts.  In a process the shim is loaded in, each optimizer step then
becomes a "step" mark (memtally_mark): torch >= 2.0 through its global
optimizer step post-hook, 1.13 through Optimizer._optimizer_step_code,
which torch's own per-class step wrapper calls after every step.  Then
_memtally/cuda.py's install(torch) runs (the CUDA allocator's figures),
then _memtally/why.py's install (the "why is it still alive" search).

The mark's value is the number of training iterations so far (1 after the
first).  With several optimizers an iteration ends when an optimizer that
has already stepped in it steps again, so optimizers stepped once each per
iteration give one mark per iteration; a step taken inside another
optimizer's step (a subclass calling super().step(), a wrapping optimizer)
is the outer one's.  Once the program marks "step" itself through
memtally.mark, the hook stops marking: the program's counter wins.
Callbacks registered with on_step(fn) run after each step mark, the hook's
or the program's.

Nothing here changes what the program computes, initialises CUDA or raises
into the program: a failure of the hook's own code is one warning (say():
into the file, not the program's stderr) and is dropped.  What is not
the hook's own passes unchanged (ours(), doc/python.md "Exceptions"):
KeyboardInterrupt, SystemExit and every BaseException that is not an
Exception, and an Exception raised by the program's code (a signal
handler's, a trace function's, any frame of the program's own files).  Modules of this package are loaded by their path (load()), never
by a name a module of the program's could take.  Importing this module only
defines what is below."""
import os
import sys

_warned = set()
_state = {'torch': False, 'shim': None, 'method': None, 'user_step': False}
_count = 0          # iterations marked by the hook
_seen = set()       # id() of the optimizers that stepped in this iteration
_callbacks = []     # on_step
_before = []        # before_step
_bad_callbacks = set()
_user_step = False  # the program marks "step" itself
_mark = None        # memtally_mark, through ctypes, once torch is imported
_lock = None


_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # sitecustomize.py's
_LIBS = tuple(sorted({os.path.join(p, '') for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p}))


def _code_of(h):
    """The code object a callable runs first, when it is a function, a
    bound method or a functools.partial of one (read through their C
    attributes: no code of the program's runs), else None."""
    for _ in range(4):
        t = type(h)
        if t is _FUNCTION:
            return h.__code__
        if t is _METHOD:
            h = h.__func__
        elif t is _PARTIAL:
            h = h.func
        else:
            return None
    return None


_FUNCTION = type(_code_of)
_METHOD = type(_code_of.__get__(0))  # a bound method
import _functools  # built in: found before sys.path, never the program's
_PARTIAL = _functools.partial


def _foreign_codes():
    """The code of the program's signal handlers (every signal's Python
    handler now) and of this thread's trace and profile functions."""
    codes = set()
    try:
        import _signal  # built in: found before sys.path, never the program's
        for s in _signal.valid_signals():
            try:
                c = _code_of(_signal.getsignal(s))
            except (ValueError, OSError):
                continue
            if c is not None:
                codes.add(id(c))
    except Exception:
        pass
    for h in (sys.gettrace(), sys.getprofile()):
        c = _code_of(h)
        if c is not None:
            codes.add(id(c))
    return codes


def _programs_file(fn):
    """A frame's file that is the program's own code: not memtally's hook,
    not Python's library (its prefixes, site-packages, dist-packages,
    frozen modules)."""
    if type(fn) is not str:
        return False
    if fn.startswith(_TOP + os.sep) or fn.startswith('<frozen ') or fn.startswith(_LIBS):
        return False
    return 'site-packages' + os.sep not in fn and 'dist-packages' + os.sep not in fn


def ours(e, callback=False):
    """Whether e, caught by the hook's code, is the hook's own failure (to
    be reported and dropped) or must propagate unchanged (the caller
    re-raises it with a bare `raise`).  The rule (doc/python.md
    "Exceptions"): only an Exception can be ours (KeyboardInterrupt,
    SystemExit, GeneratorExit and any other BaseException always
    propagate); an Exception is not ours when a frame it passed through,
    from the catching frame to the raise, is the program's: the code of a
    Python signal handler installed now (any signal), of this thread's
    trace or profile function, or, unless callback (the program's own
    on_step callbacks, whose exceptions are reported), of a file of the
    program's (outside memtally's hook and Python's library folders).
    Never raises."""
    try:
        if not isinstance(e, Exception):
            return False
        tb = e.__traceback__
        codes = None
        while tb is not None:
            c = tb.tb_frame.f_code
            if not callback and _programs_file(c.co_filename):
                return False
            if codes is None:
                codes = _foreign_codes()
            if id(c) in codes:
                return False
            tb = tb.tb_next
        return True
    except Exception:
        return True


def say(msg):
    """A warning said as the shim says its own (the C API's memtally_warn:
    a record in the file, which `memtally run` prints at the end; on
    stderr the process's first only, none under MEMTALLY_QUIET=1); without
    the shim, one stderr line unless MEMTALLY_QUIET=1.  Raises only what
    is not its own (ours())."""
    try:
        import ctypes
        f = ctypes.CDLL(None).memtally_warn
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
        if f(msg.encode('utf-8', 'replace')) == 0:
            return
    except Exception as e:
        if not ours(e):
            raise
    try:
        if os.environ.get('MEMTALLY_QUIET', '0').strip().lower() not in ('1', 'true', 'yes', 'on'):
            sys.stderr.write('memtally: %s\n' % msg)
            sys.stderr.flush()
    except Exception as e:
        if not ours(e):
            raise


def _warn(key, msg):
    """say(MSG) once per key; never raises."""
    if key in _warned:
        return
    _warned.add(key)
    say(msg)


def load(name):
    """_memtally/<name>.py (beside this file), by its path, once: the
    module registered as "_memtally.<name>" (sitecustomize.py and
    memtally.py load this one so)."""
    key = '_memtally.' + name
    mod = sys.modules.get(key)
    if mod is not None:
        return mod
    # the import system's own functions, loaded at start-up: no lookup
    ext = sys.modules['_frozen_importlib_external']
    spec = ext.spec_from_file_location(
        key, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + '.py'))
    mod = sys.modules['_frozen_importlib'].module_from_spec(spec)
    sys.modules[key] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(key, None)
        raise
    return mod


def state():
    """What the hook did in this process, for tests and for a look (under
    `memtally run`): `python3 -c 'import memtally; print(memtally._steps().state())'`.
    started/chained/enabled: the start-up hook ran, the sitecustomize it
    ran in turn, MEMTALLY_TORCH; torch: on_torch ran; shim: the shim is
    loaded; method: how steps are hooked; steps: the hook's marks."""
    site = getattr(sys.modules.get('sitecustomize'), '_memtally_state', None) or {}
    s = {'started': bool(site.get('started')), 'chained': site.get('chained'),
         'enabled': site.get('enabled')}
    s.update(_state)
    s['steps'] = _count
    return s


# ---- after `import torch` -------------------------------------------------

def _shim_mark():
    """memtally_mark from the shim, or None when it is not loaded here."""
    import ctypes
    try:
        f = ctypes.CDLL(None).memtally_mark
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_char_p, ctypes.c_double]
    f.restype = ctypes.c_int
    return f


def on_torch(torch):
    """Called by the start-up hook once `import torch` has run."""
    global _mark, _lock
    if _state['torch']:
        return
    _state['torch'] = True
    try:
        _mark = _shim_mark()
        _state['shim'] = _mark is not None
        if _mark is None:
            return  # no shim in this process: nothing to record
        import threading
        _lock = threading.Lock()
        _state['method'] = _install_steps(torch)
    except Exception as e:
        if not ours(e):
            raise
        _warn('steps', 'cannot hook optimizer steps in torch %s (%s: %s); steps are not marked'
              % (getattr(torch, '__version__', '?'), type(e).__name__, e))
    try:  # phases and the step's workload (_memtally/phases.py)
        _state['phases'] = bool(load('phases').install(torch, sys.modules[__name__]))
    except Exception as e:
        if not ours(e):
            raise
        _warn('phases', '_memtally.phases: %s: %s' % (type(e).__name__, e))
    try:
        load('cuda').install(torch)
    except Exception as e:
        if not ours(e):
            raise
        _warn('cuda', '_memtally.cuda: %s: %s' % (type(e).__name__, e))
    try:
        _state['why'] = bool(load('why').install(torch, sys.modules[__name__]))
    except Exception as e:
        if not ours(e):
            raise
        _warn('why', '_memtally.why: %s: %s' % (type(e).__name__, e))


def _install_steps(torch):
    """Hook every optimizer's step; returns how."""
    import importlib
    opt_mod = importlib.import_module('torch.optim.optimizer')  # already imported by torch
    reg = getattr(opt_mod, 'register_optimizer_step_post_hook', None)
    if reg is not None:  # torch >= 2.0
        def post_hook(optimizer, args, kwargs):
            _stepped(optimizer, sys._getframe(1))
        reg(post_hook)
        return 'post-hook'
    Opt = opt_mod.Optimizer
    code = getattr(Opt, '_optimizer_step_code', None)
    if code is None:
        raise RuntimeError('neither register_optimizer_step_post_hook nor '
                           'Optimizer._optimizer_step_code')
    if getattr(code, '_memtally', False):
        return 'step-code'

    # torch 1.13: Optimizer.__init__ wraps each class's step once
    # (_hook_for_profile) and the wrapper calls this after the step.
    def _optimizer_step_code(self):
        code(self)
        _stepped(self, sys._getframe(1))
    _optimizer_step_code._memtally = True
    _optimizer_step_code.__doc__ = code.__doc__
    Opt._optimizer_step_code = _optimizer_step_code
    return 'step-code'


def _stepped(optimizer, caller):
    """An optimizer finished a step; caller is torch's step wrapper."""
    global _count
    try:
        if _user_step or _mark is None:
            return
        # Inside another optimizer's step (the same wrapper further up):
        # the outer step is the one counted.
        wrapper = caller.f_code
        f = caller.f_back
        while f is not None:
            if f.f_code is wrapper:
                return
            f = f.f_back
        with _lock:
            k = id(optimizer)
            if _seen and k not in _seen:
                _seen.add(k)  # another optimizer, same iteration
                return
            _seen.clear()
            _seen.add(k)
            _count += 1
            n = _count
        # the step's snapshot is written as it is marked (the shim's
        # cadence): what describes the step (torch's allocator figures)
        # goes to the shim first
        _run_callbacks(n, _before)
        _mark(b'step', float(n))
    except Exception as e:
        if not ours(e):
            raise
        _warn('stepped', 'marking an optimizer step failed (%s: %s)' % (type(e).__name__, e))
        return
    _run_callbacks(n)


def _run_callbacks(step, fns=None):
    for fn in list(_callbacks if fns is None else fns):
        try:
            fn(step)
        except Exception as e:
            # the callback is the program's: its exceptions are reported,
            # but not a signal handler's landing in it (ours(), callback)
            if not ours(e, callback=True):
                raise
            if id(fn) not in _bad_callbacks:
                _bad_callbacks.add(id(fn))
                _warn(('callback', id(fn)), 'step callback %s failed at step %s (%s: %s); '
                      'later failures are not reported'
                      % (getattr(fn, '__qualname__', fn), step, type(e).__name__, e))


# ---- the interface (memtally.py and cuda.py use these) ----------

def on_step(fn):
    """Call fn(step) right after each step is marked (the hook's marks, or
    the program's memtally.mark("step", n)); its exceptions are caught and
    reported once."""
    _callbacks.append(fn)


def before_step(fn):
    """Call fn(step) right before the hook marks each step (so the step's
    snapshot, written as the step is marked, carries what fn sent), and
    after the program's own marks; exceptions as on_step's."""
    _before.append(fn)


def user_step_before(value):
    """The program is about to mark "step" itself (memtally.mark): the
    before_step callbacks run with its value."""
    _run_callbacks(value, _before)


def user_step(value):
    """The program marked "step" itself (memtally.mark): the hook stops
    marking, and the step callbacks run with the program's value."""
    global _user_step
    _user_step = True
    _state['user_step'] = True
    _run_callbacks(value)
