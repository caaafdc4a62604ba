"""Test helper: read memtally JSONL files and symbolize stacks with
addr2line, independently of the memtally command (so shim tests do not
depend on the analysis code they are meant to feed)."""
import glob, json, os, re, subprocess, sys
from collections.abc import Mapping

class _Lazy(Mapping):
    """A record table parsed on first use: {id: value} where each value
    comes from its line when first asked for (a torch process's file has
    200,000 stack records; most tests look at a few).  The checks of
    order (a record used before it was written) run then, on line numbers."""

    def __init__(self, parse):
        self._raw = {}        # id -> (line number, line), not parsed yet
        self._done = {}
        self._parse = parse

    def add(self, key, lineno, line):
        self._raw[key] = (lineno, line)
        self._done.pop(key, None)

    def lineno(self, key):
        return self._raw[key][0] if key in self._raw else -1

    def __getitem__(self, key):
        if key not in self._done:
            lineno, line = self._raw[key]
            self._done[key] = self._parse(key, lineno, line)
        return self._done[key]

    def __contains__(self, key):
        return key in self._raw

    def __iter__(self):
        return iter(list(self._raw))

    def __len__(self):
        return len(self._raw)


class _Field(Mapping):
    """One optional field of the stack records ("py", "device"), as a
    mapping of the stacks that have it."""

    def __init__(self, stacks, field):
        self._stacks, self._field = stacks, field

    def __getitem__(self, key):
        self._stacks[key]
        v = self._stacks.meta[key].get(self._field)
        if v is None:
            raise KeyError(key)
        return v

    def __contains__(self, key):
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self):
        return iter([k for k in self._stacks if k in self])

    def __len__(self):
        return sum(1 for _ in self)


class _Snapshot(dict):
    """A snapshot record whose 'callsites' is the whole table at that
    snapshot (format: "callsites_mode": "delta" snapshots carry only the
    sites that changed), replayed when first asked for."""

    def __getitem__(self, key):
        if key == 'callsites' and not self._whole:
            self._file._replay(self)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __iter__(self):  # (dict(s) then takes s.keys() and s[k]: the whole table)
        return dict.__iter__(self)

    def keys(self):
        return dict.keys(self)

    def copy(self):
        return dict(self)

    def items(self):
        self['callsites']
        return dict.items(self)

    def values(self):
        self['callsites']
        return dict.values(self)


