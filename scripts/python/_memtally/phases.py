"""_memtally.phases -- phases and the step's workload without code
(doc/python.md "Phases and the workload").

steps.py's on_torch(torch) calls install(torch, steps) once `import torch`
has run, in a process the shim is loaded in.  Each of these then becomes a
phase in the file (memtally_phase: begun, ended, named in every snapshot
taken inside it and in the peak reached inside it):

    checkpoint_save   torch.save, torch.distributed.checkpoint's save and
                      save_state_dict (once the program imported it)
    state_dict        the outermost Module.state_dict() (gathered to save
                      it, to send it to another model)
    weight_load       the outermost Module.load_state_dict()
    broadcast         torch.distributed's broadcast, broadcast_object_list
    eval              from model.eval() until model.train() (a module with
                      parameters that train, after the first step)
    data              the DataLoader's handoff of a batch (its __next__)
    backward          torch.autograd.backward (Tensor.backward calls it)
    optimizer         each optimizer's step (its step mark follows it)

A checkpoint save and an evaluation also take a snapshot (reason
"request", label "phase checkpoint_save" or "phase eval") just before they
end, inside the phase: what `memtally diff run@phase:eval
run@phase:checkpoint_save` compares.

The DataLoader's batches are also the step's workload: the shapes of the
tensors handed over since the previous step (at most 8), their bytes
(`batch_bytes`) and, for an integer tensor of two or more dimensions (token
ids: batch x sequence), its elements (`tokens`), with `batches` (how many)
and `step`; memtally.mark("step", n, meta={...}) adds the program's own
numbers.  It is sent (memtally_workload) just before each step mark, so the
step's snapshot carries it.

Each phase is two calls into the shim (a short lock, no allocation) and a
Python wrapper; test/bench/phases.py measures it.  As in steps.py, nothing
here changes what the program computes or raises into it: a failure of the
hook's own code is one warning and the phase is dropped."""
import sys

_phase = None       # memtally_phase
_workload = None    # memtally_workload
_snap = None        # memtally_snapshot
_steps = None       # the steps module (say, ours, before_step)
_acc = {'shapes': [], 'batches': 0, 'bytes': 0, 'tokens': 0, 'has_tokens': False}
_meta = [None]      # the program's meta for the next step (memtally.mark)
_depth = {}         # phase name -> nesting of its own wrappers (outermost only)
_eval = set()       # id() of the modules in eval, phase open
_dcp = [False]      # torch.distributed.checkpoint hooked


def _bind():
    global _snap
    import ctypes
    try:
        lib = ctypes.CDLL(None)
        p, w, _snap = lib.memtally_phase, lib.memtally_workload, lib.memtally_snapshot
    except (OSError, AttributeError):
        return None, None
    _snap.argtypes = [ctypes.c_char_p]
    _snap.restype = ctypes.c_int
    p.argtypes = [ctypes.c_char_p, ctypes.c_int]
    p.restype = ctypes.c_int
    w.argtypes = [ctypes.c_char_p]
    w.restype = ctypes.c_int
    return p, w


def begin(name):
    if _phase is not None:
        _phase(name, 1)


def end(name):
    if _phase is not None:
        _phase(name, 0)


_spent = [0.0, None]  # seconds in phase-end snapshots; when the first was asked


def _snapshot(name):
    """A snapshot before the end of a rare phase (a checkpoint, an
    evaluation): what `memtally diff run@phase:NAME ...` compares.  A
    snapshot walks every call site (tens of ms in a torch process): a
    checkpoint's is always taken (the save itself costs more), an
    evaluation's while they have cost under 5% of the time since the
    first (a program that enters eval every step pays that, not a
    snapshot a step); the phases themselves are marked whatever."""
    if _snap is None:
        return
    import time
    now = time.monotonic()
    if _spent[1] is None:
        _spent[1] = now
    elif name != b'checkpoint_save' and _spent[0] > 0.05 * (now - _spent[1]):
        return
    _snap(b'phase ' + name)
    _spent[0] += time.monotonic() - now


