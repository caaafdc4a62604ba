"""_memtally.cuda -- PyTorch's CUDA caching allocator seen from memtally.

memtally's start-up hook (sitecustomize.py, through _memtally/steps.py)
loads this file by its path and runs its install(torch) when a program that `memtally run` started imports torch; nothing here
imports torch, and nothing here initialises CUDA: everything waits until
torch has initialised it (torch.cuda._lazy_call, run at the end of torch's
own lazy initialisation, or the first optimizer step that finds
torch.cuda.is_initialized()).  Then:

 - at each optimizer step (steps.on_step), the caching allocator's
   allocated, reserved, active and inactive-split bytes of each device it
   holds memory on, from torch's own counters (torch._C._cuda_memoryStats),
   go to the shim (memtally_torch_figures): every later snapshot carries
   them as devices[].torch;
 - torch >= 2.0: memory history on (Python stacks only, at most
   MEMTALLY_TORCH_HISTORY entries, default 100000; 0 off) and an OOM
   observer: when torch raises OutOfMemoryError, the shim marks the OOM
   dump of the driver failure it raised (memtally_torch_oom) and torch's own
   snapshot (torch.cuda.memory._snapshot()) is written beside it as
   `<dump>.torch.jsonl` (doc/FORMAT.md), before the error reaches Python.
   Not under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (torch keeps
   neither there): memtally's driver view stays.

A failure in here is one warning (steps.py say(): into the file, not the
program's stderr) and the program goes on;
the observer never raises (an exception there would replace torch's
OutOfMemoryError).  Standard library only."""
import ctypes, json, os, sys

__all__ = ['install', 'on_step', 'write_snapshot']

_torch = None
_shim = None
_ready = False       # history and observer set up (or found impossible)
_history_n = 100000
_warned = set()
_dumps = 0


def _warn(key, msg):
    """Once per key, as steps.py's say() says it (the file, not stderr)."""
    if key not in _warned:
        _warned.add(key)
        try:
            sys.modules['_memtally.steps'].say(msg)
        except Exception as e:
            if not _ours(e):
                raise
            try:
                sys.stderr.write('memtally: %s\n' % msg)
            except Exception as e2:
                if not _ours(e2):
                    raise


def _ours(e):
    """steps.py's ours(e): the hook's own failure, or an exception that
    must propagate unchanged (doc/python.md "Exceptions")."""
    st = sys.modules.get('_memtally.steps')
    return st.ours(e) if st is not None else isinstance(e, Exception)


def _load_steps():
    ext = sys.modules['_frozen_importlib_external']
    spec = ext.spec_from_file_location(
        '_memtally.steps', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'steps.py'))
    mod = sys.modules['_frozen_importlib'].module_from_spec(spec)
    sys.modules['_memtally.steps'] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop('_memtally.steps', None)
        raise
    return mod


def _version(torch):
    try:
        v = torch.__version__.split('+')[0].split('.')
        return int(v[0]), int(''.join(c for c in v[1] if c.isdigit()) or 0)
    except Exception:
        return (0, 0)


def _bind():
    try:
        lib = ctypes.CDLL(None)
        fig = lib.memtally_torch_figures
        fig.argtypes = [ctypes.c_int, ctypes.c_double] + [ctypes.c_ulonglong] * 4
        fig.restype = ctypes.c_int
        oom = lib.memtally_torch_oom
        oom.argtypes = [ctypes.c_int] + [ctypes.c_ulonglong] * 3 + [ctypes.c_char_p, ctypes.c_ulong]
        oom.restype = ctypes.c_int
        return fig, oom
    except (OSError, AttributeError):
        return None