class File:
    """One process file, parsed: its header, maps, records and snapshots
    (each snapshot's 'callsites' the whole table then, deltas replayed).
    Stack, pystack and pyframe records are parsed when first used."""

    def __init__(self, path):
        self.path = path
        self.header = None
        self.maps = []
        self.stacks = _Lazy(self._parse_stack)
        self.stacks.meta = {}  # stack id -> its record less "pcs"
        self.stack_py = _Field(self.stacks, 'py')  # stack id -> pystack id (0: no Python frame)
        self.stack_device = _Field(self.stacks, 'device')  # stack id -> CUDA device (memory on a GPU)
        self.python = None    # the python record
        self.pyframes = _Lazy(lambda k, n, l: (lambda r: (r['file'], r['func'], r['line']))(json.loads(l)))
        self.pystacks = _Lazy(self._parse_pystack)
        self.snapshots = []
        self.warnings = []    # warning records' messages, in order
        self._cache = (-1, {})  # the last replayed snapshot's index and table
        lines = text(path).split('\n')
        last = len(lines) - 1
        for i, line in enumerate(lines):
            if not line:
                continue
            if i != last:
                lazy = self._lazy(i, line)
                if lazy:
                    continue
            try:
                r = json.loads(line)
            except ValueError:
                if i == last:
                    continue  # a truncated last line is allowed
                raise AssertionError('%s:%d: not JSON' % (path, i + 1))
            t = r.get('type')
            if t == 'header':
                self.header = r
            elif t == 'maps':
                self.maps = r['modules']
            elif t in ('stack', 'pystack', 'pyframe'):
                getattr(self, t + 's').add(r['id'], i, line)
            elif t == 'python':
                self.python = r
            elif t == 'warning':
                self.warnings.append(r['message'])
            elif t == 'snapshot':
                for c in r['callsites']:
                    assert c['stack'] == 0 or c['stack'] in self.stacks, \
                        '%s: stack %d used before its record' % (path, c['stack'])
                s = _Snapshot(r)
                s._file, s._i, s._whole = self, len(self.snapshots), False
                s._delta = r['callsites']
                s._reset = r.get('callsites_mode', 'full') != 'delta'
                s['written_callsites'] = len(r['callsites'])
                self.snapshots.append(s)

    _LAZY = re.compile(r'\{"type":"(stack|pystack|pyframe)","id":(\d+)[,}]')

    def _lazy(self, i, line):
        """Put a stack, pystack or pyframe line in its table unparsed;
        False for any other line."""
        m = self._LAZY.match(line)
        if not m:
            return False
        getattr(self, m.group(1) + 's').add(int(m.group(2)), i, line)
        return True

    def _parse_stack(self, key, lineno, line):
        r = json.loads(line)
        pcs = [int(x, 16) for x in r.pop('pcs')]
        if 'up' in r:  # format 3: the outer frames are an earlier stack's
            assert 0 <= self.stacks.lineno(r['up']) < lineno, \
                '%s: stack %d used before its record' % (self.path, r['up'])
            up = self.stacks[r['up']]
            assert 0 <= r['keep'] <= len(up), '%s: stack %d keeps %d of %d frames' % (
                self.path, r['id'], r['keep'], len(up))
            pcs += up[len(up) - r['keep']:]
        if r.get('py'):
            assert 0 <= self.pystacks.lineno(r['py']) < lineno, \
                '%s: pystack %d used before its record' % (self.path, r['py'])
        self.stacks.meta[key] = r
        return pcs

    def _parse_pystack(self, key, lineno, line):
        r = json.loads(line)
        assert all(0 <= self.pyframes.lineno(f) < lineno for f in r['frames']), \
            '%s: pystack %d uses a pyframe before its record' % (self.path, r['id'])
        return r

    def _replay(self, snap):
        """snap's whole table: from the last snapshot replayed when only
        deltas lie between, else from the last full one."""
        snaps, i = self.snapshots, snap._i
        ci, state = self._cache
        k = i
        while k >= 0 and not snaps[k]._reset and k != ci:
            k -= 1
        if k == ci and k >= 0 and ci <= i:
            lo = k + 1
        else:
            state, lo = {}, max(k, 0)
        for s in snaps[lo:i + 1]:
            if s._reset:
                state = {}
            for c in s._delta:
                state[(c['stack'], c['kind'])] = c
        dict.__setitem__(snap, 'callsites', list(state.values()))
        snap._whole = True
        self._cache = (i, state)

    def pyframes_of(self, stack):
        """[(file, func, line)] of a stack's Python frames, innermost
        first; [] when it has none."""
        ps = self.stack_py.get(stack, 0)
        return [self.pyframes[f] for f in self.pystacks[ps]['frames']] if ps else []

    def live_by_pyline(self, snap, file_suffix, kinds=('heap',)):
        """{'file:line func': live bytes} by the innermost Python frame,
        for call sites whose innermost frame is in a file ending so."""
        out = {}
        for c in snap['callsites']:
            if c['kind'] not in kinds:
                continue
            fr = self.pyframes_of(c['stack'])
            if fr and fr[0][0].endswith(file_suffix):
                k = '%s:%d %s' % (os.path.basename(fr[0][0]), fr[0][2], fr[0][1])
                out[k] = out.get(k, 0) + c['live_bytes']
        return out

    def final(self):
        return self.snapshots[-1]

    def by_label(self, label):
        return [s for s in self.snapshots if s.get('label') == label][-1]

    def module(self, pc):
        for m in self.maps:
            if int(m['start'], 16) <= pc < int(m['end'], 16):
                return m
        return None

    def symbolize(self, pcs):
        """Return [(function, module path)] for the return addresses."""
        out = {}
        by_mod = {}
        for pc in pcs:
            m = self.module(pc)
            if m is None:
                out[pc] = ('??', '?')
                continue
            by_mod.setdefault(m['path'], (m, []))[1].append(pc)
        for path, (m, lst) in by_mod.items():
            base = int(m['base'], 16)
            args = ['addr2line', '-f', '-e', path] + ['%x' % (pc - base - 1) for pc in lst]
            try:
                res = subprocess.run(args, capture_output=True, text=True).stdout.split('\n')
            except OSError:
                res = []
            for i, pc in enumerate(lst):
                fn = res[2 * i] if 2 * i < len(res) else '??'
                out[pc] = (fn, path)
        return [out[pc] for pc in pcs]

    def sites_by_function(self, snap, kinds=None, frame_filter=None):
        """Sum call-site figures by the first frame whose function passes
        frame_filter (default: the innermost frame)."""
        allpcs = set()
        for c in snap['callsites']:
            allpcs.update(self.stacks.get(c['stack'], []))
        allpcs = sorted(allpcs)
        sym = dict(zip(allpcs, self.symbolize(allpcs)))
        agg = {}
        for c in snap['callsites']:
            if kinds and c['kind'] not in kinds:
                continue
            fn = '??'
            for pc in self.stacks.get(c['stack'], []):
                name = sym[pc][0]
                if frame_filter is None or frame_filter(name):
                    fn = name
                    break
            key = (fn, c['kind'])
            a = agg.setdefault(key, {'live_bytes': 0, 'live_count': 0, 'allocs': 0,
                                     'alloc_bytes': 0, 'frees': 0, 'at_peak_bytes': 0})
            for k in a:
                a[k] += c.get(k, 0)
        return agg

