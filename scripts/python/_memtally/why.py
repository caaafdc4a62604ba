"""_memtally.why -- why is it still alive (doc/python.md, doc/FORMAT.md "kept").

steps.py loads this file by its path, as "_memtally.why", and calls
install(torch, steps) once torch is imported in a process the shim is
loaded in.  For the call sites whose live bytes grow, a search finds a
live object whose memory such a site holds and the shortest chain of
references from a root (a module's global, a running frame's local)
to it, and writes it to the process's file as a "kept" record
(memtally_record), which `memtally leaks` prints under the row.

When: at steps 2, 4, 8, 16, ... (each power of two; steps.py's on_step)
and once at exit (atexit, before the interpreter tears modules down).
Each search notes the live bytes of every call site it has met
(memtally_site_live); a site is growing once its live bytes rose at
each of the last GROW_CHECKS checks, and is written the first time it
is seen growing and again at exit.

Objects: torch tensors (the storage's data pointer: a heap block the
shim tracks), bytes, array.array and numpy arrays that own their data;
memtally_owner gives the call site of the block.  Steps: global, local,
key (a dict's), item (a list's, tuple's or set's), attr (an instance's
or a class's __dict__, a tensor's grad_fn), cell (a closure's free
variable), next (an autograd node's next_functions), saved (its
_saved_* tensors), ref (any other reference gc.get_referents reports).

Safety: the search never calls gc.collect(), never calls the program's
code (no getattr on the program's objects: __dict__ is read through
the type's own descriptor, attributes of torch's C types only), keeps
its references only while it runs and drops them before returning, and
stops after BUDGET_S seconds or MAX_OBJECTS objects.  A failure is one
warning (steps.py say(): into the file) and searching stops; nothing reaches the program."""
import sys

BUDGET_S = 1.0        # a search's time budget
MAX_OBJECTS = 500000  # and objects visited (each held until the search ends)
GROW_CHECKS = 3       # rises in a row that make a site "growing"
MAX_SITES = 4096      # call sites whose live bytes are followed
MAX_CHAIN = 64        # steps written of a chain
RUN_SHARE = 0.05      # the most of the run's time searches at steps take

_api = None           # (owner, site_live, record) through ctypes
_torch = None
_live = {}            # stack id -> live bytes at the last checks (a few)
_written = set()      # stack ids written before the exit search
_seq = 0
_main_file = None     # __main__.__file__ when installed
_off = False          # a failure: no more searches
_t_installed = 0.0
stats = {'skipped': 0, 'searches': 0, 'seconds': 0.0, 'max_seconds': 0.0, 'objects': 0, 'records': 0}


def _ours(e):
    """steps.py's ours(e): the search's own failure (reported, searching
    stops), or an exception that must propagate unchanged: a signal
    handler's, any BaseException that is not an Exception (doc/python.md
    "Exceptions")."""
    st = sys.modules.get('_memtally.steps')
    return st.ours(e) if st is not None else isinstance(e, Exception)


def _warn(msg):
    """As steps.py's say() says it (the file, not stderr)."""
    try:
        sys.modules['_memtally.steps'].say(msg)
    except Exception:
        try:
            sys.stderr.write('memtally: %s\n' % msg)
            sys.stderr.flush()
        except Exception:
            pass


def _shim_api():
    import ctypes
    try:
        lib = ctypes.CDLL(None)
        owner, live, record = lib.memtally_owner, lib.memtally_site_live, lib.memtally_record
    except (OSError, AttributeError):
        return None
    owner.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint)]
    owner.restype = ctypes.c_int
    live.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_longlong)]
    live.restype = ctypes.c_int
    record.argtypes = [ctypes.c_char_p]
    record.restype = ctypes.c_int
    sid, nbytes = ctypes.c_uint(0), ctypes.c_longlong(0)

    def owner_of(addr):
        if not addr or owner(addr, ctypes.byref(sid)) != 0:
            return 0
        return sid.value

    def live_of(stack):
        return nbytes.value if live(stack, ctypes.byref(nbytes)) == 0 else None
    return owner_of, live_of, record