def install(torch):
    """Called once torch is imported (twice is harmless).  Returns True
    when the shim is loaded and the hooks are in place."""
    global _torch, _shim, _history_n
    if _torch is not None:
        return _shim is not None
    _torch = torch
    _shim = _bind()
    if _shim is None:
        return False
    try:
        _history_n = int(os.environ.get('MEMTALLY_TORCH_HISTORY', '100000'))
    except ValueError:
        _warn('history', 'MEMTALLY_TORCH_HISTORY=%r is not a number: 100000'
              % os.environ.get('MEMTALLY_TORCH_HISTORY'))
        _history_n = 100000
    try:
        # the hook's step module, loaded by its path beside this file
        # (never `import memtally`: the program may have its own)
        steps = sys.modules.get('_memtally.steps')
        if steps is None:
            steps = _load_steps()
        # before the mark: the step's snapshot carries this step's figures
        getattr(steps, 'before_step', steps.on_step)(on_step)
    except Exception as e:
        if not _ours(e):
            raise
        _warn('on_step', 'no step hook (%s)' % e)
    try:
        cuda = torch.cuda
        if cuda.is_initialized():
            _setup()
        elif hasattr(cuda, '_lazy_call'):
            cuda._lazy_call(_on_cuda_init)
    except Exception as e:
        if not _ours(e):
            raise
        _warn('install', 'cannot watch for CUDA initialisation (%s)' % e)
    return True


def _on_cuda_init():
    # run inside torch's _lazy_init: an exception here would fail the
    # program's CUDA initialisation, so none leaves
    try:
        _setup()
    except Exception as e:
        if not _ours(e):
            raise
        _warn('setup', 'PyTorch memory history not set up (%s)' % e)


def _setup():
    """Once CUDA is initialised: memory history and the OOM observer
    (torch >= 2.0, the native allocator)."""
    global _ready
    if _ready:
        return
    _ready = True
    torch = _torch
    if _version(torch) < (2, 0):
        return  # 1.13: no OOM observer; the figures still go at each step
    cuda = torch.cuda
    backend = cuda.get_allocator_backend() if hasattr(cuda, 'get_allocator_backend') else 'native'
    if backend != 'native':
        _warn('backend', 'PYTORCH_CUDA_ALLOC_CONF backend:%s keeps no memory history and no OOM '
              'observer: OOM dumps have the driver\'s view only' % backend)
        return
    hist = getattr(cuda.memory, '_record_memory_history', None)
    if _history_n > 0 and hist is not None:
        try:
            if _version(torch) >= (2, 1):
                # Python stacks only, a traceback per allocation (not per free)
                hist('all', context='alloc', stacks='python', max_entries=_history_n)
            else:  # 2.0: the boolean form
                try:
                    hist(True, record_context=True, trace_alloc_max_entries=_history_n,
                         trace_alloc_record_context=True, record_context_cpp=False)
                except TypeError:  # a 2.0 build without record_context_cpp
                    hist(True, record_context=True, trace_alloc_max_entries=_history_n,
                         trace_alloc_record_context=True)
        except Exception as e:
            if not _ours(e):
                raise
            _warn('history', 'PyTorch memory history not switched on (%s)' % e)
    attach = getattr(torch._C, '_cuda_attach_out_of_memory_observer', None)
    if attach is None:
        _warn('observer', 'this torch has no OOM observer: OOM dumps have the driver\'s view only')
        return
    attach(_on_oom)


def on_step(step):
    """After each optimizer step: the caching allocator's figures of each
    device it holds memory on go to the shim."""
    torch = _torch
    if torch is None or _shim is None:
        return
    try:
        if not torch.cuda.is_initialized():
            return
        if not _ready:
            _setup()
        stats = torch._C._cuda_memoryStats
        for d in range(torch.cuda.device_count()):
            s = stats(d)
            res = s['reserved_bytes']['all']['current']
            if not res and not s['allocated_bytes']['all']['current']:
                continue
            _shim[0](d, float(step), s['allocated_bytes']['all']['current'], res,
                     s['active_bytes']['all']['current'], s['inactive_split_bytes']['all']['current'])
    except Exception as e:
        if not _ours(e):
            raise
        _warn('step', 'caching-allocator figures not recorded (%s)' % e)


def _on_oom(device, alloc, device_allocated, device_free):
    """torch's OOM observer: (device, requested bytes, the device's total
    or allowed memory -- not 'allocated', despite the name -- and the
    driver's free bytes), called before OutOfMemoryError is raised."""
    global _dumps
    try:
        buf = ctypes.create_string_buffer(4096)
        rc = _shim[1](int(device), int(alloc), int(device_allocated), int(device_free), buf, 4096)
        stem = buf.value.decode('utf-8', 'surrogateescape')
        if rc != 0 or not stem:
            _warn('nodump', 'PyTorch OOM on cuda:%d with no memtally dump to pair with '
                  '(MEMTALLY_OOM_DUMPS spent?): torch\'s snapshot not written' % device)
            return
        snap = _torch.cuda.memory._snapshot()
        write_snapshot(snap, stem + '.torch.jsonl',
                       {'device': int(device), 'size': int(alloc), 'limit': int(device_allocated),
                        'free': int(device_free), 'torch': _torch.__version__,
                        'history': _history_n})
        _dumps += 1
    except Exception as e:
        if not _ours(e):
            raise
        _warn('oom', 'torch\'s snapshot at the OOM not written (%s)' % e)