def raw(path):
    """A file the shim wrote, as bytes: .jsonl.zst (MEMTALLY_COMPRESS=1, the
    default) through zstd's own command, not the memtally reader."""
    if path.endswith('.zst'):
        return subprocess.run(['zstd', '-dcq', path], capture_output=True, check=True).stdout
    with open(path, 'rb') as f:
        return f.read()

def text(path):
    return raw(path).decode()

def lines(path):
    return text(path).splitlines()

def jsonl(outdir, pattern='memtally.*'):
    """The shim's files in outdir matching pattern: .jsonl or .jsonl.zst."""
    return sorted(p for p in glob.glob(os.path.join(outdir, pattern))
                  if p.endswith('.jsonl') or p.endswith('.jsonl.zst'))

def files(outdir):
    """The process files in outdir; an empty one (a root process, whose
    file is made at start, killed before its first snapshot) is left out,
    as the memtally command leaves it out."""
    return [File(p) for p in jsonl(outdir) if '.oom' not in p and os.path.getsize(p)]

failures = 0

def run_forking(prog, *args):
    """Run build/test/<prog> under the shim into MT_OUT; it prints a JSON
    object with its own figures and the pid of the child it forked
    ("child").  Checks the exit code and that there are two files; returns
    (figures, the parent's File, {pid: File})."""
    b, out = os.environ['MT_BUILD'], os.environ['MT_OUT']
    env = dict(os.environ, LD_PRELOAD=os.path.join(b, 'libmemtally.so'), MEMTALLY_OUT=out)
    r = subprocess.run([os.path.join(b, 'test', prog)] + list(args), env=env,
                       capture_output=True, text=True, timeout=280)
    eq(r.returncode, 0, 'exit code')
    want = json.loads(r.stdout)
    fs = {f.header['pid']: f for f in files(out)}
    eq(len(fs), 2, 'two files (parent and fork child)')
    parent = [f for f in fs.values() if f.header['pid'] != want['child']][0]
    return want, parent, fs

def check(cond, what):
    global failures
    if cond:
        print('  ok   ' + what)
    else:
        failures += 1
        print('  FAIL ' + what)

def eq(got, want, what):
    check(got == want, '%s: got %r, want %r' % (what, got, want))

def done():
    sys.exit(1 if failures else 0)

# What a test runs to learn whether python3-torch is there: finding the
# module, not importing it (2 s of CPU each time).
FIND_TORCH = 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'

def full():
    """Whether to run a slow matrix whole: MT_FULL=1 (`make check` sets
    it); `make test` runs its fast subset, which keeps every property."""
    return os.environ.get('MT_FULL') == '1'

def slack(seconds):
    """A test's own time limit, scaled as run.sh scales its watchdog: by the
    load on the machine's CPUs (both cores busy: twice the time), up to 4
    times."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 1
    return seconds * min(4.0, max(1.0, load))

_ports = set()

def free_port():
    """A TCP port nothing listens on, from the kernel's ephemeral range (a
    port derived from the pid can be another test's, as tests run two at a
    time), never the same twice in one process."""
    import socket
    while True:
        with socket.socket() as sk:
            sk.bind(('127.0.0.1', 0))
            port = sk.getsockname()[1]
        if port not in _ports and port + 1 not in _ports and port - 1 not in _ports:
            _ports.add(port)
            return port

_cases = []  # (name, wall, cpu) at each case's start, for the closing line

def _clock():
    import resource, time
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic(), me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

def _case_times():
    """The log's last line: each case's seconds, wall and CPU (where the
    suite's time goes; a case runs from its mt.case() to the next one)."""
    if not _cases:
        return
    marks = _cases + [('', ) + _clock()]
    print('  cases (wall/cpu s): ' + ', '.join('%s %.0f/%.0f' % (a[0], b[1] - a[1], b[2] - a[2])
                                               for a, b in zip(marks, marks[1:])))

def case(name):
    """Whether to run the case called name: MEMTALLY_CASE=name (run.sh's
    MEMTALLY_TEST=file:case sets it) runs that case alone; unset, all."""
    want = os.environ.get('MEMTALLY_CASE', '')
    run = not want or want == name
    if run:
        if not _cases:
            import atexit
            atexit.register(_case_times)
        _cases.append((name, ) + _clock())
    return run
