"""A double of PyTorch's CUDA memory API, for tests on machines without a GPU
(imported as `torch` with this folder first on PYTHONPATH).  Nothing of the
real torch is used; what it follows, and from which versions:

 - the caching allocator (c10/cuda/CUDACachingAllocator.cpp, 2.0 - 2.5):
   sizes rounded to 512 bytes; the small pool (<= 1 MiB) in 2 MiB segments,
   the large pool in 20 MiB segments below 10 MiB and the size rounded to
   2 MiB above; best fit among free blocks, split when the rest is >= 512
   bytes (small) or > 1 MiB (large); a freed block merges with free
   neighbours; when cudaMalloc fails: release every wholly free segment
   (release_cached_blocks; release_available_cached_blocks does nothing
   with the default max_split_size) and retry once; a second failure
   records an `oom` trace entry, calls the OOM observers with (device,
   size, allowed memory if set_per_process_memory_fraction was called
   else the device's total, the driver's free bytes), then raises
   torch.cuda.OutOfMemoryError; with a memory fraction set, a segment that
   would pass the allowed memory fails without a driver call;
   expandable_segments:True (2.1+): one segment per pool, address space
   from cuMemAddressReserve, grown by 2 MiB (small) or 20 MiB (large) pages
   made with cuMemCreate (all of a growth first; on an OOM those made are
   released unmapped) and then mapped with cuMemMap, the free pages at its
   end unmapped and released by release_cached_blocks;
 - torch.cuda.memory._snapshot() (torch/csrc/cuda/memory_snapshot.cpp,
   2.1 - 2.5): {"segments": [{device, address, total_size, allocated_size,
   active_size, requested_size, stream, segment_type, segment_pool_id,
   is_expandable, frames, blocks: [{address, size, requested_size, state,
   frames}]}], "device_traces": [[{action, addr | device_free (oom), size,
   stream, time_us, frames}]]}; 2.0 (torch/csrc/cuda/Module.cpp): segments
   without requested_size, is_expandable or frames, blocks without address
   or requested_size, frames in a block's `history`
   ([{addr, real_size, frames}]), trace entries without time_us;
   TORCH_DOUBLE_VERSION=2.0 selects it (default 2.3.0);
 - torch.cuda.memory._record_memory_history: 2.1+ (enabled="all",
   context="all", stacks="all", max_entries, device); 2.0 (enabled: bool,
   record_context, trace_alloc_max_entries, trace_alloc_record_context,
   device, record_context_cpp); Python frames innermost first, the trace a
   ring of max_entries; it initialises CUDA (lazyInitCUDA), as torch's does;
 - torch.optim.optimizer.register_optimizer_step_post_hook(hook) (2.0+:
   hook(optimizer, args, kwargs) after each Optimizer.step), with an
   Optimizer whose step does nothing else (SGD);
 - torch._C._cuda_attach_out_of_memory_observer(fn) (2.0+),
   torch._C._cuda_memoryStats(device) (the nested dict: "allocated_bytes",
   "reserved_bytes", "active_bytes", "inactive_split_bytes", ... each
   {"all", "small_pool", "large_pool"} of {current, peak, allocated,
   freed}), torch.cuda.get_allocator_backend() ("native", or
   "cudaMallocAsync" from PYTORCH_CUDA_ALLOC_CONF: then history and the
   observer raise RuntimeError as torch's do), torch.cuda._lazy_call /
   _lazy_init / is_initialized (queued calls run at the end of the lazy
   initialisation; an exception there fails it).

Device memory comes from the driver named by FAKE_CUDA_LIB (default
libcuda.so.1: under the tests, test/fakecuda's), through ctypes: dlopen and
dlsym, one of the routes real programs take.  Tensors are torch.empty(n,
device='cuda[:d]') (n bytes); dropping the last reference frees."""
import ctypes, os, sys, time, types

__version__ = os.environ.get('TORCH_DOUBLE_VERSION', '2.3.0')
_V = tuple(int(x) for x in __version__.split('.')[:2])
_conf = os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')
_BACKEND = 'cudaMallocAsync' if 'backend:cudaMallocAsync' in _conf else 'native'
_EXPANDABLE = 'expandable_segments:True' in _conf and _V >= (2, 1)

