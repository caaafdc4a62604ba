"""_memtally.why -- why is it still alive (doc/python.md, doc/FORMAT.md "kept").

steps.py loads this file by its path, as "_memtally.why", and calls
install(torch, steps) once torch is imported in a process the shim is
loaded in.  For the call sites whose live bytes grow, a search finds a
live object whose memory such a site holds and the shortest chain of
references from a root (a module's global, a running frame's local)
to it, and writes it to the process's file as a "kept" record
(memtally_record), which `memtally leaks` prints under the row.

When: searches find the sites (at steps 2, 3, 5, 8, 12, ..., each about
1.5 times the last: SEARCH_GROWTH); from then on each site met is
followed at every step (memtally_site_live: one call a site), and a
site that has grown over the steps it was followed (GROW_CHECKS rises,
at its highest now, MIN_GROWTH more than when first met, few falls) is
searched for at that step, whatever the step, and written the first
time it is seen growing; once more at exit (atexit, before the
interpreter tears modules down).  Each search, and each one skipped,
is said in a "searched" record, so that a row with no chain can say
why (doc/FORMAT.md "searched").

Objects: torch tensors (the storage's data pointer: a heap block the
shim tracks), bytes, array.array and numpy arrays that own their data;
memtally_owner gives the call site of the block.  Steps: global, local,
key (a dict's), item (a list's, tuple's or set's), attr (an instance's
or a class's __dict__, a tensor's grad_fn), cell (a closure's free
variable), next (an autograd node's next_functions), saved (its
_saved_* tensors), ref (any other reference gc.get_referents reports).

Safety: the search never calls gc.collect(), never calls the program's
code (no getattr, __eq__ or __hash__ of the program's objects: __dict__
is read through the type's own descriptor, containers through their
base type's C methods, attributes of torch's C types only; saved tensors
only while no saved-tensor hook exists; frames' locals from their slots,
never f_locals), keeps its references only while it runs and drops them
before returning, and stops after BUDGET_S seconds or MAX_OBJECTS
objects reached, the clock read inside every expansion.  A failure of its
own is one warning (steps.py say(): into the file) and searching stops;
an exception not its own (steps.py ours(): a signal handler's,
SystemExit, KeyboardInterrupt) propagates unchanged."""
import sys

BUDGET_S = 1.0        # a search's time budget
MAX_OBJECTS = 500000  # and objects reached (each held until the search ends)
GROW_CHECKS = 3       # rises (step to step) that make a site "growing"
MIN_GROWTH = 64 << 10  # and bytes more than when it was first met
SEARCH_GROWTH = 1.5   # the steps searched: each about this times the last
MAX_SITES = 4096      # call sites whose live bytes are followed
MAX_CHAIN = 64        # steps written of a chain
RUN_SHARE = 0.05      # the most of the run's time searches at steps take
GROWTH_SEARCHES = 8   # searches for a site seen growing, past that share

_api = None           # (owner, site_live, record) through ctypes
_torch = None
_live = {}            # stack id -> [first, last, highest, rises, falls] live bytes
_next_at = 2          # the next step searched on schedule
_written = set()      # stack ids written before the exit search
_asked = set()        # stack ids a search was started for, seen growing
_seq = 0
_main_file = None     # __main__.__file__ when installed
_off = False          # a failure: no more searches
_t_installed = 0.0
stats = {'skipped': 0, 'growth_searches': 0, 'searches': 0, 'seconds': 0.0, 'max_seconds': 0.0, 'objects': 0, 'records': 0}


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
    except Exception as e:
        if not _ours(e):
            raise
        try:
            sys.stderr.write('memtally: %s\n' % msg)
            sys.stderr.flush()
        except Exception as e:
            if not _ours(e):
                raise
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
    _watch_saved_hooks(torch)
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
    global _next_at
    try:
        n = int(step)
    except Exception as e:
        if not _ours(e):
            raise
        return
    if _off or _api is None:
        return
    grown = _follow()
    if n >= _next_at:
        _next_at = max(n + 1, int(n * SEARCH_GROWTH + 0.5))
        check(n, False, 'schedule')
    else:
        new = [s for s in grown if s not in _written and s not in _asked]
        if new:
            _asked.update(new)  # one search each, done or skipped
            check(n, False, 'growth')