def install(torch, steps):
    """Search at steps 2^k (steps.on_step) and at exit."""
    global _api, _torch, _main_file, _t_installed
    _api = _shim_api()
    if _api is None:
        return False
    _torch = torch
    _t_installed = __import__('time').perf_counter()
    f = getattr(sys.modules.get('__main__'), '__dict__', {}).get('__file__')
    if type(f) is str:
        import os
        _main_file = os.path.abspath(f)
    steps.on_step(_on_step)
    import atexit
    atexit.register(_at_exit)
    return True


def _on_step(step):
    try:
        n = int(step)
    except Exception:
        return
    if n >= 2 and not n & (n - 1):
        check(n, False)


def _at_exit():
    st = sys.modules.get('_memtally.steps')
    step = None
    if st is not None:
        step = getattr(st, '_count', None)
    check(step, True)


def check(step, final):
    """One check: the live bytes of the sites met so far, a search from
    the program's roots (from every module's too at exit, when a growing
    site has no chain from the program's), records for the growing sites
    found.  A check at a step is skipped while the searches have taken
    more than RUN_SHARE of the time since install.  Never raises."""
    global _off
    if _off or _api is None:
        return
    clock = __import__('time').perf_counter
    t0 = clock()
    if not final and stats['searches'] and stats['seconds'] > RUN_SHARE * (t0 - _t_installed):
        stats['skipped'] += 1
        return
    try:
        owner_of, live_of, record = _api
        growing = []
        for s, h in _live.items():
            v = live_of(s)
            if v is None:
                continue
            h.append(v)
            del h[:-(GROW_CHECKS + 2)]
            # at exit the last step's figure may stand (a run that ends
            # on a check's step): rose at the checks before, held since
            g = h[:-1] if final and len(h) > GROW_CHECKS + 1 and h[-1] == h[-2] else h[-(GROW_CHECKS + 1):]
            if len(g) > GROW_CHECKS and all(g[i] < g[i + 1] for i in range(len(g) - 1)):
                growing.append(s)
        found, visited = search(BUDGET_S, False)
        if final and any(s not in found for s in growing):
            found, more = search(max(0.0, BUDGET_S - (clock() - t0)), True)
            visited += more
        for s in found:  # followed from now on
            if s not in _live and len(_live) < MAX_SITES:
                v = live_of(s)
                if v is not None:
                    _live[s] = [v]
        for s in growing:
            if s in found and (final or s not in _written):
                _write(s, step, final, found[s], _live[s], clock() - t0)
                _written.add(s)
        found = None
        stats['objects'] += visited
    except Exception as e:
        if not _ours(e):
            raise
        _off = True
        _warn('the "why is it still alive" search failed (%s: %s); it is off from now on'
              % (type(e).__name__, e))
    dt = clock() - t0
    stats['searches'] += 1
    stats['seconds'] += dt
    stats['max_seconds'] = max(stats['max_seconds'], dt)


def _write(stack, step, final, found, h, took):
    global _seq
    import json
    chain, nobj = found
    _seq += 1
    rec = {'type': 'kept', 'seq': _seq, 'stack': stack, 'live_bytes': h[-1],
           'objects': nobj, 'final': bool(final), 'search_ms': int(took * 1000),
           'chain': chain[:MAX_CHAIN]}
    if step is not None:
        rec['step'] = step
    line = json.dumps(rec, separators=(',', ':'), ensure_ascii=True)
    if len(line) > 65536:
        rec['chain'] = chain[:8]
        line = json.dumps(rec, separators=(',', ':'), ensure_ascii=True)
    if _api[2](line.encode()) == 0:
        stats['records'] += 1


# ---- the search -------------------------------------------------------------