def _wrap(fn, name, outermost=True, snap=False):
    """fn inside phase name (bytes); with outermost, only the outermost
    of nested calls is the phase (state_dict recurses); with snap, a
    snapshot is taken before it ends."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if outermost:
            d = _depth.get(name, 0)
            _depth[name] = d + 1
            if d:
                try:
                    return fn(*args, **kwargs)
                finally:
                    _depth[name] -= 1
        _phase(name, 1)
        try:
            return fn(*args, **kwargs)
        finally:
            if snap:
                _snapshot(name)
            _phase(name, 0)
            if outermost:
                _depth[name] -= 1
    wrapper._memtally_phase = True
    return wrapper


def _patch(obj, attr, name, outermost=True, snap=False):
    fn = getattr(obj, attr, None)
    if fn is None or getattr(fn, '_memtally_phase', False):
        return False
    setattr(obj, attr, _wrap(fn, name, outermost, snap))
    return True


def _walk(x, out, depth=0):
    """Tensors in a batch (a tensor, or lists, tuples, dicts of them; at
    most 3 deep and 16 tensors)."""
    if len(out) >= 16 or depth > 3:
        return
    if _Tensor is not None and isinstance(x, _Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x[:16]:
            _walk(y, out, depth + 1)
    elif isinstance(x, dict):
        for y in list(x.values())[:16]:
            _walk(y, out, depth + 1)


_Tensor = None
_INT = ()


def _batch(b):
    try:
        ts = []
        _walk(b, ts)
        a = _acc
        a['batches'] += 1
        for t in ts:
            shape = list(t.shape)
            if len(a['shapes']) < 8:
                a['shapes'].append(shape)
            a['bytes'] += t.numel() * t.element_size()
            if t.dtype in _INT and t.dim() >= 2:
                a['tokens'] += t.numel()
                a['has_tokens'] = True
    except Exception as e:
        if not _steps.ours(e):
            raise
        _steps._warn('batch', 'reading a batch\'s shape failed (%s: %s)' % (type(e).__name__, e))


def _next_wrap(fn):
    import functools

    @functools.wraps(fn)
    def __next__(self):
        _phase(b'data', 1)
        try:
            b = fn(self)
        finally:
            _phase(b'data', 0)
        _batch(b)
        return b
    __next__._memtally_phase = True
    return __next__


def set_meta(meta):
    """memtally.mark("step", n, meta=...): the program's numbers for the
    step about to be marked."""
    _meta[0] = dict(meta) if meta else None


def send(step):
    """The step's workload to the shim (before_step: before its mark)."""
    a, meta = _acc, _meta[0]
    _meta[0] = None
    if not a['batches'] and not meta:
        return
    w = {'step': step}
    if a['batches']:
        w['batches'] = a['batches']
        w['shapes'] = a['shapes']
        w['batch_bytes'] = a['bytes']
        if a['has_tokens']:
            w['tokens'] = a['tokens']
    if meta:
        for k, v in meta.items():
            w[str(k)] = v
    import json
    try:
        s = json.dumps(w, separators=(',', ':'), default=str)
    except Exception as e:
        if not _steps.ours(e):
            raise
        s = None
    if s is not None and len(s) > 1000:  # the shim's bound: shapes go first
        w.pop('shapes', None)
        s = json.dumps(w, separators=(',', ':'), default=str)
    if s is not None and len(s) <= 1000 and _workload is not None:
        _workload(s.encode())
    _acc.update(shapes=[], batches=0, bytes=0, tokens=0, has_tokens=False)


def _before_step(step):
    send(step)
    _hook_dcp()


def _hook_dcp():
    """torch.distributed.checkpoint's saves, once the program imported it."""
    if _dcp[0]:
        return
    m = sys.modules.get('torch.distributed.checkpoint')
    if m is None:
        return
    _dcp[0] = True
    for attr in ('save', 'save_state_dict', 'async_save'):
        _patch(m, attr, b'checkpoint_save', snap=True)