MIB = 1 << 20
K_SMALL, K_SMALL_BUF, K_LARGE_BUF, K_MIN_LARGE, K_ROUND_LARGE = MIB, 2 * MIB, 20 * MIB, 10 * MIB, 2 * MIB

_cu = None
_initialized = False
_queued = []
_observers = []
_hist = {'on': False, 'max': 0, 'ctx': 'all'}


class _U64(ctypes.c_ulonglong):
    pass


def _driver():
    global _cu
    if _cu is None:
        _cu = ctypes.CDLL(os.environ.get('FAKE_CUDA_LIB', 'libcuda.so.1'))
        _cu.cuInit(0)
    return _cu


def _set_device(d):
    ctx = ctypes.c_void_p()
    _driver().cuCtxCreate_v4(ctypes.byref(ctx), None, 0, d)


def _frames(skip=2):
    out = []
    f = sys._getframe(skip)
    while f is not None:
        out.append({'filename': f.f_code.co_filename, 'line': f.f_lineno, 'name': f.f_code.co_name})
        f = f.f_back
    return out


class OutOfMemoryError(RuntimeError):
    pass


class _Block:
    __slots__ = ('seg', 'addr', 'size', 'req', 'allocated', 'frames', 'prev', 'next')

    def __init__(self, seg, addr, size):
        self.seg, self.addr, self.size = seg, addr, size
        self.req, self.allocated, self.frames = 0, False, None
        self.prev = self.next = None


class _Segment:
    def __init__(self, dev, addr, size, small, frames, expandable=False):
        self.dev, self.addr, self.size, self.small = dev, addr, size, small
        self.frames, self.expandable = frames, expandable
        self.head = _Block(self, addr, size)
        self.handles = []  # expandable: (handle, size) mapped in order

    def blocks(self):
        b = self.head
        while b:
            yield b
            b = b.next