def _follow():
    """The live bytes of the sites followed, now; the sites growing."""
    live_of = _api[1]
    grown = []
    for s, h in _live.items():
        v = live_of(s)
        if v is None:
            continue
        if v > h[1]:
            h[3] += 1
        elif v < h[1]:
            h[4] += 1
        h[1] = v
        if v > h[2]:
            h[2] = v
        if _growing(h):
            grown.append(s)
    return grown


def _growing(h):
    """Grown over the steps it was followed: GROW_CHECKS rises or more, at
    its highest now, MIN_GROWTH above its first figure, a fall for at
    most every other rise."""
    return h[3] >= GROW_CHECKS and h[1] == h[2] and h[1] - h[0] >= MIN_GROWTH and 2 * h[4] <= h[3]


def _at_exit():
    st = sys.modules.get('_memtally.steps')
    step = None
    if st is not None:
        step = getattr(st, '_count', None) or None  # 0: no step marked
    if not _off and _api is not None:
        _follow()
    check(step, True, 'exit')


def check(step, final, why='schedule'):
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
    if not final and stats['searches'] and stats['seconds'] > RUN_SHARE * (t0 - _t_installed) \
            and (why != 'growth' or stats['growth_searches'] >= GROWTH_SEARCHES):
        stats['skipped'] += 1
        _said(step, final, why, skipped='share')
        return
    if why == 'growth':
        stats['growth_searches'] += 1
    try:
        owner_of, live_of, record = _api
        growing = [s for s, h in _live.items() if _growing(h)]
        found, visited, cut = search(BUDGET_S, False)
        libs = False
        if final and any(s not in found for s in growing):
            libs = True
            more_found, more, cut = search(max(0.0, BUDGET_S - (clock() - t0)), True)
            found, visited = more_found, visited + more
        for s in found:  # followed from now on
            if s not in _live and len(_live) < MAX_SITES:
                v = live_of(s)
                if v is not None:
                    _live[s] = [v, v, v, 0, 0]
        wrote = 0
        for s in growing:
            if s in found and (final or s not in _written):
                _write(s, step, final, found[s], _live[s], clock() - t0)
                _written.add(s)
                wrote += 1
        _said(step, final, why, objects=visited, sites=len(found), growing=len(growing),
              wrote=wrote, ms=int((clock() - t0) * 1000), cut=cut, libs=libs)
        found = None
        stats['objects'] += visited
    except Exception as e:
        if not _ours(e):
            raise
        _off = True
        _warn('the "why is it still alive" search failed (%s: %s); it is off from now on'
              % (type(e).__name__, e))
        _said(step, final, why, skipped='failed')
    dt = clock() - t0
    stats['searches'] += 1
    stats['seconds'] += dt
    stats['max_seconds'] = max(stats['max_seconds'], dt)


def _said(step, final, why, skipped=None, objects=0, sites=0, growing=0, wrote=0, ms=0,
          cut=None, libs=False):
    """A "searched" record: a search done (what it reached, where it was
    cut) or skipped (why), so a row with no chain can say which."""
    import json
    rec = {'type': 'searched', 'final': bool(final), 'why': why}
    if step is not None:
        rec['step'] = step
    if skipped:
        rec['skipped'] = skipped
    else:
        rec.update({'objects': objects, 'sites': sites, 'growing': growing, 'written': wrote,
                    'search_ms': ms, 'libs': bool(libs)})
        if cut:
            rec['cut'] = cut
    try:
        _api[2](json.dumps(rec, separators=(',', ':')).encode())
    except Exception as e:
        if not _ours(e):
            raise