def _hex(v):
    return '0x%x' % v


def _js(v):
    return json.dumps(v, separators=(',', ':'))


def write_snapshot(snap, path, info):
    """torch.cuda.memory._snapshot()'s dict (2.0: blocks without address,
    frames in `history`; 2.1+: blocks with address and frames) as JSON
    lines (doc/FORMAT.md, "PyTorch's snapshot"): frames and stacks once
    each, then segments, blocks and trace entries naming them.  Written to
    path + '.tmp' and renamed, so a reader never sees half a file."""
    frames, stacks = {}, {}
    by_id = {}
    out = []
    w = out.append

    def stack_of(fr):
        if not fr:
            return 0
        k = id(fr)
        hit = by_id.get(k)
        if hit is not None and hit[0] is fr:
            return hit[1]
        ids = []
        for f in fr:
            key = (f.get('filename', '?'), f.get('line', 0), f.get('name', '?'))
            i = frames.get(key)
            if i is None:
                i = frames[key] = len(frames) + 1
                w(_js({'type': 'tframe', 'id': i, 'file': key[0], 'line': key[1], 'name': key[2]}))
            ids.append(i)
        t = tuple(ids)
        s = stacks.get(t)
        if s is None:
            s = stacks[t] = len(stacks) + 1
            w('{"type":"tstack","id":%d,"frames":%s}' % (s, _js(ids)))
        by_id[k] = (fr, s)
        return s

    head = {'type': 'torch', 'version': 1}
    head.update(info)
    w(_js(head))
    for si, seg in enumerate(snap.get('segments', [])):
        addr = seg['address']
        rec = {'type': 'tsegment', 'id': si + 1, 'device': seg.get('device', 0),
               'address': _hex(addr), 'total_size': seg['total_size'],
               'allocated_size': seg.get('allocated_size', 0),
               'active_size': seg.get('active_size', 0),
               'stream': seg.get('stream', 0), 'segment_type': seg.get('segment_type', ''),
               'is_expandable': bool(seg.get('is_expandable', False)),
               'stack': stack_of(seg.get('frames'))}
        w(_js(rec))
        a = addr
        for b in seg.get('blocks', []):
            fr = b.get('frames')
            if fr is None and b.get('history'):  # 2.0: the block's last allocation
                fr = b['history'][-1].get('frames')
            ba = b.get('address', a)
            w('{"type":"tblock","segment":%d,"address":"%s","size":%d,"requested_size":%d,'
              '"state":%s,"stack":%d}' % (si + 1, _hex(ba), b['size'],
                                            b.get('requested_size', b['size']), _js(b['state']),
                                            stack_of(fr)))
            a = ba + b['size']
    for d, trace in enumerate(snap.get('device_traces', [])):
        for e in trace:
            act = e['action']
            if act == 'oom':
                w('{"type":"ttrace","device":%d,"action":"oom","device_free":%d,"size":%d,'
                  '"stream":%d,"time_us":%d,"stack":%d}'
                  % (d, e.get('device_free', 0), e.get('size', 0), e.get('stream', 0),
                     e.get('time_us', 0), stack_of(e.get('frames'))))
            else:
                w('{"type":"ttrace","device":%d,"action":%s,"addr":"%s","size":%d,'
                  '"stream":%d,"time_us":%d,"stack":%d}'
                  % (d, _js(act), _hex(e.get('addr', 0)), e.get('size', 0), e.get('stream', 0),
                     e.get('time_us', 0), stack_of(e.get('frames'))))
    tmp = path + '.tmp'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    with os.fdopen(fd, 'w') as fh:
        fh.write('\n'.join(out))
        fh.write('\n')
    os.rename(tmp, path)
    return path