class _Allocator:
    def __init__(self, dev):
        self.dev = dev
        self.segs = []
        self.fraction = None
        self.num_ooms = self.num_retries = 0
        self.trace = []
        self.trace_next = 0
        self.peak = {}
        self.exp = {}  # expandable: small -> segment

    # ---- statistics (the figures memory_stats reads) ----
    def figures(self):
        alloc = res = act = split = 0
        for s in self.segs:
            res += s.size
            bl = list(s.blocks())
            for b in bl:
                if b.allocated:
                    alloc += b.size
                    act += b.size
                elif len(bl) > 1:
                    split += b.size
        return {'allocated_bytes': alloc, 'reserved_bytes': res, 'active_bytes': act,
                'inactive_split_bytes': split}

    def record(self, action, addr, size, frames=None, device_free=None):
        if not _hist['on']:
            return
        e = {'action': action, 'size': size, 'stream': 0}
        if action == 'oom':
            e['device_free'] = device_free
        else:
            e['addr'] = addr
        if _V >= (2, 1):
            e['time_us'] = int(time.time() * 1e6)
        keep = _hist['ctx'] == 'all' or (action in ('alloc', 'segment_alloc', 'segment_map', 'oom')
                                          and _hist['ctx'] in ('alloc', 'all'))
        if keep and frames is not None:
            e['frames'] = frames
        n = _hist['max']
        if len(self.trace) < n:
            self.trace.append(e)
        else:
            self.trace[self.trace_next] = e
            self.trace_next = (self.trace_next + 1) % n

    # ---- the driver ----
    def _total_reserved(self):
        return sum(s.size for s in self.segs)

    def _over_fraction(self, n):
        if self.fraction is None:
            return False
        return self._total_reserved() + n > self.fraction

    def _cu_alloc(self, n):
        _set_device(self.dev)
        p = _U64()
        r = _driver().cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
        return p.value if r == 0 else None

    def alloc_block(self, size, small, frames):
        if _EXPANDABLE:
            return self.grow_expandable(size, small, frames)
        n = K_SMALL_BUF if small else (K_LARGE_BUF if size < K_MIN_LARGE else
                                         (size + K_ROUND_LARGE - 1) // K_ROUND_LARGE * K_ROUND_LARGE)
        if self._over_fraction(n):
            return None
        p = self._cu_alloc(n)
        if p is None:
            return None
        s = _Segment(self.dev, p, n, small, frames)
        self.segs.append(s)
        self.record('segment_alloc', p, n, frames)
        return s.head

    def grow_expandable(self, size, small, frames):
        page = K_SMALL_BUF if small else K_LARGE_BUF
        s = self.exp.get(small)
        if s is None:
            va = _U64()
            _set_device(self.dev)
            _driver().cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(1 << 36), 0, 0, 0)
            s = _Segment(self.dev, va.value, 0, small, frames, expandable=True)
            s.head = None
            self.exp[small] = s
        tail = None
        for b in s.blocks():
            tail = b
        have = tail.size if tail is not None and not tail.allocated else 0
        need = (size - have + page - 1) // page * page
        if self._over_fraction(need):
            return None
        prop = (ctypes.c_int * 8)(1, 0, 1, self.dev, 0, 0, 0, 0)  # PINNED, DEVICE, id
        # as ExpandableSegment::map: every page's handle first; on an OOM
        # the ones made are released (never mapped); then all are mapped
        made = []
        for off in range(0, need, page):
            h = _U64()
            if _driver().cuMemCreate(ctypes.byref(h), ctypes.c_size_t(page), prop, 0) != 0:
                for hh, at in made:
                    _driver().cuMemRelease(hh)
                return None
            made.append((h, s.addr + s.size + off))
        for h, at in made:
            _driver().cuMemMap(_U64(at), ctypes.c_size_t(page), 0, h, 0)
        for h, at in made:
            s.handles.append((h, page))
            self.record('segment_map', at, page, frames)
        nb = _Block(s, s.addr + s.size, need)
        s.size += need
        if s not in self.segs:
            self.segs.append(s)
        if tail is None:
            s.head = nb
        elif not tail.allocated:
            tail.size += need
            return tail
        else:
            tail.next, nb.prev = nb, tail
        return nb

    def release_cached(self):
        for s in list(self.segs):
            if s.expandable:
                # unmap the free pages at the end
                tail = None
                for b in s.blocks():
                    tail = b
                page = K_SMALL_BUF if s.small else K_LARGE_BUF
                while tail is not None and not tail.allocated and tail.size >= page and s.handles:
                    h, n = s.handles.pop()
                    s.size -= n
                    tail.size -= n
                    _driver().cuMemUnmap(_U64(s.addr + s.size), ctypes.c_size_t(n))
                    _driver().cuMemRelease(h)
                    self.record('segment_unmap', s.addr + s.size, n)
                    if tail.size == 0:
                        if tail.prev:
                            tail.prev.next = None
                        else:
                            s.head = None
                        tail = tail.prev
                if s.size == 0:
                    self.segs.remove(s)
                continue
            bl = list(s.blocks())
            if len(bl) == 1 and not bl[0].allocated:
                _driver().cuMemFree_v2(_U64(s.addr))
                self.segs.remove(s)
                self.record('segment_free', s.addr, s.size)
        return True

    def find_free(self, size, small):
        best = None
        for s in self.segs:
            if s.small != small:
                continue
            for b in s.blocks():
                if not b.allocated and b.size >= size and (best is None or b.size < best.size):
                    best = b
        return best

    def malloc(self, nbytes, frames):
        size = 512 if nbytes < 512 else (nbytes + 511) // 512 * 512
        small = size <= K_SMALL
        b = self.find_free(size, small)
        if b is None:
            b = self.alloc_block(size, small, frames)
            if b is None:
                self.release_cached()
                b = self.alloc_block(size, small, frames)
                self.num_retries += 1
            if b is None:
                free_b, total = _U64(), _U64()
                _driver().cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total))
                self.record('oom', 0, size, frames, device_free=free_b.value)
                self.num_ooms += 1
                limit = self.fraction if self.fraction is not None else total.value
                for obs in list(_observers):
                    obs(self.dev, size, limit, free_b.value)
                raise OutOfMemoryError('CUDA out of memory. Tried to allocate %d bytes (the double)' % size)
        rest = b.size - size
        if rest >= (512 if small else K_SMALL + 1):
            nb = _Block(b.seg, b.addr + size, rest)
            nb.next, nb.prev = b.next, b
            if b.next:
                b.next.prev = nb
            b.next = nb
            b.size = size
        b.allocated, b.req, b.frames = True, nbytes, frames
        self.record('alloc', b.addr, b.size, frames)
        return b

    def free(self, b):
        b.allocated = False
        self.record('free_requested', b.addr, b.size, b.frames)
        self.record('free_completed', b.addr, b.size, b.frames)
        b.frames = None
        for nb in (b.next, b.prev):
            if nb is not None and not nb.allocated:
                lo, hi = (b, nb) if nb is b.next else (nb, b)
                lo.size += hi.size
                lo.next = hi.next
                if hi.next:
                    hi.next.prev = lo
                b = lo

    def snapshot_segments(self):
        out = []
        for s in sorted(self.segs, key=lambda s: s.addr):
            bl = list(s.blocks())
            seg = {'device': self.dev, 'address': s.addr, 'total_size': s.size,
                   'allocated_size': sum(b.size for b in bl if b.allocated),
                   'active_size': sum(b.size for b in bl if b.allocated),
                   'stream': 0, 'segment_type': 'small' if s.small else 'large', 'blocks': []}
            if _V >= (2, 1):
                seg.update(requested_size=sum(b.req for b in bl if b.allocated),
                           segment_pool_id=(0, 0), is_expandable=s.expandable,
                           frames=s.frames if _hist['on'] else [])
            for b in bl:
                st = 'active_allocated' if b.allocated else 'inactive'
                if _V >= (2, 1):
                    blk = {'address': b.addr, 'size': b.size, 'requested_size': b.req if b.allocated else 0,
                           'state': st, 'frames': b.frames if (b.allocated and _hist['on']) else []}
                else:
                    blk = {'size': b.size, 'state': st}
                    if b.allocated and _hist['on']:
                        blk['history'] = [{'addr': b.addr, 'real_size': b.req, 'frames': b.frames}]
                seg['blocks'].append(blk)
            out.append(seg)
        return out