def _write(stack, step, final, found, h, took):
    global _seq
    import json
    chain, nobj = found
    _seq += 1
    rec = {'type': 'kept', 'seq': _seq, 'stack': stack, 'live_bytes': h[1],
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
    except Exception as e:
        if not _ours(e):
            raise
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
        except Exception as e:
            if not _ours(e):
                raise
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
    except Exception as e:
        if not _ours(e):
            raise
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
    except Exception as e:
        if not _ours(e):
            raise
        pass
    cache[key] = w
    return w


# ---- the running frames' locals, never through f_locals ---------------------
#
# On 3.10-3.12 frame.f_locals copies the fast locals into a dict the frame
# keeps (a reference to each local until the next sync: a __del__ runs
# later than without memtally).  The search reads the slots instead, as
# the interpreter holds them: the offset of the first slot is found once
# by a probe frame whose first locals are known objects, each slot is
# read and its object taken in one ctypes call (py_object.value).  A
# slot of a frame of another thread could move while it is read (3.11,
# 3.12: the frame's data lives on that thread's stack until it returns),
# so there only the searching thread's frames are read (3.10: the slots
# live in the frame object itself, every thread's).  3.13's f_locals is a
# proxy that keeps nothing (PEP 667).  A layout the probe does not find:
# no frame's locals are roots.

_frames_how = None    # None: not probed; False: none; 'proxy'; or (slot offset, version)


def _probe_frames():
    v = sys.version_info[:2]
    if v >= (3, 13):
        return 'proxy'
    if v not in ((3, 10), (3, 11), (3, 12)):
        return False
    import ctypes
    vp = ctypes.c_void_p

    def probe(a, b, c):
        f = sys._getframe()
        try:
            return look(f, a, b, c)
        finally:
            # f is this frame's own local: a cycle that kept every frame
            # object under it (f_back) alive until the next collection, and
            # with them their locals (the program's objects: a __del__ ran
            # late)
            f = None

    def look(f, a, b, c):
        if v == (3, 10):
            base, span = id(f), f.__sizeof__()
        else:
            # PyFrameObject.f_frame; the slots follow a header of 72 bytes:
            # words up to 136 lie in this frame (its 11 locals and stack)
            base, span = vp.from_address(id(f) + 24).value, 136
        want = (id(a), id(b), id(c))
        code = id(f.f_code)
        seen_code = False
        for off in range(0, span - 24, 8):
            w = vp.from_address(base + off).value
            if w == code:
                seen_code = True
            if seen_code and (w, vp.from_address(base + off + 8).value,
                              vp.from_address(base + off + 16).value) == want:
                return off
        return None
    try:
        off = probe(object(), object(), object())
    except Exception as e:
        if not _ours(e):
            raise
        return False
    return (off, v) if off is not None else False


def _slot_names(code, v):
    if v == (3, 10):
        return code.co_varnames + code.co_cellvars + code.co_freevars
    names = []
    try:
        for i in range(len(code.co_varnames) + len(code.co_cellvars) + len(code.co_freevars)):
            names.append(code._varname_from_oparg(i))
    except IndexError:
        pass
    return names


def _frame_locals(f, own_thread):
    """(name, value) of a running frame's bound locals (closure cells: their
    contents), read without f_locals; [] where they cannot be read so."""
    global _frames_how
    if _frames_how is None:
        _frames_how = _probe_frames()
    how = _frames_how
    if not how:
        return []
    if how == 'proxy':
        return list(f.f_locals.items())
    off, v = how
    if v != (3, 10) and not own_thread:
        return []
    import ctypes
    code = f.f_code
    cells = code.co_cellvars + code.co_freevars
    base = id(f) if v == (3, 10) else ctypes.c_void_p.from_address(id(f) + 24).value
    out = []
    for i, name in enumerate(_slot_names(code, v)):
        try:
            val = ctypes.py_object.from_address(base + off + 8 * i).value
        except ValueError:  # NULL: unbound
            continue
        if type(val) is _CELL and name in cells:
            try:
                val = val.cell_contents
            except ValueError:
                continue
        out.append((name, val))
    return out


def _roots(libs):
    """Lists of (how, name, object, where), the roots, the program's
    first: the running frames' locals (every thread, innermost first,
    memtally's own frames skipped; _frame_locals), the globals of
    __main__ and of the program's other modules (those outside Python's
    prefix and any site-packages or dist-packages); then, when libs, the
    other modules' globals (made only when the search comes to them)."""
    import os
    import _thread
    here = os.path.dirname(os.path.abspath(__file__))
    cache = {}
    mods = [m for m in list(sys.modules.values()) if type(m) is type(sys)]
    main = sys.modules.get('__main__')
    me = _thread.get_ident()
    frames = []
    for tid, f in list(sys._current_frames().items()):
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith(here) and not fn.endswith('sitecustomize.py'):
                frames.append((f, tid == me))
            f = f.f_back
    out = []
    main_dict = type(sys).__dict__['__dict__'].__get__(main) if main is not None else None
    for f, own in frames:
        if f.f_globals is main_dict and f.f_code.co_name == '<module>':
            continue  # __main__'s globals: below
        where = '%s:%d %s()' % (f.f_code.co_filename.rsplit('/', 1)[-1], f.f_lineno, f.f_code.co_name)
        for k, v in _frame_locals(f, own):
            out.append(('local', k, v, where))
    frames = None
    user, lib = [], []
    prefixes = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)
    for m in mods:
        if m is main:
            continue
        f = type(sys).__dict__['__dict__'].__get__(m).get('__file__')
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
            for k, v in list(dict.items(d)):
                if type(k) is str and k.startswith('__') and k.endswith('__'):
                    continue
                out.append(('global', k, v, (m, k, cache)))
        yield out
        out = []


