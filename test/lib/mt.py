"""Test helper: read memtally JSONL files and symbolize stacks with
addr2line, independently of the memtally command (so shim tests do not
depend on the analysis code they are meant to feed)."""
import glob, json, os, subprocess, sys

class File:
    def __init__(self, path):
        self.path = path
        self.header = None
        self.maps = []
        self.stacks = {}
        self.stack_py = {}    # stack id -> pystack id (0: no Python frame)
        self.stack_device = {}  # stack id -> CUDA device (memory on a GPU)
        self.python = None    # the python record
        self.pyframes = {}
        self.pystacks = {}
        self.snapshots = []
        self.warnings = []    # warning records' messages, in order
        state = {}
        lines = text(path).split('\n')
        for i, line in enumerate(lines):
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                if i == len(lines) - 1:
                    continue  # a truncated last line is allowed
                raise AssertionError('%s:%d: not JSON' % (path, i + 1))
            t = r.get('type')
            if t == 'header':
                self.header = r
            elif t == 'maps':
                self.maps = r['modules']
            elif t == 'stack':
                pcs = [int(x, 16) for x in r['pcs']]
                if 'up' in r:  # format 3: the outer frames are an earlier stack's
                    assert r['up'] in self.stacks, '%s: stack %d used before its record' % (path, r['up'])
                    up = self.stacks[r['up']]
                    assert 0 <= r['keep'] <= len(up), '%s: stack %d keeps %d of %d frames' % (
                        path, r['id'], r['keep'], len(up))
                    pcs += up[len(up) - r['keep']:]
                self.stacks[r['id']] = pcs
                if 'device' in r:
                    self.stack_device[r['id']] = r['device']
                if 'py' in r:
                    assert r['py'] == 0 or r['py'] in self.pystacks, \
                        '%s: pystack %d used before its record' % (path, r['py'])
                    self.stack_py[r['id']] = r['py']
            elif t == 'python':
                self.python = r
            elif t == 'warning':
                self.warnings.append(r['message'])
            elif t == 'pyframe':
                self.pyframes[r['id']] = (r['file'], r['func'], r['line'])
            elif t == 'pystack':
                assert all(f in self.pyframes for f in r['frames']), \
                    '%s: pystack %d uses a pyframe before its record' % (path, r['id'])
                self.pystacks[r['id']] = r
            elif t == 'snapshot':
                # Replay deltas so each snapshot's 'callsites' is complete.
                mode = r.get('callsites_mode', 'full')
                if mode != 'delta':
                    state = {}
                for c in r['callsites']:
                    assert c['stack'] == 0 or c['stack'] in self.stacks, \
                        '%s: stack %d used before its record' % (path, c['stack'])
                    state[(c['stack'], c['kind'])] = c
                r['written_callsites'] = len(r['callsites'])
                r['callsites'] = list(state.values())
                self.snapshots.append(r)

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