_allocs = {}


def _alloc_for(d):
    a = _allocs.get(d)
    if a is None:
        a = _allocs[d] = _Allocator(d)
    return a


class Tensor:
    def __init__(self, block, dev):
        self._b, self._dev = block, dev

    def data_ptr(self):
        return self._b.addr

    def __del__(self):
        if self._b is not None:
            _alloc_for(self._dev).free(self._b)
            self._b = None


def empty(nbytes, device='cuda'):
    """nbytes on device 'cuda' or 'cuda:N' through the caching allocator."""
    cuda._lazy_init()
    d = int(device.split(':')[1]) if ':' in device else 0
    fr = _frames(1) if _hist['on'] and _hist['ctx'] is not None else None
    return Tensor(_alloc_for(d).malloc(nbytes, fr), d)


class _Memory:
    @staticmethod
    def _record_memory_history(enabled='all', *args, **kw):
        if _BACKEND != 'native':
            raise RuntimeError('cudaMallocAsync does not yet support recordHistory.')
        cuda._lazy_init()  # torch's own calls lazyInitCUDA
        if _V >= (2, 1) and not isinstance(enabled, bool):
            names = ['context', 'stacks', 'max_entries', 'device']
            opt = dict(zip(names, args))
            opt.update(kw)
            _hist['on'] = enabled is not None
            _hist['ctx'] = opt.get('context', 'all')
            _hist['max'] = opt.get('max_entries', sys.maxsize) if enabled == 'all' else 1
            _hist['stacks'] = opt.get('stacks', 'all')
        else:
            if _V >= (2, 1):
                raise TypeError('the double follows 2.1+: enabled is a string (legacy form not doubled)')
            names = ['record_context', 'trace_alloc_max_entries', 'trace_alloc_record_context',
                     'device', 'record_context_cpp']
            opt = dict(zip(names, args))
            opt.update(kw)
            _hist['on'] = bool(enabled)
            _hist['ctx'] = 'alloc' if opt.get('trace_alloc_record_context') else (
                'state' if opt.get('record_context', True) else None)
            _hist['max'] = opt.get('trace_alloc_max_entries', 1)
            _hist['stacks'] = 'all' if opt.get('record_context_cpp') else 'python'

    @staticmethod
    def _snapshot(device=None):
        if _BACKEND != 'native':
            raise RuntimeError('cudaMallocAsync does not yet support snapshot.')
        segs, traces = [], []
        n = max(list(_allocs) + [0]) + 1
        for d in range(n):
            a = _allocs.get(d)
            if a is None:
                traces.append([])
                continue
            segs += a.snapshot_segments()
            traces.append(a.trace[a.trace_next:] + a.trace[:a.trace_next])
        return {'segments': segs, 'device_traces': traces}


