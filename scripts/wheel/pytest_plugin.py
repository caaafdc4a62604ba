"""memtally's pytest plugin (entry point pytest11), off until asked:
`pytest --memtally` (or `memtally = true` in the ini file) runs the suite
under the shim -- pytest is started again with LD_PRELOAD and the start-up
hook when it is not preloaded already -- and then, per test:

    @pytest.mark.memtally_limit(peak="24 MB", cuda="2 GB")
        fails the test when its own peak (host: heap + mmap; cuda: device
        memory through the CUDA driver) goes over the limit: bytes above
        what was live when the test began, its fixtures' setup left out.
        The message names the test file's lines that held the most.
    @pytest.mark.memtally_leaks(max_per_call="16 KB", warmups=2, calls=3)
        runs the test body warmups times, then calls times more, and fails
        when memory kept per call (host and device) exceeds the limit,
        naming the line that keeps it.

and at the end a short report: the tests with the highest peaks, host and
device.  Limits: bytes (an int or "123"), or a number and a unit: B, KB,
MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB or K, M, G, T (powers of
1024); a bad value (negative, infinite) is a usage error naming the marker.  Files go to
--memtally-out (ini memtally_out; default memtally-out), one a process, for
`memtally report` afterwards.  doc/python.md."""
import dis
import gc
import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

import memtally

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_bin')
_UNITS = {'': 1, 'b': 1, 'kb': 10**3, 'mb': 10**6, 'gb': 10**9, 'tb': 10**12,
          'kib': 2**10, 'mib': 2**20, 'gib': 2**30, 'tib': 2**40,
          'k': 2**10, 'm': 2**20, 'g': 2**30, 't': 2**40}
_REEXEC = 'PYTEST_MEMTALLY_REEXEC'  # not MEMTALLY_*: the shim checks those


def parse_size(value, where):
    """Bytes from 24, "24 MB", "1.5 GiB"; pytest.UsageError naming where.
    A size is finite: float("inf") (or digits past a float's range) is a
    usage error too (int() of it raised OverflowError: an INTERNALERROR);
    no limit is the marker's argument left out."""
    if isinstance(value, bool):
        value = None
    got = None
    if isinstance(value, (int, float)) and value >= 0:
        got = float(value) if isinstance(value, float) else value
    else:
        m = re.fullmatch(r'\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*', str(value))
        if m and m.group(2).lower() in _UNITS:
            got = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if got is None or (isinstance(got, float) and not math.isfinite(got)):
        raise pytest.UsageError(
            '%s: %r is not a size (bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, '
            'GiB, TiB, K, M, G or T: "24 MB", "1.5 GiB"; leave the argument out for no '
            'limit)' % (where, value))
    return int(got)


def human(n):
    for unit, div in (('GiB', 2**30), ('MiB', 2**20), ('KiB', 2**10)):
        if abs(n) >= div:
            return '%.1f %s' % (n / div, unit)
    return '%d B' % n


def pytest_addoption(parser):
    g = parser.getgroup('memtally', 'memory limits per test (memtally)')
    g.addoption('--memtally', action='store_true', default=None,
                help='run under memtally: memtally_limit and memtally_leaks markers, '
                     'a report of the highest peaks')
    g.addoption('--memtally-out', default=None, metavar='DIR',
                help='where the memtally files go (default: memtally-out)')
    g.addoption('--memtally-top', type=int, default=5, metavar='N',
                help='tests in the end-of-session report (default 5)')
    parser.addini('memtally', 'run under memtally (as --memtally)', type='bool', default=False)
    parser.addini('memtally_out', 'where the memtally files go', default='memtally-out')


def _enabled(config):
    opt = config.getoption('memtally')
    return opt if opt is not None else config.getini('memtally')


def _reexec(config, out):
    """pytest again, the same command line, with the shim preloaded."""
    if os.environ.get(_REEXEC):
        raise pytest.UsageError(
            '--memtally: pytest was started again with LD_PRELOAD=%s but the shim is not '
            'recording (%s)' % (os.environ.get('LD_PRELOAD', ''), memtally.NOT_RECORDING))
    shim = os.environ.get('MEMTALLY_LIB') or os.path.join(_BIN, 'libmemtally.so')
    hook = os.path.join(_BIN, 'python')
    if not os.path.exists(shim):
        raise pytest.UsageError('--memtally: no shim at %s (set MEMTALLY_LIB)' % shim)
    env = dict(os.environ)
    env['LD_PRELOAD'] = ' '.join(x for x in (shim, env.get('LD_PRELOAD')) if x)
    env['PYTHONPATH'] = os.pathsep.join(x for x in (hook, env.get('PYTHONPATH')) if x)
    env['MEMTALLY_OUT'] = out
    env[_REEXEC] = '1'
    os.makedirs(out, mode=0o750, exist_ok=True)
    capman = config.pluginmanager.getplugin('capturemanager')
    if capman is not None:  # the new pytest writes to the real stdout and stderr
        capman.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    argv = list(getattr(sys, 'orig_argv', None) or [sys.executable] + sys.argv)
    os.execve(sys.executable, [sys.executable] + argv[1:], env)


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'memtally_limit(peak=None, cuda=None): fail when the test\'s own peak of host '
        '(heap + mmap) or device memory goes over (with --memtally)')
    config.addinivalue_line(
        'markers', 'memtally_leaks(max_per_call, warmups=2, calls=3): fail when a call of the '
        'test keeps more than max_per_call (with --memtally)')
    if not _enabled(config):
        return
    out = config.getoption('memtally_out')  # relative to where pytest runs
    if not out:  # the ini's: relative to its folder
        out = os.path.join(str(getattr(config, 'rootpath', '') or os.getcwd()),
                           config.getini('memtally_out'))
    out = os.path.abspath(out)
    if not memtally.active():
        _reexec(config, out)
    config.pluginmanager.register(_Plugin(config), 'memtally-session')


