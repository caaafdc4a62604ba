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
into the program (of any kind, SystemExit included; a KeyboardInterrupt is
the user's and passes): a failure is one warning (say(): into the file,
not the program's stderr) and is dropped.  Modules of this package are loaded by their path (load()), never
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


def say(msg):
    """A warning said as the shim says its own (the C API's memtally_warn:
    a record in the file, which `memtally run` prints at the end; on
    stderr the process's first only, none under MEMTALLY_QUIET=1); without
    the shim, one stderr line unless MEMTALLY_QUIET=1.  Never raises."""
    try:
        import ctypes
        f = ctypes.CDLL(None).memtally_warn
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
        if f(msg.encode('utf-8', 'replace')) == 0:
            return
    except Exception:
        pass
    try:
        if os.environ.get('MEMTALLY_QUIET', '0').strip().lower() not in ('1', 'true', 'yes', 'on'):
            sys.stderr.write('memtally: %s\n' % msg)
            sys.stderr.flush()
    except Exception:
        pass


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
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        _warn('steps', 'cannot hook optimizer steps in torch %s (%s: %s); steps are not marked'
              % (getattr(torch, '__version__', '?'), type(e).__name__, e))
    try:
        load('cuda').install(torch)
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        _warn('cuda', '_memtally.cuda: %s: %s' % (type(e).__name__, e))
    try:
        _state['why'] = bool(load('why').install(torch, sys.modules[__name__]))
    except KeyboardInterrupt:
        raise
    except BaseException as e:
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
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        _warn('stepped', 'marking an optimizer step failed (%s: %s)' % (type(e).__name__, e))
        return
    _run_callbacks(n)


def _run_callbacks(step, fns=None):
    for fn in list(_callbacks if fns is None else fns):
        try:
            fn(step)
        except Exception as e:
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