def _tname(o):
    """o's class's qualified name, through type's own descriptor (a
    metaclass's property is never run)."""
    try:
        n = _QUALNAME(type(o))
    except Exception:
        n = None
    return n if type(n) is str else '?'


def _static(t, name):
    """name in type t's own dicts along its MRO (no descriptor run)."""
    for k in type.__dict__['__mro__'].__get__(t):
        d = type.__dict__['__dict__'].__get__(k)
        if name in d:
            return d[name]
    return None


# _saved_* attributes that are never tensors (sizes, strides, scalars):
# each read makes a Python object, whose allocation the shim records
_NOT_TENSORS = ('_raw', '_sizes', '_strides', '_alpha', '_beta', '_dim', '_keepdim',
                '_other_scalar_type', '_self_scalar_type', '_padding', '_stride', '_dilation')

_GETSET = type(type.__dict__['__dict__'])
_QUALNAME = type.__dict__['__qualname__'].__get__


def _inst_dict(o):
    """An instance's __dict__ through the standard descriptor, else None."""
    d = _static(type(o), '__dict__')
    if type(d) is _GETSET:
        try:
            v = d.__get__(o)
        except Exception:
            return None
        return v if type(v) is dict else None
    return None


def _name(k):
    if type(k) is str:
        return k[:80]
    if type(k) in (int, float, bool) or k is None:
        return repr(k)
    if type(k) is tuple and len(k) <= 4 and all(type(x) in (str, int, float) for x in k):
        return repr(k)[:80]
    return '<%s>' % _tname(k)


def _where_global(mod, name, cache):
    """file:line where a module's global is first assigned, or file."""
    f = None
    try:
        md = type(mod).__dict__['__dict__'].__get__(mod) if type(mod) is not dict else mod
        f = md.get('__file__')
    except Exception:
        pass
    if type(f) is not str and mod is sys.modules.get('__main__'):
        f = _main_file  # gone from __main__ by the time atexit runs
    if type(f) is not str:
        return None
    key = (f, name)
    if key in cache:
        return cache[key]
    base = f.rsplit('/', 1)[-1]
    w = base
    try:
        lines = cache.get(f)
        if lines is None:
            with open(f, 'rb') as fh:
                lines = fh.read(1 << 20).decode('utf-8', 'replace').splitlines()
            cache[f] = lines
        import re
        pat = re.compile(r'^(%s)\s*(:[^=]*)?=[^=]|^(def|class)\s+%s\b|^(import|from)\s.*\b%s\b'
                         % (re.escape(name), re.escape(name), re.escape(name)))
        # at column 0 first, then indented (a global assigned in a loop)
        hit = [i for i, l in enumerate(lines) if pat.match(l)] or \
            [i for i, l in enumerate(lines) if pat.match(l.lstrip())]
        if hit:
            w = '%s:%d' % (base, hit[0] + 1)
    except Exception:
        pass
    cache[key] = w
    return w