def _train_wrap(fn, steps):
    import functools

    @functools.wraps(fn)
    def train(self, mode=True):
        k = id(self)
        if _depth.get(b'train'):  # a child's, inside the outer call
            return fn(self, mode)
        _depth[b'train'] = 1
        try:
            if not mode and k not in _eval and self.training and steps.state()['steps'] + (
                    1 if steps._user_step else 0) > 0 and any(
                    p.requires_grad for p in self.parameters()):
                _eval.add(k)
                _phase(b'eval', 1)
            elif mode and k in _eval:
                _eval.discard(k)
                _snapshot(b'eval')
                _phase(b'eval', 0)
            return fn(self, mode)
        except Exception as e:
            if not steps.ours(e):
                raise
            return fn(self, mode)
        finally:
            _depth[b'train'] = 0
    train._memtally_phase = True
    return train


def install(torch, steps):
    """Hook the phases; returns True when they are in place."""
    global _phase, _workload, _steps, _Tensor, _INT
    if _phase is not None:
        return True
    _steps = steps
    _phase, _workload = _bind()
    if _phase is None:
        return False
    # what this torch has (a build without autograd or nn, a stand-in
    # module: those phases are not marked)
    _Tensor = getattr(torch, 'Tensor', None)
    _INT = tuple(getattr(torch, n) for n in ('int64', 'int32', 'int16', 'uint8', 'int8') if hasattr(torch, n))
    _patch(torch, 'save', b'checkpoint_save', snap=True)
    if hasattr(torch, 'autograd'):
        _patch(torch.autograd, 'backward', b'backward')
    Module = getattr(getattr(torch, 'nn', None), 'Module', None)
    if Module is not None:
        _patch(Module, 'state_dict', b'state_dict')
        _patch(Module, 'load_state_dict', b'weight_load')
        if not getattr(Module.train, '_memtally_phase', False):
            Module.train = _train_wrap(Module.train, steps)
    dist = getattr(torch, 'distributed', None)
    if dist is not None:
        for attr in ('broadcast', 'broadcast_object_list'):
            _patch(dist, attr, b'broadcast')
    dl = sys.modules.get('torch.utils.data.dataloader')
    if dl is not None:
        it = dl._BaseDataLoaderIter
        if not getattr(it.__next__, '_memtally_phase', False):
            it.__next__ = _next_wrap(it.__next__)
    _hook_optimizer(torch)
    _hook_dcp()
    getattr(steps, 'before_step', steps.on_step)(_before_step)
    return True


def _hook_optimizer(torch):
    import importlib
    try:
        om = importlib.import_module('torch.optim.optimizer')
    except ImportError:  # a torch without optim: no optimizer phase
        return
    pre = getattr(om, 'register_optimizer_step_pre_hook', None)
    post = getattr(om, 'register_optimizer_step_post_hook', None)
    if pre is not None and post is not None:  # torch >= 2.0
        # a pre-hook's value replaces the step's arguments unless it is
        # None (torch 2.x raises on any other): both return None
        def opt_begin(opt, args, kwargs):
            _phase(b'optimizer', 1)

        def opt_end(opt, args, kwargs):
            _phase(b'optimizer', 0)
        pre(opt_begin)
        h = post(opt_end)
        try:  # before the step hook's post-hook: the step is marked after the phase
            om._global_optimizer_post_hooks.move_to_end(h.id, last=False)
        except Exception:
            pass
        return
    Opt = om.Optimizer
    orig = getattr(Opt, '_hook_for_profile', None)
    if orig is None or getattr(orig, '_memtally_phase', False):
        return

    # torch 1.13: each class's step is wrapped once by _hook_for_profile,
    # whose wrapper marks the step after it: ours goes inside that one
    def _hook_for_profile(self):
        cls = self.__class__
        st = cls.step
        if not getattr(st, 'hooked', None) and not getattr(st, '_memtally_phase', False):
            cls.step = _wrap(st, b'optimizer', outermost=False)
        return orig(self)
    _hook_for_profile._memtally_phase = True
    Opt._hook_for_profile = _hook_for_profile
