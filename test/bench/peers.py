"""peers.py - memtally beside the other memory profilers, in one run
(issue 52): memray (Python frames) and memray --native, heaptrack -r (record
only), jemalloc's profiler sampling every 512 KiB, memtally exact and
memtally sampled (512K), and bare, on five workloads:

  import    `python3 -c "import torch"`
  trainer   test/bench/torch_train.py 300 leak: a small MLP, batch 64, one
            thread, 300 steps, each step's validation loss kept with its graph
  conv      test/bench/conv_train.py: a conv net fed by a DataLoader with 2
            worker processes
  cc1       gcc's compiler proper on a real C file (numpy's f2py runtime,
            fortranobject.c, preprocessed: the first of the candidates present)
  malloc    test/bench/mallocbench.c on 2 threads

Each tool runs as a user runs it: `memtally run [--sample 512K] --`,
`python3 -m memray run [--native]` (with --follow-fork where the workload
forks), `heaptrack -r`, LD_PRELOAD=libjemalloc.so.2 with MALLOC_CONF.  Every
Python workload runs the same interpreter for every tool: the bench venv's
python3 (Debian's /usr/bin/python3 with the venv's packages beside Debian's,
torch 1.13 among them), so the tool is the only difference.  Rounds alternate
the tools (bare, then each tool, per workload, per round) after a warm-up
run of each tool on `import torch`; every ratio is to bare in the same round,
and the figure is the median over rounds.  CPU is user+sys of the whole
process tree (wait4 counts the children a process waited for: DataLoader
workers, heaptrack's and memtally run's child); peak RSS is the largest
process's.

Prints a Markdown section between two comment lines (bench.py puts it in
RESULTS.md; `peers.py --results` rewrites that section of RESULTS.md alone,
leaving the rest as the last `make bench` wrote it).  Environment:
PEERS_ROUNDS (default 3), PEERS_WORKLOADS (a comma list of the names above;
default all), BENCH_QUICK=1 (tiny sizes, one round: the smoke run),
PEERS_PARTIAL=FILE (the section so far written there after each round),
MEMTALLY_BENCH_VENV (the venv holding memray; default
~/.cache/memtally/venv-bench, made by test/bench/venv.sh).  Run alone:
`PEERS_ROUNDS=1 PEERS_WORKLOADS=import,trainer /usr/bin/python3
test/bench/peers.py`."""
import os, shutil, signal, statistics, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
B = os.path.join(ROOT, 'build')
MT = os.path.join(B, 'memtally')
JE = '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2'
QUICK = os.environ.get('BENCH_QUICK') == '1'
ROUNDS = 1 if QUICK else int(os.environ.get('PEERS_ROUNDS', '3'))
VENV = os.environ.get('MEMTALLY_BENCH_VENV') or os.path.expanduser('~/.cache/memtally/venv-bench')
ALL = ['import', 'trainer', 'conv', 'cc1', 'malloc']
ONLY = [w for w in os.environ.get('PEERS_WORKLOADS', ','.join(ALL)).split(',') if w]
TMP = tempfile.mkdtemp(prefix='mtpeers.')
BEGIN, END = '<!-- peers.py -->', '<!-- /peers.py -->'
RERUN = ('## Peers: memtally beside memray, heaptrack and jemalloc\'s profiler\n\nThis section alone was rerun '
         '(`peers.py --results`); the rest of this file is from the `make bench` run its first lines date.\n')


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def memray_version():
    py = os.path.join(VENV, 'bin', 'python3')
    if not os.access(py, os.X_OK):
        return None
    r = sh([py, '-c', 'import memray; print(memray.__version__)'])
    return r.stdout.strip() if r.returncode == 0 else None


MEMRAY = memray_version()
# every Python workload, every tool: one interpreter (the venv's is Debian's
# python3 by a symlink, with memray's packages beside Debian's)
PY = os.path.join(VENV, 'bin', 'python3') if MEMRAY else '/usr/bin/python3'