def _roots(libs):
    """Lists of (how, name, object, where), the roots, the program's
    first: the running frames' locals (every thread, innermost first,
    memtally's own frames skipped), the globals of __main__ and of the
    program's other modules (those outside Python's prefix and any
    site-packages or dist-packages); then, when libs, the other modules'
    globals (made only when the search comes to them)."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    cache = {}
    mods = [m for m in list(sys.modules.values()) if type(m) is type(sys)]
    main = sys.modules.get('__main__')
    frames = []
    for tid, f in list(sys._current_frames().items()):
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith(here) and not fn.endswith('sitecustomize.py'):
                frames.append(f)
            f = f.f_back
    out = []
    for f in frames:
        where = '%s:%d' % (f.f_code.co_filename.rsplit('/', 1)[-1], f.f_lineno)
        if f.f_globals is getattr(main, '__dict__', None) and f.f_code.co_name == '<module>':
            continue  # __main__'s globals: below
        try:
            loc = f.f_locals
        except Exception:
            continue
        for k, v in list(loc.items()):
            out.append(('local', '%s' % k, v, where + ' ' + f.f_code.co_name + '()'))
    user, lib = [], []
    prefixes = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)
    for m in mods:
        if m is main:
            continue
        f = getattr(m, '__dict__', {}).get('__file__')
        if type(f) is str and not f.startswith(prefixes) and 'packages/' not in f and \
                not f.startswith(here):
            user.append(m)
        elif not (type(f) is str and f.startswith(here)):
            lib.append(m)
    for gi, group in enumerate((([main] if main is not None else []) + user, lib)):
        if gi and not libs:
            break
        for m in group:
            d = type(sys).__dict__['__dict__'].__get__(m)
            for k, v in list(d.items()):
                if type(k) is str and k.startswith('__') and k.endswith('__'):
                    continue
                out.append(('global', k, v, (m, k, cache)))
        yield out
        out = []


def search(budget, libs):
    """{stack id: (chain, objects)} for the stacks of the objects reached,
    and how many objects were visited: each stack's chain leads from the
    root that reaches the most of its objects (objects: how many) to the
    nearest of them."""
    import gc
    import time
    torch = _torch
    owner_of = _api[0]
    clock = time.perf_counter
    deadline = clock() + budget
    ndarray = getattr(sys.modules.get('numpy'), 'ndarray', None)
    array_t = getattr(sys.modules.get('array'), 'array', None)
    saved_names = {}  # autograd node type -> its _saved_* attributes
    unpack_failed = {}  # (node type, attribute) -> failures, -1: it succeeded
    me = {id(_live), id(_written), id(stats)}

    # parent[id] = (parent id, how, name, type name, where); objs keeps
    # every object reached alive until the search ends (ids stay unique)
    parent, objs, found = {}, {}, {}
    T, P = torch.Tensor, getattr(torch.nn, 'Parameter', torch.Tensor)

    def addr_of(o):
        t = type(o)
        if t is T or t is P:  # a subclass's attributes may run its code
            try:
                if o.device.type != 'cpu':
                    return 0
                # the storage's start (the block): no storage object made
                return o.data_ptr() - o.storage_offset() * o.element_size()
            except Exception:
                return 0
        if t is bytes and len(o) >= 64:
            return id(o)
        if array_t is not None and t is array_t:
            return o.buffer_info()[0]
        if ndarray is not None and t is ndarray:
            try:
                if o.flags.owndata:
                    return o.__array_interface__['data'][0]
            except Exception:
                return 0
        return 0

    def children(o):
        """(how, name, child) for o's references, named where we can."""
        t = type(o)
        if t is dict:
            return [('key', _name(k), v) for k, v in list(dict.items(o))]
        if t is list or t is tuple:
            return [('item', str(i), v) for i, v in enumerate(list(o) if t is list else o)]
        if t is set or t is frozenset:
            return [('item', '', v) for v in list(o)]
        if t is T or t is P:
            r = []
            try:
                g = o.grad_fn
                if g is not None:
                    r.append(('attr', 'grad_fn', g))
                if o.is_leaf and o.grad is not None:
                    r.append(('attr', 'grad', o.grad))
                b = o._base
                if b is not None:
                    r.append(('attr', '_base', b))
            except Exception:
                pass
            d = _inst_dict(o)
            if d:
                r.extend(('attr', _name(k), v) for k, v in list(d.items()))
            return r
        if t is type(search):
            r = []
            cl = o.__closure__
            if cl:
                for nm, c in zip(o.__code__.co_freevars, cl):
                    try:
                        r.append(('cell', nm, c.cell_contents))
                    except ValueError:
                        pass
            for v in (o.__defaults__, o.__kwdefaults__):
                if v:
                    r.append(('ref', '__defaults__', v))
            return r
        if t is type(sys):
            return []  # modules are roots already
        if issubclass(t, type):  # not isinstance: it reads o.__class__
            try:
                d = type.__dict__['__dict__'].__get__(o)
                return [('attr', _name(k), v) for k, v in list(d.items())
                        if not (type(k) is str and k.startswith('__') and k.endswith('__'))]
            except Exception:
                return []
        nf = _static(t, 'next_functions')
        if type(nf) is _GETSET:  # an autograd node: torch's C getter, no Python code
            r = []
            try:
                for i, (fn, _) in enumerate(o.next_functions):
                    if fn is not None:
                        r.append(('next', str(i), fn))
                names = saved_names.get(t)
                if names is None:
                    names = saved_names[t] = [
                        k for k in type.__dict__['__dict__'].__get__(t)
                        if k.startswith('_saved_') and not k.endswith(_NOT_TENSORS)]
                for k in names:
                    if unpack_failed.get((t, k), 0) >= 3:
                        continue  # after 3 failures and no success
                    try:
                        v = getattr(o, k)
                    except Exception:
                        # a tensor modified in place since it was saved
                        # (a weight the optimizer stepped), or freed by
                        # backward: torch's error costs ~1 ms to make
                        if unpack_failed.get((t, k), 0) >= 0:
                            unpack_failed[(t, k)] = unpack_failed.get((t, k), 0) + 1
                        continue
                    unpack_failed[(t, k)] = -1  # it succeeds: always tried
                    r.append(('saved', k, v))
                if type(_static(t, 'variable')) is _GETSET:
                    r.append(('attr', 'variable', o.variable))
            except Exception:
                pass
            return r
        d = _inst_dict(o)
        if d is not None:
            r = [('attr', _name(k), v) for k, v in list(d.items())]
            try:
                r.extend(('ref', '', v) for v in gc.get_referents(o) if v is not d and
                         type(v) is not type)
            except Exception:
                pass
            return r
        try:
            return [('ref', '', v) for v in gc.get_referents(o)]
        except Exception:
            return []

    atoms = (str, int, float, bool, bytes, type(None))
    visited = 0
    nxt = None
    try:
        # the program's roots first (frames, __main__, its own modules),
        # then the libraries': a chain from the program's is preferred
        for group in _roots(libs):
            level = []
            for how, name, o, where in group:
                k = id(o)
                if k in parent or k in me:
                    continue
                parent[k] = (None, how, name, _tname(o), where, k)
                objs[k] = o
                level.append(o)
            while level and clock() < deadline and visited < MAX_OBJECTS:
                nxt = []
                for o in level:
                    visited += 1
                    if not visited & 255 and clock() >= deadline:
                        break
                    a = addr_of(o)
                    if a:
                        s = owner_of(a)
                        if s:
                            k = id(o)
                            by_root = found.setdefault(s, {})
                            r = by_root.get(parent[k][5])
                            if r is None:
                                by_root[parent[k][5]] = [1, k]
                            else:
                                r[0] += 1
                    if type(o) in atoms:
                        continue
                    for how, name, c in children(o):
                        k = id(c)
                        if k in parent or k in me or type(c) in atoms and type(c) is not bytes:
                            continue
                        parent[k] = (id(o), how, name, _tname(c), None, parent[id(o)][5])
                        objs[k] = c
                        nxt.append(c)
                level = nxt
        # each stack's holder: the root that reaches the most of its
        # objects (the first reached, so the nearest, on a tie), by the
        # chain to the first of them
        for s, by_root in found.items():
            best = None
            for r in by_root.values():
                if best is None or r[0] > best[0]:
                    best = r
            found[s] = (_chain(parent, best[1]), best[0])
    finally:
        level = nxt = o = c = None
        objs.clear()
        parent.clear()
    return found, visited


def _chain(parent, k):
    steps = []
    while k is not None and len(steps) < 4 * MAX_CHAIN:
        p, how, name, tn, where, _ = parent[k]
        st = {'how': how, 'name': name, 'type': tn}
        if type(where) is tuple:
            where = _where_global(*where)
        if where:
            st['where'] = where
        steps.append(st)
        k = p
    steps.reverse()
    return steps