class _Cuda:
    OutOfMemoryError = OutOfMemoryError
    memory = _Memory()

    @staticmethod
    def is_initialized():
        return _initialized

    @staticmethod
    def _lazy_call(fn, **kw):
        if _initialized:
            fn()
        else:
            _queued.append(fn)

    @staticmethod
    def _lazy_init():
        global _initialized
        if _initialized:
            return
        _driver()
        _initialized = True
        for fn in _queued:
            try:
                fn()
            except Exception as e:
                raise RuntimeError('CUDA call failed lazily at initialization with error: %s' % e)
        del _queued[:]

    @staticmethod
    def device_count():
        n = ctypes.c_int()
        _driver().cuDeviceGetCount(ctypes.byref(n))
        return n.value

    @staticmethod
    def get_allocator_backend():
        return _BACKEND

    @staticmethod
    def set_per_process_memory_fraction(fraction, device=0):
        _Cuda._lazy_init()
        total, free_b = _U64(), _U64()
        _driver().cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total))
        _alloc_for(device).fraction = int(total.value * fraction)

    @staticmethod
    def empty_cache():
        for a in _allocs.values():
            a.release_cached()

    @staticmethod
    def memory_allocated(device=0):
        return _alloc_for(device).figures()['allocated_bytes']

    @staticmethod
    def memory_reserved(device=0):
        return _alloc_for(device).figures()['reserved_bytes']


cuda = _Cuda()


class _CModule:
    @staticmethod
    def _cuda_attach_out_of_memory_observer(fn):
        if _BACKEND != 'native':
            raise RuntimeError('cudaMallocAsync does not yet support attachOutOfMemoryObserver.')
        _observers.append(fn)

    @staticmethod
    def _cuda_memoryStats(device):
        a = _alloc_for(device)
        f = a.figures()
        out = {'num_alloc_retries': a.num_retries, 'num_ooms': a.num_ooms}
        for k, v in f.items():
            p = a.peak[k] = max(a.peak.get(k, 0), v)
            st = {'current': v, 'peak': p, 'allocated': 0, 'freed': 0}
            out[k] = {'all': st, 'small_pool': dict(st), 'large_pool': dict(st)}
        return out


_C = _CModule()


# ---- torch.optim: the global step post-hook (torch >= 2.0) ----
_step_hooks = []


def register_optimizer_step_post_hook(hook):
    _step_hooks.append(hook)
    return hook


class Optimizer:
    def __init__(self, params=(), defaults=None):
        self.param_groups = [{'params': list(params)}]

    def step(self, closure=None):
        for h in list(_step_hooks):
            h(self, (), {})


class SGD(Optimizer):
    pass


optim = types.ModuleType('torch.optim')
optim.Optimizer, optim.SGD = Optimizer, SGD
optim.optimizer = types.ModuleType('torch.optim.optimizer')
optim.optimizer.Optimizer = Optimizer
optim.optimizer.register_optimizer_step_post_hook = register_optimizer_step_post_hook
sys.modules['torch.optim'] = optim
sys.modules['torch.optim.optimizer'] = optim.optimizer