# ---- the search -------------------------------------------------------------

_HOWS = ('global', 'local', 'key', 'item', 'attr', 'cell', 'next', 'saved', 'ref')
_H = {h: i for i, h in enumerate(_HOWS)}
_KEY, _ITEM, _ATTR, _CELLH, _NEXT, _SAVED, _REF = (_H[h] for h in ('key', 'item', 'attr', 'cell', 'next', 'saved', 'ref'))
def _cell_type():
    x = 0
    return type((lambda: x).__closure__[0])


_CELL = _cell_type()
_saved_hooks = False  # saved_tensors_hooks seen in this process: saved tensors are not read


def _watch_saved_hooks(torch):
    """Saved tensors are read (grad_fn._saved_*) only while no
    saved-tensor hook can run on the read: this notes, before it
    happens, each push of default hooks (torch.autograd.graph.
    saved_tensors_hooks, save_on_cpu, checkpointing) and each hook put on
    one saved tensor (SavedTensor.register_hooks); the wrappers call
    torch's own with the same arguments.  Where they cannot be put, saved
    tensors are never read."""
    global _saved_hooks
    try:
        ag = torch._C._autograd
        push = ag._push_saved_tensors_default_hooks
        st = ag.SavedTensor
        reg = st.register_hooks
        if getattr(push, '_memtally', False):
            return

        def _push_saved_tensors_default_hooks(*a, **k):
            global _saved_hooks
            _saved_hooks = True
            return push(*a, **k)

        def register_hooks(self, *a, **k):
            global _saved_hooks
            _saved_hooks = True
            return reg(self, *a, **k)
        _push_saved_tensors_default_hooks._memtally = True
        ag._push_saved_tensors_default_hooks = _push_saved_tensors_default_hooks
        graph = sys.modules.get('torch.autograd.graph')
        if graph is not None and type(sys).__dict__['__dict__'].__get__(graph).get(
                '_push_saved_tensors_default_hooks') is push:
            graph._push_saved_tensors_default_hooks = _push_saved_tensors_default_hooks
        st.register_hooks = register_hooks
    except Exception as e:
        if not _ours(e):
            raise
        _saved_hooks = True