def c_file():
    """A real C file, preprocessed once (cc1 then reads it as gcc's driver
    hands it over): the first candidate whose headers are here."""
    cands = [('/usr/lib/python3/dist-packages/numpy/f2py/src/fortranobject.c',
              ['-I/usr/include/python3.%d' % sys.version_info[1],
               '-I/usr/lib/python3/dist-packages/numpy/core/include']),
             ('/usr/share/doc/libpng-dev/examples/pngtest.c', []),
             (os.path.join(ROOT, 'analysis/run/run.c'), ['-I' + os.path.join(ROOT, 'analysis'), '-I' + ROOT,
                                                     '-D_GNU_SOURCE'])]
    for src, inc in cands:
        out = os.path.join(TMP, os.path.basename(src)[:-2] + '.i')
        if os.path.exists(src) and sh(['gcc', '-E'] + inc + [src, '-o', out]).returncode == 0:
            return src, out
    raise SystemExit('peers.py: no C file to compile')


def workloads():
    """name -> (title, argv, python args or None, forks)"""
    w = {}
    steps = '5' if QUICK else '300'
    w['import'] = ('`import torch`', [PY, '-c', 'import torch'], ['-c', 'import torch'], False)
    tt = os.path.join(ROOT, 'test/bench/torch_train.py')
    w['trainer'] = ('small-step trainer (`torch_train.py %s leak`: MLP, batch 64, 1 thread, %s steps, '
                    'validation losses kept with their graphs)' % (steps, steps),
                    [PY, tt, steps, 'leak'], [tt, steps, 'leak'], False)
    ct = os.path.join(ROOT, 'test/bench/conv_train.py')
    cs = '4' if QUICK else '120'
    w['conv'] = ('conv trainer (`conv_train.py %s`: %s batches of 32, DataLoader with 2 worker processes, '
                 '1 thread each)' % (cs, cs), [PY, ct, cs], [ct, cs], True)
    if 'cc1' in ONLY:
        src, i = c_file()
        cc1 = sh(['gcc', '-print-prog-name=cc1']).stdout.strip()
        w['cc1'] = ('cc1 -O2 -g on %s (%d KB preprocessed)' % (src.replace(ROOT + '/', ''), os.path.getsize(i) // 1000),
                    [cc1, '-quiet', '-O2', '-g', i, '-o', os.path.join(TMP, 'out.s')] + (['-O0'] if QUICK else []),
                    None, False)
    if 'malloc' in ONLY:
        mb = os.path.join(TMP, 'mallocbench')
        subprocess.run(['gcc', '-O2', '-g', '-pthread', '-o', mb, os.path.join(ROOT, 'test/bench/mallocbench.c')],
                       check=True)
        ops = '20000' if QUICK else '1000000'
        w['malloc'] = ('malloc bench (`mallocbench %s 2`: 2 threads, 50 call sites at depths 5-15)' % ops,
                       [mb, ops, '2'], None, False)
    return {k: v for k, v in w.items() if k in ONLY}


TOOLS = ['bare', 'memtally exact', 'memtally sampled', 'memray', 'memray --native', 'heaptrack -r',
         'jemalloc prof']


def command(tool, wl, d):
    """(argv, env additions) for TOOL on workload WL writing under D, or a
    string: why the tool cannot run it."""
    _, argv, pyargs, forks = wl
    if tool == 'bare':
        return argv, {}
    if tool.startswith('memtally'):
        return [MT, 'run', '--out', d] + (['--sample', '512K'] if tool.endswith('sampled') else []) + ['--'] + argv, {}
    if tool.startswith('memray'):
        if pyargs is None:
            return 'memray records Python processes only'
        if not MEMRAY:
            return 'memray not installed (test/bench/venv.sh)'
        return ([PY, '-m', 'memray', 'run', '-q', '-o', os.path.join(d, 'out.bin')] + (['--follow-fork'] if forks else [])
                + (['--native'] if tool.endswith('native') else []) + pyargs), {}
    if tool == 'heaptrack -r':
        return ['heaptrack', '-r', '-o', os.path.join(d, 'ht')] + argv, {}
    if tool == 'jemalloc prof':
        return argv, {'LD_PRELOAD': JE,
                      'MALLOC_CONF': 'prof:true,lg_prof_sample:19,prof_final:true,prof_prefix:' + os.path.join(d, 'jep')}
    raise KeyError(tool)


def du(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def run_one(tool, wl, limit):
    """One run; a run past LIMIT seconds is killed (its whole session: a
    tool's children and the workload's) and counted as hung."""
    d = os.path.join(TMP, 'out')
    shutil.rmtree(d, ignore_errors=True)
    c = command(tool, wl, d)
    if isinstance(c, str):
        return {'skip': c}
    argv, env_add = c
    if not tool.startswith('memtally'):
        os.makedirs(d)
    env = dict(os.environ, **env_add)
    errf = tempfile.TemporaryFile(dir=TMP)
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=errf, cwd=TMP, start_new_session=True)
    hung = False
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > limit:
            hung = True
            os.killpg(p.pid, signal.SIGKILL)
            _, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    try:  # what the session left behind (a hung run's workers)
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.returncode = 0
    errf.seek(0)
    err = errf.read().decode(errors='replace')
    rc = os.waitstatus_to_exitcode(status)
    m = {'wall': wall, 'cpu': ru.ru_utime + ru.ru_stime, 'rss': ru.ru_maxrss * 1024,
         'bytes': du(d) if os.path.isdir(d) else 0, 'ok': rc == 0 and not hung}
    if hung:
        m['why'] = 'hung: killed after %.0f s' % limit
        m['hung'] = True
    elif rc != 0:
        m['why'] = 'exit %d: %s' % (rc, (err.strip().splitlines() or [''])[-1][:120])
    return m


def med(xs):
    return statistics.median(xs) if xs else None


def size(n):
    return '%.1f MB' % (n / 1e6) if n >= 1e5 else '%.0f KB' % (n / 1e3) if n else '-'


def main():
    start = time.perf_counter()
    load0 = os.getloadavg()
    wls = workloads()
    res = {w: {t: [] for t in TOOLS} for w in wls}
    # warm-up, not counted: every tool once on `import torch`, so the page
    # cache holds torch's libraries and each tool's own before round one
    if 'import' in wls and not QUICK:
        for t in TOOLS:
            run_one(t, wls['import'], 300)
    def render(done):
        took = time.perf_counter() - start
        load1 = os.getloadavg()

        def ratios(w, t, k):
            if w not in res:
                return []
            return [m[k] / b[k] for m, b in zip(res[w][t], res[w]['bare']) if m.get('ok') and b.get('ok') and b[k]]

        def cell(w, t, k='cpu', d=2):
            ms = res[w][t]
            if ms and 'skip' in ms[0]:
                return '-'
            bad = [m for m in ms if not m.get('ok')]
            if bad and len(bad) == len(ms):
                return '- (%s)' % bad[0]['why']
            rs = ratios(w, t, k)
            if not rs:
                return '-'
            s = '%.*fx' % (d, med(rs))
            if len(rs) > 1:
                s += ' (%.*f-%.*f)' % (d, min(rs), d, max(rs))
            return s + (' [%d of %d runs failed]' % (len(bad), len(ms)) if bad else '')

        def fig(w, t, k='cpu'):
            return med(ratios(w, t, k))

        v = lambda c: (sh(c).stdout.strip().splitlines() or ['?'])[0]
        cpu = ([l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')] or ['?'])[0]
        md = ['## Peers: memtally beside memray, heaptrack and jemalloc\'s profiler', '',
              'One run of test/bench/peers.py on %s: %s, %d cores, kernel %s; load average %.1f at the start, %.1f at the '
              'end (other work shared the machine: wall ratios move with it, **CPU ratios, user+sys of the whole process '
              'tree, are the figure to quote**). %d round%s, the tools alternated in each; median (min-max) of the ratio to '
              'bare in the same round. This part took %.0f s wall, %.0f s of CPU (every run, user+sys: about its '
              'wall time on an idle machine, plus the limit of a run that hangs).' % (
                  time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), cpu, os.cpu_count(), os.uname().release,
                  load0[0], load1[0], done, '' if done == 1 else 's', took, sum(os.times()[:4])), '',
              'Tools: memtally (this tree) exact (`memtally run --`) and sampled (`memtally run --sample 512K --`), as a '
              'user runs them (PyTorch step snapshots included); memray %s (`python3 -m memray run`, Python frames; '
              '`--native` adds native frames; `--follow-fork` on the conv trainer, so its workers are recorded as '
              'memtally records them); %s with `-r` (record only: its interpreter step, run apart, is not counted); '
              'jemalloc %s\'s profiler (`LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=prof:true,lg_prof_sample:19`, a sample '
              'every 512 KiB, a profile at exit). Python: %s with torch %s, the same interpreter for every tool.' % (
                  MEMRAY or '(not installed)', v(['heaptrack', '--version']),
                  (v(['dpkg-query', '-W', '-f=${Version}', 'libjemalloc2']) or '?').split('-')[0],
                  v([PY, '--version']), v([PY, '-c', 'import torch; print(torch.__version__)'])), '']
        # the summary: CPU ratio, tool x workload
        md += ['CPU time (user+sys) as a ratio to bare; "-": the tool cannot run the workload (memray records Python '
               'processes only: cc1 and the malloc bench are native programs).', '',
               '| tool | ' + ' | '.join(w for w in wls) + ' |', '|---|' + '---|' * len(wls)]
        for t in TOOLS[1:]:
            md.append('| %s | %s |' % (t, ' | '.join(cell(w, t).split(' ')[0] for w in wls)))
        md.append('')
        for w in wls:
            for t in TOOLS:
                bad = [m for m in res[w][t] if 'why' in m]
                if bad:
                    why = bad[0]['why']
                    if t == 'heaptrack -r' and w == 'conv' and bad[0].get('hung'):
                        why += ('; its forked DataLoader workers block in heaptrack_free on the preload library\'s '
                                'mutex, held by another thread at the fork')
                    md.append('- %s on %s: %d of %d runs failed (%s).' % (t, w, len(bad), len(res[w][t]), why))
        if md[-1] != '':
            md.append('')
        # where memtally stands against each peer
        lines = []
        for mode in ('memtally exact', 'memtally sampled'):
            for p in TOOLS[3:]:
                both = [w for w in wls if fig(w, mode) is not None and fig(w, p) is not None]
                if not both:
                    continue
                less = [w for w in both if fig(w, mode) < fig(w, p)]
                lines.append('- %s against %s: less CPU on %d of %d (%s)%s.' % (
                    mode, p, len(less), len(both), ', '.join('%s %.2fx vs %.2fx' % (w, fig(w, mode), fig(w, p)) for w in both),
                    '' if len(less) == len(both) else '; more on ' + ', '.join(w for w in both if w not in less)))
        md += ['Where memtally stands (CPU medians of this run):', ''] + lines + ['']
        goals = []
        def goal(what, w, t, lim):
            f = fig(w, t) if w in wls else None
            if f is not None:
                goals.append('%s <= %.2fx: **%s** (%.2fx)' % (what, lim, 'met' if f <= lim else 'missed', f))
        goal('trainer exact', 'trainer', 'memtally exact', 1.2)
        goal('trainer sampled', 'trainer', 'memtally sampled', 1.05)
        goal('`import torch` exact', 'import', 'memtally exact', 1.3)
        goal('malloc bench exact', 'malloc', 'memtally exact', 2.0)
        for w in wls:
            e, n = fig(w, 'memtally exact'), fig(w, 'memray --native')
            if e is not None and n is not None:
                goals.append('%s exact below memray --native: **%s**' % (w, 'met' if e < n else 'missed'))
        if fig('trainer', 'memtally exact') is not None and fig('trainer', 'memray') is not None:
            goals.append('trainer exact below memray: **%s**' % ('met' if fig('trainer', 'memtally exact') <
                                                                   fig('trainer', 'memray') else 'missed'))
        if goals:
            md += ['Issue 52\'s targets (CPU): ' + '; '.join(goals) + '.', '']
        # one table a workload: every figure
        for w, wl in wls.items():
            b = res[w]['bare']
            bok = [m for m in b if m.get('ok')]
            md += ['### ' + wl[0], '',
                   'Bare: %.2f s CPU, %.2f s wall, peak RSS %.0f MiB (medians).' % (
                       med([m['cpu'] for m in bok]) or 0, med([m['wall'] for m in bok]) or 0,
                       (med([m['rss'] for m in bok]) or 0) / 2**20) if bok else 'Bare failed: ' + b[0].get('why', '?'), '',
                   '| tool | CPU | wall | output | peak RSS | RSS over bare |', '|---|---|---|---|---|---|']
            for t in TOOLS[1:]:
                ms = [m for m in res[w][t] if m.get('ok')]
                if not ms:
                    md.append('| %s | %s | - | - | - | - |' % (t, cell(w, t)))
                    continue
                rss = med([m['rss'] for m in ms])
                md.append('| %s | %s | %s | %s | %s | %s |' % (
                    t, cell(w, t), cell(w, t, 'wall'), size(med([m['bytes'] for m in ms])), cell(w, t, 'rss'),
                    '%+.0f MiB' % ((rss - med([m['rss'] for m in bok])) / 2**20) if bok else '-'))
            md.append('')
        md += ['Output: the bytes the tool wrote (memtally: its directory, zstd, the default; memray: its .bin files; '
               'heaptrack: its compressed raw file; jemalloc: the heap profiles at exit). Peak RSS: the largest process '
               'of the run; "RSS over bare" is the tool\'s own memory, near enough.', '']
        text = '\n'.join([BEGIN] + md + [END])
        return text

    for rnd in range(ROUNDS):
        if rnd and os.environ.get('PEERS_PARTIAL'):  # the rounds so far, should the run be cut short
            with open(os.environ['PEERS_PARTIAL'], 'w') as f:
                f.write(render(rnd) + '\n')
        for w, wl in wls.items():
            for t in TOOLS:
                prev = res[w][t]
                if prev and prev[-1].get('hung'):
                    prev.append(prev[-1])  # hung once: not tried again
                    continue
                # bare runs first in a round: a tool gets 8 times its wall, at
                # least a minute; the slowest here runs about 3.5 times bare's
                bare = res[w]['bare'][-1] if t != 'bare' else None
                limit = max(60, 8 * bare['wall']) if bare and bare.get('ok') else 600
                prev.append(run_one(t, wl, limit))
    text = render(ROUNDS)
    print(text)
    shutil.rmtree(TMP, ignore_errors=True)
    if '--results' in sys.argv[1:]:
        # this section alone, rewritten in RESULTS.md in its place (the
        # rest of the file stays as the last `make bench` wrote it)
        path = os.path.join(ROOT, 'test/bench/RESULTS.md')
        old = open(path).read()
        text = text.replace('## Peers: memtally beside memray, heaptrack and jemalloc\'s profiler\n', RERUN, 1)
        if BEGIN in old and END in old:
            new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END):]
        elif '\n## Malloc benchmark' in old:  # where bench.py puts it
            i = old.index('\n## Malloc benchmark') + 1
            new = old[:i] + text + '\n\n' + old[i:]
        else:
            new = old.rstrip('\n') + '\n\n' + text + '\n'
        with open(path, 'w') as f:
            f.write(new)


if __name__ == '__main__':
    main()