class _Plugin:
    def __init__(self, config):
        self.config = config
        self.peaks = []  # (nodeid, host bytes, device bytes)

    # ---- markers, parsed before anything runs ----
    def pytest_collection_modifyitems(self, items):
        for item in items:
            if not hasattr(item, 'runtest'):
                continue
            lim, leak = item.get_closest_marker('memtally_limit'), item.get_closest_marker('memtally_leaks')
            spec = {}
            if lim is not None:
                where = '%s: memtally_limit' % item.nodeid
                bad = set(lim.kwargs) - {'peak', 'cuda'}
                if bad or lim.args:
                    raise pytest.UsageError('%s: takes peak= and cuda= (got %s)' % (
                        where, ', '.join(sorted(bad)) or 'positional arguments'))
                for k in ('peak', 'cuda'):
                    if lim.kwargs.get(k) is not None:
                        spec[k] = parse_size(lim.kwargs[k], '%s(%s=...)' % (where, k))
                        spec[k + '_text'] = lim.kwargs[k]
            if leak is not None:
                where = '%s: memtally_leaks' % item.nodeid
                kw = dict(leak.kwargs)
                if leak.args:
                    kw.setdefault('max_per_call', leak.args[0])
                bad = set(kw) - {'max_per_call', 'warmups', 'calls'}
                if bad or 'max_per_call' not in kw:
                    raise pytest.UsageError('%s: takes max_per_call= (required), warmups=, calls='
                                            % where)
                spec['leak'] = parse_size(kw['max_per_call'], where + '(max_per_call=...)')
                spec['leak_text'] = kw['max_per_call']
                for k, d in (('warmups', 2), ('calls', 3)):
                    v = kw.get(k, d)
                    if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == 'warmups' else 1):
                        raise pytest.UsageError('%s(%s=%r): a whole number%s' % (
                            where, k, v, '' if k == 'warmups' else ' of at least 1'))
                    spec[k] = v
            item.runtest = self._wrap(item, item.runtest, spec)

    def _wrap(self, item, runtest, spec):
        def measured():
            gc.collect()
            memtally.peak_reset()
            f0 = memtally.figures()
            try:
                runtest()
            finally:  # a test that fails of its own has its peak too
                f1 = memtally.figures()
                host, dev = f1.host_peak - f0.host_live, f1.device_peak - f0.device_live
                self.peaks.append((item.nodeid, host, dev))
            for k, got in (('peak', host), ('cuda', dev)):
                if k in spec and got > spec[k]:
                    self._fail(item, '%s peak %s is over its memtally_limit %s=%r' % (
                        'host' if k == 'peak' else 'device', human(got), k, spec[k + '_text']),
                        'cuda' if k == 'cuda' else None)
            if 'leak' in spec:
                self._leaks(item, runtest, spec)
        return measured

    def _leaks(self, item, runtest, spec):
        for _ in range(spec['warmups']):
            runtest()
        gc.collect()
        f0 = memtally.figures()
        memtally.snapshot('memtally_leaks before %s' % item.nodeid)
        for _ in range(spec['calls']):
            runtest()
        gc.collect()
        f1 = memtally.figures()
        n = spec['calls']
        host = (f1.host_live - f0.host_live) / n
        dev = (f1.device_live - f0.device_live) / n
        for what, got, dv in (('host', host, False), ('device', dev, True)):
            if got > spec['leak']:
                self._fail(item, '%s memory kept per call %s is over its memtally_leaks '
                           'max_per_call=%r (%d calls after %d warm-ups)' % (
                               what, human(int(got)), spec['leak_text'], n, spec['warmups']),
                           'cuda' if dv else None, per_call=n)

    # ---- naming the lines ----
    def _fail(self, item, msg, kind=None, per_call=0):
        rows = []
        try:
            rows = self._rows(item, kind, per_call)
        except Exception as e:  # the limit's verdict stands without names
            rows = ['(memtally could not name the lines: %s)' % e]
        pytest.fail('\n'.join([msg] + rows), pytrace=False)

    def _file(self):
        out = os.environ.get('MEMTALLY_OUT') or self.config.getini('memtally_out')
        got = [p for p in glob.glob(os.path.join(out, '*.p%d.jsonl*' % os.getpid()))
               if '.oom' not in os.path.basename(p)]
        return max(got, key=os.path.getmtime) if got else None

    def _report(self, spec, kind=None):
        """`memtally report --json` of one snapshot: the rows at it, at the
        peak and the spikes (sites whose own high-water mark was passing),
        by stack id: the 300 largest of each for the host, every CUDA row
        for the device (few)."""
        exe = os.path.join(_BIN, 'memtally')
        how = ['--kind', 'cuda', '--top', '100000'] if kind else ['--top', '300']
        r = subprocess.run([exe, 'report', '--json', '--stacks'] + how + [spec],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, LD_PRELOAD=''))
        if r.returncode:
            raise RuntimeError(r.stderr.strip()[-300:])
        p = json.loads(r.stdout)['processes'][0]
        rows = {}
        for part in (p.get('spikes') or [], (p.get('at_peak') or {}).get('callsites', []),
                     (p.get('peak') or {}).get('callsites', []), p['last']['callsites']):
            for c in part:  # one row a stack, with the highest figure any part gives
                top = max(c.get('peak_bytes') or 0, c.get('at_peak_bytes') or 0,
                          c.get('live_bytes') or 0)
                had = rows.get(c['stack'])
                if had is None or top > had['top']:
                    rows[c['stack']] = dict(c, top=top)
        return p, rows, {c['stack']: c['live_bytes'] for c in p['last']['callsites']}

    @staticmethod
    def _lines(item):
        """The test's file and the lines its function spans (None: any)."""
        path = os.path.realpath(str(item.fspath))
        fn = getattr(item, 'function', None)
        co = getattr(fn, '__code__', None)
        if co is None or os.path.realpath(co.co_filename) != path:
            return path, None
        last = max([ln for _, ln in dis.findlinestarts(co) if ln] + [co.co_firstlineno])
        return path, (co.co_firstlineno, last)

    def _rows(self, item, kind, per_call):
        path, span = self._lines(item)
        memtally.snapshot('memtally %s' % item.nodeid)
        f = self._file()
        if f is None:
            return ['(no memtally file of this process)']
        p, rows, live = self._report(f + '@last', kind)
        before = {}
        if per_call:  # the snapshot before the measured calls: the request before the last
            reqs = [s['seq'] for s in p['snapshots'] if s['reason'] == 'request']
            if len(reqs) >= 2:
                before = self._report('%s@%d' % (f, reqs[-2]), kind)[2]
        lines, via = {}, {}
        for c in rows.values():
            if kind and not c['kind'].startswith('cuda'):
                continue
            if not kind and c['kind'] not in ('heap', 'mmap'):
                continue
            mine = [fr for fr in c.get('frames', [])
                    if fr.get('python') and fr.get('file') and os.path.realpath(fr['file']) == path
                    and (span is None or span[0] <= fr['line'] <= span[1])]
            if not mine:
                continue
            line = mine[0]['line']
            if per_call:
                v = (live.get(c['stack'], 0) - before.get(c['stack'], 0)) / per_call
            else:
                v = c['top']
            if v > 0:
                lines[line] = lines.get(line, 0) + v
                if v >= via.get(line, (0, ''))[0]:
                    via[line] = (v, c['where'])
        name = os.path.basename(path)
        if not lines:
            return ['(no call site on the test\'s lines in %s holds it: the memory came from '
                    'elsewhere, or from sites too small to be named)' % name]
        top = sorted(lines.items(), key=lambda kv: -kv[1])[:3]
        what = 'kept per call' if per_call else 'at its peak'
        return ['  %s:%d  %s %s  (%s)' % (name, ln, human(int(v)), what, via[ln][1])
                for ln, v in top]

    # ---- the end of the session ----
    def pytest_terminal_summary(self, terminalreporter):
        if not self.peaks:
            return
        n = self.config.getoption('memtally_top')
        tr = terminalreporter
        tr.write_sep('=', 'memtally: highest peaks')
        for title, i in (('host (heap + mmap)', 1), ('device (CUDA)', 2)):
            top = sorted((p for p in self.peaks if p[i] > 0), key=lambda p: -p[i])[:n]
            if not top:
                continue
            tr.write_line('%s:' % title)
            for p in top:
                tr.write_line('  %10s  %s' % (human(p[i]), p[0]))
        f = self._file()
        if f:
            tr.write_line('file: %s (memtally report %s)' % (f, f))