def search(budget, libs):
    """{stack id: (chain, objects)} for the stacks of the objects reached,
    and how many objects were visited: each stack's chain leads from the
    root that reaches the most of its objects (objects: how many) to the
    nearest of them.  Breadth first, over at most MAX_OBJECTS objects
    reached, the clock read inside each object's expansion (every 256
    references) as well as between objects: a list, dict or chain of any
    size costs no more than the budget; what it keeps while it runs is a
    few words an object reached (its position, its parent's, how), all
    dropped before it returns.  Never runs the program's code: no
    property, __getattr__, __eq__ or __hash__ of the program's objects
    (types are compared by identity, objects known by id()), containers
    read through the base type's own C methods, saved tensors only while
    no saved-tensor hook exists (_watch_saved_hooks)."""
    import gc
    import time
    from array import array  # built in: never the program's module
    torch = _torch
    owner_of = _api[0]
    clock = time.perf_counter
    deadline = clock() + budget
    ndarray = getattr(sys.modules.get('numpy'), 'ndarray', None)
    array_t = array
    deque = getattr(sys.modules.get('_collections'), 'deque', None)
    saved_ok = not _saved_hooks
    tensors_ok = True
    try:
        mode = getattr(torch._C, '_is_torch_function_mode_enabled', None)
        if mode is not None and mode():
            tensors_ok = False  # a tensor's attributes would run the mode's __torch_function__
    except Exception as e:
        if not _ours(e):
            raise
        tensors_ok = False
    saved_names = {}  # autograd node type -> its _saved_* attributes
    unpack_failed = {}  # (node type, attribute) -> failures, -1: it succeeded
    me = {id(_live), id(_written), id(_asked), id(stats)}
    atoms = {id(t) for t in (str, int, float, bool, complex, type(None))}
    T, P = torch.Tensor, getattr(torch.nn, 'Parameter', torch.Tensor)
    FN, MOD = type(search), type(sys)

    # the objects reached, by position: objs holds them (ids stay unique
    # while the search runs), par the parent's position (-1: a root), how
    # and what (an index, else names: a key, an attribute's name), root
    # the root's position; wheres: each root's where
    seen, objs, names = set(), [], []
    par, idx, root = array('q'), array('q'), array('q')
    how = bytearray()
    wheres = {}
    found = {}

    def addr_of(o):
        t = type(o)
        if t is T or t is P:  # a subclass's attributes may run its code
            if not tensors_ok:
                return 0
            try:
                if o.device.type != 'cpu':
                    return 0
                # the storage's start (the block): no storage object made
                return o.data_ptr() - o.storage_offset() * o.element_size()
            except Exception as e:
                if not _ours(e):
                    raise
                return 0
        if t is bytes and len(o) >= 64:
            return id(o)
        if t is array_t:
            return array_t.buffer_info(o)[0]
        if ndarray is not None and t is ndarray:
            try:
                if o.flags.owndata:
                    return o.__array_interface__['data'][0]
            except Exception as e:
                if not _ours(e):
                    raise
            return 0
        return 0

    def children(o):
        """(how, index, name, child) for o's references, one at a time."""
        t = type(o)
        if t is list or t is tuple or (t is not T and t is not P and (issubclass(t, list) or issubclass(t, tuple))):
            it = list.__iter__(o) if issubclass(t, list) else tuple.__iter__(o)
            i = 0
            for v in it:
                yield _ITEM, i, None, v
                i += 1
            if t is list or t is tuple:
                return
        elif t is dict or issubclass(t, dict):
            # read one item at a time: another thread may change it
            # meanwhile (RuntimeError: the rest of it is not followed)
            try:
                for k, v in dict.items(o):
                    yield _KEY, -1, k, v
            except RuntimeError as e:
                if not _ours(e):
                    raise
            if t is dict:
                return
        elif issubclass(t, set) or issubclass(t, frozenset):
            try:
                for v in (set.__iter__(o) if issubclass(t, set) else frozenset.__iter__(o)):
                    yield _ITEM, -1, None, v
            except RuntimeError as e:
                if not _ours(e):
                    raise
            if t is set or t is frozenset:
                return
        elif deque is not None and issubclass(t, deque):
            i = 0
            try:
                for v in deque.__iter__(o):
                    yield _ITEM, i, None, v
                    i += 1
            except RuntimeError as e:
                if not _ours(e):
                    raise
            if t is deque:
                return
        elif t is T or t is P:
            if tensors_ok:
                r = []
                try:
                    g = o.grad_fn
                    if g is not None:
                        r.append(('grad_fn', g))
                    if o.is_leaf and o.grad is not None:
                        r.append(('grad', o.grad))
                    b = o._base
                    if b is not None:
                        r.append(('_base', b))
                except Exception as e:
                    if not _ours(e):
                        raise
                for k, v in r:
                    yield _ATTR, -1, k, v
                d = _inst_dict(o)
                if d:
                    for k, v in dict.items(d):
                        yield _ATTR, -1, k, v
            return
        elif t is FN:
            cl = o.__closure__
            if cl:
                for nm, c in zip(o.__code__.co_freevars, cl):
                    try:
                        v = c.cell_contents
                    except ValueError:
                        continue
                    yield _CELLH, -1, nm, v
            for v in (o.__defaults__, o.__kwdefaults__):
                if v:
                    yield _REF, -1, '__defaults__', v
            return
        elif t is MOD:
            return  # modules are roots already
        elif t is _CELL:
            try:
                v = o.cell_contents
            except ValueError:
                return
            yield _REF, -1, None, v
            return
        elif issubclass(t, type):  # not isinstance: it reads o.__class__
            d = type.__dict__['__dict__'].__get__(o)
            for k, v in list(d.items()):
                if not (type(k) is str and k.startswith('__') and k.endswith('__')):
                    yield _ATTR, -1, k, v
            return
        else:
            nf = _static(t, 'next_functions')
            if type(nf) is _GETSET:  # an autograd node: torch's C getters, no Python code
                r = []
                try:
                    for i, (fn, _) in enumerate(o.next_functions):
                        if fn is not None:
                            r.append((_NEXT, i, None, fn))
                    names_t = saved_names.get(t) if saved_ok else ()
                    if names_t is None:
                        names_t = saved_names[t] = [
                            k for k in type.__dict__['__dict__'].__get__(t)
                            if type(k) is str and k.startswith('_saved_') and not k.endswith(_NOT_TENSORS)]
                    for k in names_t:
                        if unpack_failed.get((t, k), 0) >= 3:
                            continue  # after 3 failures and no success
                        try:
                            v = _static(t, k).__get__(o)
                        except Exception as e:
                            if not _ours(e):
                                raise
                            # a tensor modified in place since it was saved
                            # (a weight the optimizer stepped), or freed by
                            # backward: torch's error costs ~1 ms to make
                            if unpack_failed.get((t, k), 0) >= 0:
                                unpack_failed[(t, k)] = unpack_failed.get((t, k), 0) + 1
                            continue
                        unpack_failed[(t, k)] = -1  # it succeeds: always tried
                        r.append((_SAVED, -1, k, v))
                    var = _static(t, 'variable')
                    if type(var) is _GETSET:
                        r.append((_ATTR, -1, 'variable', var.__get__(o)))
                except Exception as e:
                    if not _ours(e):
                        raise
                for x in r:
                    yield x
                return
        # any other object (and what a container subclass holds besides):
        # its __dict__ by name, then what gc reports
        d = _inst_dict(o)
        if d is not None:
            for k, v in dict.items(d):
                yield _ATTR, -1, k, v
        if issubclass(t, (list, tuple, dict, set, frozenset)) or (deque is not None and issubclass(t, deque)):
            return  # a container subclass: its items and attributes above
        for v in gc.get_referents(o):
            if v is not d and type(v) is not type:
                yield _REF, -1, None, v

    visited = 0
    roots = None
    o = c = it = None
    try:
        # the program's roots first (frames, __main__, its own modules),
        # then the libraries': a chain from the program's is preferred
        roots = _roots(libs)
        pos = 0
        tick = 0
        full = False
        late = False
        for group in roots:
            for h, name, o, where in group:
                k = id(o)
                if k in seen or k in me:
                    continue
                if len(objs) >= MAX_OBJECTS:
                    full = True
                    break
                p = len(objs)
                seen.add(k)
                objs.append(o)
                par.append(-1)
                how.append(_H[h])
                idx.append(-1)
                names.append(name)
                root.append(p)
                wheres[p] = where
            group = None
            while pos < len(objs) and not late:
                if clock() >= deadline:
                    late = True
                    break
                o = objs[pos]
                a = addr_of(o)
                if a:
                    s = owner_of(a)
                    if s:
                        by_root = found.setdefault(s, {})
                        r = by_root.get(root[pos])
                        if r is None:
                            by_root[root[pos]] = [1, pos]
                        else:
                            r[0] += 1
                if not full and id(type(o)) not in atoms:
                    it = children(o)
                    for h, i, name, c in it:
                        tick += 1
                        if not tick & 255 and clock() >= deadline:
                            late = True
                            break
                        k = id(c)
                        if k in seen or k in me or id(type(c)) in atoms:
                            continue
                        seen.add(k)
                        objs.append(c)
                        par.append(pos)
                        how.append(h)
                        idx.append(i)
                        names.append(name)
                        root.append(root[pos])
                        if len(objs) >= MAX_OBJECTS:
                            full = True
                            break
                    it.close()
                    it = c = None
                pos += 1
            visited = pos
            if late:
                break
        o = None
        # each stack's holder: the root that reaches the most of its
        # objects (the first reached, so the nearest, on a tie), by the
        # chain to the first of them
        for s, by_root in found.items():
            best = None
            for r in by_root.values():
                if best is None or r[0] > best[0]:
                    best = r
            found[s] = (_chain(best[1], objs, par, how, idx, names, wheres), best[0])
    finally:
        if it is not None:
            it.close()
        if roots is not None:
            roots.close()
        roots = o = c = it = group = None
        seen.clear()
        objs.clear()
        names.clear()
        wheres.clear()
        saved_names.clear()
        unpack_failed.clear()
    return found, visited, ('time' if late else 'objects' if full else None)


def _chain(k, objs, par, how, idx, names, wheres):
    steps = []
    while k >= 0 and len(steps) < 4 * MAX_CHAIN:
        h = _HOWS[how[k]]
        if h in ('key', 'attr'):
            name = _name(names[k])
        elif idx[k] >= 0:
            name = str(idx[k])
        else:
            name = names[k] if type(names[k]) is str else ''
        st = {'how': h, 'name': name, 'type': _tname(objs[k])}
        where = wheres.get(k)
        if type(where) is tuple:
            where = _where_global(*where)
        if where:
            st['where'] = where
        steps.append(st)
        k = par[k]
    steps.reverse()
    return steps
