"""`make bench`: memtally beside its anchors, side by side in one run.

Workloads: (a) test/bench/mallocbench.c (2 threads, 16-512 B mostly, a
window of 10 k live objects, 50 call sites at depths 5-15); (b) Python 3
running an object-heavy script and gcc compiling a large generated file;
(c) a PyTorch CPU training loop (import and steady steps reported apart);
the peers' table (peers.py: memray, memray --native, heaptrack -r and
jemalloc prof beside memtally on five workloads).
Configurations alternate A B A B ... after a warm-up round; each figure is
the median (min-max) over rounds of the ratio to bare glibc measured in the
same round (the malloc benchmark: over three times the rounds).  Writes
test/bench/RESULTS.md.  BENCH_ROUNDS (default 3) and
BENCH_QUICK=1 (a smoke run: tiny sizes, 1 round, no RESULTS.md) adjust it."""
import json, os, re, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
B = os.path.join(ROOT, 'build')
SHIM = os.path.join(B, 'libmemtally.so')
JE = '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2'
TC = '/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4'
QUICK = os.environ.get('BENCH_QUICK') == '1'
ROUNDS = 1 if QUICK else int(os.environ.get('BENCH_ROUNDS', '3'))
TMP = tempfile.mkdtemp(prefix='mtbench.')
OPS = 20000 if QUICK else 1000000
# The malloc benchmark's runs take seconds and vary +-15% run to run here,
# more than the shim's sampled cost: it runs three times the rounds.
MB_ROUNDS = ROUNDS if QUICK else 3 * ROUNDS

def build():
    for name, flags in (('mallocbench', ['-O2']), ('mallocbench_fp', ['-O2', '-fno-omit-frame-pointer'])):
        subprocess.run(['gcc', '-g', '-pthread'] + flags + ['-o', os.path.join(TMP, name),
                        os.path.join(ROOT, 'test/bench/mallocbench.c')], check=True)
    subprocess.run(['gcc', '-O2', '-fno-omit-frame-pointer', '-I', os.path.join(ROOT, 'shim'), '-o',
                    os.path.join(TMP, 'unwindbench'), os.path.join(ROOT, 'test/bench/unwindbench.c'),
                    os.path.join(ROOT, 'shim/capture/unwind.c'), os.path.join(ROOT, 'shim/capture/cfi.c'),
                    os.path.join(ROOT, 'shim/capture/cfitab.c'), os.path.join(ROOT, 'shim/capture/ehframe.c'),
                    os.path.join(ROOT, 'shim/platform/glue.c'), os.path.join(ROOT, 'shim/platform/tmem.c'),
                    '-lunwind', '-ldl'],
                   check=True)
    subprocess.run(['gcc', '-O1', '-g', '-fno-omit-frame-pointer', '-o', os.path.join(TMP, 'sitesbench'),
                    os.path.join(ROOT, 'test/bench/sitesbench.c'), '-ldl'], check=True)

def configs(fp_prog=False):
    """name -> (env additions, command prefix, description)"""
    out = lambda n: os.path.join(TMP, 'out-' + n)
    c = {
        'bare glibc': ({}, [], 'no tool'),
        'bare jemalloc': ({'LD_PRELOAD': JE}, [], 'LD_PRELOAD=libjemalloc.so.2'),
        'memtally exact': ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('exact')}, [], 'MEMTALLY_SAMPLE=0 (default)'),
        'memtally exact libunwind': ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('exactlu'), 'MEMTALLY_UNWIND': 'libunwind'},
                                     [], 'MEMTALLY_UNWIND=libunwind (the CFI walker off)'),
        'memtally sampled': ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('sampled'), 'MEMTALLY_SAMPLE': '512K'}, [],
                             'MEMTALLY_SAMPLE=512K'),
        'heaptrack -r': ({}, ['heaptrack', '-r', '-o', os.path.join(TMP, 'ht')], 'Debian heaptrack 1.4.0, record only'),
        'jemalloc prof 19': ({'LD_PRELOAD': JE, 'MALLOC_CONF': 'prof:true,lg_prof_sample:19,prof_final:true,prof_prefix:'
                              + os.path.join(TMP, 'jep19')}, [], 'prof:true, lg_prof_sample:19 (512 KiB)'),
        'jemalloc prof 0': ({'LD_PRELOAD': JE, 'MALLOC_CONF': 'prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:'
                             + os.path.join(TMP, 'jep0')}, [], 'prof:true, lg_prof_sample:0 (every allocation)'),
        'gperftools heap': ({'LD_PRELOAD': TC, 'HEAPPROFILE': os.path.join(TMP, 'gp')}, [],
                            'libtcmalloc.so.4 with HEAPPROFILE'),
    }
    c['memtally exact, no Python'] = ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('nopy'), 'MEMTALLY_PYTHON': '0'}, [],
                                      'MEMTALLY_PYTHON=0: native stacks only')
    c['memtally depth 1, no Python'] = ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('d1nopy'), 'MEMTALLY_PYTHON': '0',
                                         'MEMTALLY_DEPTH': '1'}, [], 'MEMTALLY_DEPTH=1 MEMTALLY_PYTHON=0')
    c['memtally depth 1, Python'] = ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('d1py'), 'MEMTALLY_DEPTH': '1'}, [],
                                     'MEMTALLY_DEPTH=1, Python frames on')
    if fp_prog:
        c['memtally exact fp'] = ({'LD_PRELOAD': SHIM, 'MEMTALLY_OUT': out('fp'), 'MEMTALLY_UNWIND': 'fp'}, [],
                                  'MEMTALLY_UNWIND=fp, -fno-omit-frame-pointer build')
    return c

def run(cmd, env_add, prefix, cwd=None):
    for k, v in env_add.items():
        if k.startswith('MEMTALLY_OUT'):
            shutil.rmtree(v, ignore_errors=True)
    env = dict(os.environ, **env_add)
    t0 = time.perf_counter()
    p = subprocess.Popen(prefix + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    out = p.stdout.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    return {'wall': wall, 'cpu': ru.ru_utime + ru.ru_stime, 'rss': ru.ru_maxrss * 1024, 'out': out,
            'ok': os.waitstatus_to_exitcode(status) == 0}

def written(env_add):
    tot = 0
    for k, v in env_add.items():
        if k == 'MEMTALLY_OUT' and os.path.isdir(v):
            tot += sum(os.path.getsize(os.path.join(v, f)) for f in os.listdir(v))
    return tot

def jsonl_lines(path):
    """A file the shim wrote as JSONL lines (memtally cat decompresses
    .jsonl.zst, the default)."""
    return subprocess.run([os.path.join(B, 'memtally'), 'cat', path], capture_output=True, text=True,
                          check=True).stdout.splitlines()

def med(xs):
    return statistics.median(xs) if xs else float('nan')

def fmt(xs, d=2):
    if not xs:
        return 'n/a'
    return '%.*fx (%.*f-%.*f)' % (d, med(xs), d, min(xs), d, max(xs))

def side_by_side(title, workload, names, extract, rounds):
    """Run each configuration once per round, alternating; return ratios."""
    cfg = configs(fp_prog=True)
    res = {n: [] for n in names}
    # round 0 warms the caches and is dropped; not in a smoke run (BENCH_QUICK:
    # test_bench_smoke, no timing asserted), where it was half the time
    warm = 0 if QUICK else 1
    for r in range(rounds + warm):
        for n in names:
            env_add, prefix, _ = cfg[n]
            cmd = workload(n)
            m = run(cmd, env_add, prefix)
            m.update(extract(m['out']))
            m['bytes'] = written(env_add)
            if r >= warm:
                res[n].append(m)
    return res

def ratio_rows(res, keys, base='bare glibc'):
    rows = []
    for n, ms in res.items():
        row = [n]
        for k in keys:
            rs = [m[k] / b[k] for m, b in zip(ms, res[base]) if b.get(k) and m.get(k) is not None and m['ok']]
            row.append(fmt(rs))
        rows.append(row)
    return rows

def table(head, rows):
    s = '| ' + ' | '.join(head) + ' |\n|' + '---|' * len(head) + '\n'
    for r in rows:
        s += '| ' + ' | '.join(str(x) for x in r) + ' |\n'
    return s

def main():
    global T0
    T0 = time.perf_counter()
    build()
    md = ['# memtally benchmarks', '',
          'Generated by `make bench` (test/bench/bench.py) on %s: %d cores, kernel %s, %s. Every ratio is to bare glibc '
          'measured in the same round; median (min-max) over %d rounds, configurations alternated after a warm-up round. '
          'This machine is noisy (the anchors study saw bare glibc vary by +-25%% between rounds): ratios below about '
          '1.2x are within the noise.' % (time.strftime('%Y-%m-%d'), os.cpu_count(), os.uname().release,
                                           subprocess.run(['gcc', '--version'], capture_output=True, text=True).stdout.splitlines()[0], ROUNDS), '']
    # instructions per malloc/free pair, counted by callgrind (noise-free)
    env = dict(os.environ, INSN_N1='1000', INSN_N2='2000') if QUICK else dict(os.environ)
    env['INSN_ANNOTATE'] = 'exact:shallow'
    r = subprocess.run(['bash', os.path.join(ROOT, 'test/bench/insn.sh')], capture_output=True, text=True,
                       env=env, check=True)
    table_part, _, where = r.stdout.partition('\nWhere ')
    added = [[int(x) for x in re.findall(r'\| (\d+) \| (\d+) \| (\d+) \|', line)[0]]
             for line in table_part.splitlines() if re.search(r'\| \d+ \| \d+ \| \d+ \|', line)]
    met = lambda v, lim: '**%s**: %s' % ('met' if v <= lim else 'missed', format(v, ','))
    md += ['## Instructions per allocation (callgrind)', '',
           'What memtally adds to one malloc/free pair, in instructions: counted, not timed, so the figures do '
           'not move with the machine\'s load (test/bench/insn.sh; `INSN_QUICK=1` for a quicker run while '
           'optimizing, `INSN_ANNOTATE=exact:shallow` for where they go). The time cadence is off in these runs '
           '(`MEMTALLY_CADENCE=0`): its snapshots are a cost per second of the run, not per allocation '
           '(RESULTS-cadence.md), and under callgrind\'s slowdown their number follows the run\'s wall time.', '',
           table_part.strip(), '']
    if len(added) == 2:
        md += ['Issue 43\'s targets: exact <= 700 on 4 frames (%s), sampled <= 60 (%s on 4 frames, %s on 20-27), '
               'exact <= 1,500 on 20-27 frames (%s).' % (met(added[0][1], 700), met(added[0][2], 60),
                                                          met(added[1][2], 60), met(added[1][1], 1500)), '']
    md += ['Before issue 43 (commit 54d1c4a, the same command): exact 1,473 / 2,362, sampled 92 / 95 (4 frames / '
           '20-27 frames). What changed since: a capture whose start and stack words match one the thread kept '
           'takes that capture\'s stack id without walking, cutting or interning (cfi.h `mt_cfi_recall`, inline, '
           'comparing the start, rule generation, Python stack and words: the depth, stack top and stop range are '
           'held fixed); `writer_maybe` runs every 64th allocation of a thread, not every one; the pointer table '
           'hashes an address once a call (its place: the hash with the shard in its top bits) and the solo '
           'thread\'s common put and take (a compact entry) are inline in its hooks (ptrsolo.h); '
           'sampled '
           'malloc\'s fast path is assembly (no registers saved around the real call), and free\'s filter slot is '
           'the address\'s own bits (no hash), with NULL and the hooks\' start-up pool held in it so free tests '
           'neither.', '',
           'A workload the recall cannot serve costs a little more: test/bench/mallocbench.c on one thread (50 '
           'call sites at depths 5-15 picked at random, so consecutive stacks rarely repeat): 2,301 instructions a '
           'pair before the recall, 2,327 with it (`valgrind --tool=callgrind mallocbench N 1`, N = 20000 and '
           '60000, exact, whole pair including glibc; 2026-12-05); 2,280 after the recall went inline and its '
           'unused keeps began to back off (2026-12-06, `MEMTALLY_CADENCE=0`; bare glibc 374).', '']
    if where.strip():
        md += ['Where ' + where.strip(), '']
    # memtally beside memray, heaptrack -r and jemalloc's profiler (issue 52)
    r = subprocess.run([sys.executable, os.path.join(ROOT, 'test/bench/peers.py')], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('peers.py failed:\n' + r.stderr[-2000:])
    md += [r.stdout.strip(), '']
    # (a) the malloc benchmark
    mb = lambda n: [os.path.join(TMP, 'mallocbench_fp' if n.endswith('fp') else 'mallocbench'),
                    str(OPS // 50 if n in ('gperftools heap', 'jemalloc prof 0') else OPS), '2']
    names = ['bare glibc', 'bare jemalloc', 'memtally exact', 'memtally exact libunwind', 'memtally sampled', 'memtally exact fp',
             'heaptrack -r', 'jemalloc prof 19', 'jemalloc prof 0', 'gperftools heap']
    ext = lambda out: {'ns': float(re.search(r'ns_per_pair ([0-9.]+)', out).group(1)) if 'ns_per_pair' in out else None}
    res = side_by_side('malloc', mb, names, ext, MB_ROUNDS)
    rows = ratio_rows(res, ['ns', 'cpu', 'rss'])
    for r in rows:
        ms = res[r[0]]
        ns = [m['ns'] for m in ms if m.get('ns')]
        r.insert(1, '%.0f' % med(ns) if ns else 'n/a')
        allocs = 2 * (int(mb(r[0])[1]) + 5000)
        b = [m['bytes'] for m in ms]
        r.append('%.0f' % (med(b) / (allocs / 1e6)) if any(b) else '-')
    md += ['## Malloc benchmark (2 threads)', '',
           'Median (min-max) over %d rounds (three times the others: each run takes seconds, and bare glibc alone '
           'varies +-15%% between runs here). ' % MB_ROUNDS +
           'ns per malloc+free pair from the program\'s own timing of its loop; gperftools and jemalloc prof 0 run 1/50 of '
           'the operations (their ns per pair is still comparable); CPU time and peak RSS are of the whole run. '
           'Debian\'s heaptrack 1.4.0 interpreter exhausts memory on this workload (a hash bug fixed upstream after '
           '1.5.0), so it is timed with `heaptrack -r` (record only).', '',
           table(['configuration', 'ns/pair (median)', 'time per pair', 'CPU time', 'peak RSS', 'file bytes per M allocs'], rows)]
    exact = [m['ns'] / b['ns'] for m, b in zip(res['memtally exact'], res['bare glibc'])]
    samp = [m['ns'] / b['ns'] for m, b in zip(res['memtally sampled'], res['bare glibc'])]
    ht = [m['ns'] / b['ns'] for m, b in zip(res['heaptrack -r'], res['bare glibc'])]
    # where the time goes: perf's top symbols of the sampled and exact runs
    if shutil.which('perf') and not QUICK:
        for n in ('memtally sampled', 'memtally exact'):
            env_add, _, _ = configs()[n]
            pd = os.path.join(TMP, 'perf.data')
            subprocess.run(['perf', 'record', '-q', '-o', pd, os.path.join(TMP, 'mallocbench'), str(OPS), '2'],
                           env=dict(os.environ, **env_add), capture_output=True)
            rep = subprocess.run(['perf', 'report', '-i', pd, '--stdio', '--no-children', '--sort', 'dso,sym'],
                                 capture_output=True, text=True).stdout
            top = [l.strip() for l in rep.splitlines() if re.match(r'\s+[0-9.]+%', l)][:10]
            md += ['Where the time goes, %s (`perf record`, top symbols):' % n, '', '```'] + top + ['```', '']
    md += ['Targets: sampled <= 1.10x: **%s** (%.2fx); exact <= 3.0x: **%s** (%.2fx); heaptrack / exact >= 5: **%s** (%.1f).'
           % ('met' if med(samp) <= 1.10 else 'missed', med(samp), 'met' if med(exact) <= 3.0 else 'missed', med(exact),
              'met' if med(ht) / med(exact) >= 5 else 'missed', med(ht) / med(exact)), '']
    # (b) real programs
    script = ('d={}\nfor i in range(300000): d["k%d"%i]=[i,str(i)*3,{"v":i}]\n'
              'import json\ns=json.dumps([d["k%d"%i] for i in range(0,300000,5)])\nprint(len(s))\n')
    if QUICK:
        script = script.replace('300000', '3000')
    gen = os.path.join(TMP, 'gen.c')
    with open(gen, 'w') as f:
        n = 50 if QUICK else 400
        for i in range(n):
            f.write('static int f%d(int x){int s=0;for(int i=0;i<x;i++)s+=i*%d^(s>>3);return s;}\n' % (i, i))
        f.write('int main(void){int s=0;\n' + ''.join('s+=f%d(%d);\n' % (i, i) for i in range(n)) + 'return s&1;}\n')
    cc1 = subprocess.run(['gcc', '-print-prog-name=cc1'], capture_output=True, text=True).stdout.strip()
    cc1_cmd = [cc1, '-quiet', '-O2', gen, '-o', os.path.join(TMP, 'gen.s')]
    progs = [('python3 object-heavy script', lambda n: ['/usr/bin/python3', '-c', script]),
             ('gcc -O2 on a %d-function file' % (50 if QUICK else 400),
              lambda n: ['gcc', '-O2', '-c', '-o', os.path.join(TMP, 'gen.o'), gen]),
             # the compiler proper, so heaptrack (which follows only the
             # driver) and memtally measure the same process
             ('cc1 -O2 run directly on the same file', lambda n: cc1_cmd)]
    names2 = ['bare glibc', 'bare jemalloc', 'memtally exact', 'memtally exact libunwind', 'memtally sampled',
              'heaptrack -r', 'jemalloc prof 19']
    md += ['## Real programs', '', 'Wall time, CPU time and peak RSS of the whole run, as ratios to bare glibc.', '']
    for title, wl in progs:
        res2 = side_by_side(title, wl, names2, lambda out: {}, ROUNDS)
        md += ['### ' + title, '', table(['configuration', 'wall', 'CPU', 'peak RSS'], ratio_rows(res2, ['wall', 'cpu', 'rss']))]
    # cc1 with a snapshot every 1000 allocations: what the file comes to
    sizes = []
    for c in ('0', '1'):
        d = os.path.join(TMP, 'cc1-every-' + c)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run(cc1_cmd, env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d, MEMTALLY_EVERY='1000',
                                         MEMTALLY_COMPRESS=c), capture_output=True)
        f = [os.path.join(d, x) for x in os.listdir(d)][0]
        sizes.append((os.path.getsize(f), sum(1 for l in jsonl_lines(f) if l.startswith('{"type":"snapshot"'))))
    md += ['cc1 in exact mode with `MEMTALLY_EVERY=1000`: %d snapshots; the file is %.1f MB as JSONL '
           '(`MEMTALLY_COMPRESS=0`) and %.1f MB as written by default (zstd, a frame per snapshot).'
           % (sizes[1][1], sizes[0][0] / 1e6, sizes[1][0] / 1e6), '']
    # (c) PyTorch
    try:
        subprocess.run(['/usr/bin/python3', '-c', 'import torch'], check=True, capture_output=True)
        have_torch = True
    except Exception:
        have_torch = False
    if have_torch:
        steps = '5' if QUICK else '40'
        wl = lambda n: ['/usr/bin/python3', os.path.join(ROOT, 'test/bench/torch_train.py'), steps]
        def ext3(out):
            m = re.search(r'import_s ([0-9.]+) step_median_ms ([0-9.]+)', out)
            return {'import': float(m.group(1)), 'step': float(m.group(2))} if m else {}
        names3 = ['bare glibc', 'memtally exact', 'memtally exact libunwind', 'memtally sampled', 'heaptrack -r']
        # as many rounds as the others: with half as many (2 at BENCH_ROUNDS=5)
        # one slow import moved the median by 0.3x
        res3 = side_by_side('torch', wl, names3, ext3, ROUNDS)
        rows = ratio_rows(res3, ['import', 'step', 'wall', 'rss'])
        for r in rows:
            ms = res3[r[0]]
            r.insert(1, '%.2f s / %.2f ms' % (med([m.get('import', float('nan')) for m in ms]),
                                              med([m.get('step', float('nan')) for m in ms])))
        md += ['## PyTorch CPU training loop (Debian python3-torch)', '',
               '`import torch` (about a million allocations) and the median of %s steps (some hundreds each), reported '
               'apart.' % steps, '', table(['configuration', 'import / step (median)', 'import', 'step', 'whole run', 'peak RSS'], rows)]
    # (c2) the standing row of issue 14: an unmodified 120-step trainer (a
    # DataLoader with 2 workers) in exact mode with a snapshot every 0.5 s:
    # the main process's file, its stack count and the shim's own memory
    if have_torch:
        d = os.path.join(TMP, 'trainer')
        shutil.rmtree(d, ignore_errors=True)
        n = '320' if QUICK else '3840'  # 32 per batch: 10 or 120 steps
        subprocess.run([os.path.join(B, 'memtally'), 'run', '--out', d, '--interval', '0.5', '--',
                        '/usr/bin/python3', os.path.join(ROOT, 'test/integration/torch_train.py'), 'noleak',
                        '/dev/null', n], check=True, capture_output=True)
        main_f = max((os.path.join(d, x) for x in os.listdir(d)), key=os.path.getsize)
        lines = jsonl_lines(main_f)
        snaps_t = [json.loads(l) for l in lines if l.startswith('{"type":"snapshot"')]
        last = snaps_t[-1]
        stk = [json.loads(l) for l in lines if l.startswith('{"type":"stack"')]
        frames_w = sum(len(x['pcs']) for x in stk)
        mem = last['shim'].get('memory', {})
        md += ['## The trainer at real scale (standing row)', '',
               '`memtally run --interval 0.5 -- python3 test/integration/torch_train.py noleak /dev/null %s` '
               '(%d steps, exact mode, 2 DataLoader workers); the main process. File: as written (zstd, the '
               'default) and as JSONL (`memtally cat`); frames: as written in stack records (a stack stores '
               'the frames it does not share with an earlier one, format 3); shim memory by use at the end '
               '(stacks, sites, live-block tables, writer, Python).' % (n, int(n) // 32), '',
               table(['file', 'as JSONL', 'stack records', 'frames written', 'Python stacks', 'shim memory at the end',
                      'stacks / sites / live / writer / Python', 'snapshots'],
                     [['%.1f MB' % (os.path.getsize(main_f) / 1e6), '%.1f MB' % (sum(len(l) + 1 for l in lines) / 1e6),
                       len(stk), '%d (%.1f a stack)' % (frames_w, frames_w / max(1, len(stk))),
                       last['shim'].get('pystacks', 0), '%.1f MiB' % (last['shim']['memory_bytes'] / 2**20),
                       ' / '.join('%.1f' % (mem.get(k, 0) / 2**20) for k in ('stacks', 'sites', 'live', 'writer', 'python'))
                       + ' MiB', len(snaps_t)]]), '']
    # (d) Python frames: what capturing them costs per allocation
    R = '300' if QUICK else '20000'
    # PYTHONMALLOC in the environment, not through `env`: heaptrack -r would
    # follow env(1) and record nothing of the Python it execs
    os.environ['PYTHONMALLOC'] = 'malloc'
    wl = lambda n: ['/usr/bin/python3', os.path.join(ROOT, 'test/bench/pyalloc.py'), R]
    names4 = ['bare glibc', 'memtally depth 1, no Python', 'memtally depth 1, Python', 'memtally exact, no Python',
              'memtally exact', 'memtally sampled', 'heaptrack -r']
    ext4 = lambda out: {'loop': float(re.search(r'loop_s ([0-9.]+)', out).group(1))} if 'loop_s' in out else {}
    res4 = side_by_side('pyframes', wl, names4, ext4, ROUNDS)
    del os.environ['PYTHONMALLOC']
    d = os.path.join(TMP, 'out-exact')
    snaps = {s.get('label'): s for s in (json.loads(l) for fn in os.listdir(d) for l in jsonl_lines(os.path.join(d, fn))
                                         if '"type":"snapshot"' in l)}
    allocs = snaps['loop1']['heap']['allocs'] - snaps['loop0']['heap']['allocs']
    pyst = snaps['loop1']['shim'].get('pystacks', 0)
    per = lambda n: med([(m['loop'] - b['loop']) / allocs * 1e9 for m, b in zip(res4[n], res4['bare glibc'])
                         if m.get('loop') and b.get('loop')])
    rows = ratio_rows(res4, ['loop', 'cpu', 'rss'])
    for r in rows:
        r.insert(1, '%.0f' % per(r[0]) if r[0] != 'bare glibc' else '-')
    py_ns = per('memtally depth 1, Python') - per('memtally depth 1, no Python')
    nat_ns = per('memtally exact, no Python') - per('memtally depth 1, no Python')
    md += ['## Python frames', '',
           '`PYTHONMALLOC=malloc python3 test/bench/pyalloc.py %s`: its loop makes %d allocations (every object a '
           'malloc call), each 13 Python frames deep (%d distinct Python stacks in the process). ns per allocation '
           'over bare glibc from the loop\'s own timing and allocation count; the other columns are ratios to bare '
           'glibc (whole process for CPU and RSS).' % (R, allocs, pyst), '',
           table(['configuration', 'ns per allocation over bare', 'loop time', 'CPU time', 'peak RSS'], rows),
           'Python frame capture (depth 1 with Python frames minus depth 1 without): **%.0f ns** per allocation; '
           'native unwinding to depth 32 (exact without Python minus depth 1 without): **%.0f ns** per allocation.'
           % (py_ns, nat_ns), '']
    # micro-figures
    md += ['## Micro-figures', '']
    out = subprocess.run([os.path.join(TMP, 'unwindbench')], capture_output=True, text=True).stdout.split('\n')
    md += [table(['stack capture', 'depth', 'ns per capture'], [l.split() for l in out if l.strip()])]
    rows = []
    for n in ([1000] if QUICK else [1000, 10000, 100000]):
        d = os.path.join(TMP, 'sites%d' % n)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([os.path.join(TMP, 'sitesbench'), str(n)], env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d),
                       check=True)
        snap = [json.loads(l) for l in jsonl_lines(os.path.join(d, os.listdir(d)[0])) if '"label":"measured"' in l][0]
        rows.append([n, '%.1f ms' % (snap['shim']['last_write_ns'] / 1e6), '%.1f MiB' % (snap['shim']['memory_bytes'] / 2**20)])
    md += [table(['call sites', 'first snapshot write (with every stack record)', 'shim memory'], rows)]
    # a snapshot after the first costs what changed, not the sites there are
    r = subprocess.run(['bash', os.path.join(ROOT, 'test/bench/snapcost.sh')], capture_output=True, text=True,
                       env=dict(os.environ, SNAP_SHIM=SHIM, SNAP_SITES='1000 10000' if QUICK else '1000 10000 100000 200000'))
    if r.returncode == 0:
        md += ['A snapshot after the first reads only the call sites in groups of 64 stack ids charged since the one '
               'before (test/bench/snapcost.sh: N sites each holding a block, then rounds that each allocate and free '
               'at 100 of them and request a snapshot; its time is the next record\'s shim.last_write_ns):', '',
               r.stdout.strip(), '']
    n = 100000 if QUICK else 1000000
    d = os.path.join(TMP, 'live')
    subprocess.run([os.path.join(TMP, 'sitesbench'), str(n), 'live'], env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d),
                   check=True)
    snap = [json.loads(l) for l in jsonl_lines(os.path.join(d, os.listdir(d)[0])) if '"label":"measured"' in l][0]
    md += ['Shim memory with %d live tracked blocks: %.1f MiB (%.0f bytes per live block, tables included).' %
           (n, snap['shim']['memory_bytes'] / 2**20, snap['shim']['memory_bytes'] / n), '']
    # OOM dump time with many live device allocations (fake driver)
    nd = 2000 if QUICK else 100000
    d = os.path.join(TMP, 'oomdump')
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d, LD_LIBRARY_PATH=os.path.join(B, 'test', 'fakecuda'),
               FAKE_CUDA_MEM=str(1 << 30), CUDA_PROG_SMALL=str(nd))
    r = subprocess.run([os.path.join(B, 'test', 'cuda_prog'), 'rt', 'oom', d], env=env, capture_output=True, text=True)
    if r.returncode == 0:
        res = json.loads(r.stdout)
        md += ['OOM dump with %d live device allocations: the failing call took %.1f ms (the dump written inside it; %s on disk).'
               % (nd + 13, res.get('oom_call_ms', float('nan')), '%.1f MiB' % (sum(os.path.getsize(os.path.join(d, f))
                  for f in os.listdir(d) if '.oom' in f) / 2**20)), '']
    # analysis
    r = subprocess.run(['bash', os.path.join(ROOT, 'test/bench/reader.sh'), '2000', '30' if QUICK else '300', '1' if QUICK else '5'],
                       capture_output=True, text=True)
    md += ['## Analysis', '', table(['what', 'input', 'size', 'median time (min-max)', 'throughput'], []) + r.stdout.strip() + '\n']
    # memtally top on 8 ranks' files (issue 18): the first frame reads all,
    # a refresh after it only what was appended (here nothing: the frame)
    r = subprocess.run(['bash', os.path.join(ROOT, 'test/bench/top.sh'), '20' if QUICK else '500'],
                       capture_output=True, text=True)
    md += [table(['what', 'input', 'first frame', 'refresh', 'memory'], []) + r.stdout.strip() + '\n']
    # memtally ranks over many rank files of a real torchrun job (issue 41):
    # ddp_train.py's two ranks copied into 64, 256 and 1,024 rank files
    r = subprocess.run(['bash', os.path.join(ROOT, 'test/bench/ranks.sh'), '40' if QUICK else '400']
                       + (['8'] if QUICK else ['64', '256', '1024']), capture_output=True, text=True)
    md += ['`memtally ranks DIR` over the rank files of a 2-rank gloo DDP job (test/bench/ddp_train.py '
           'under `memtally run --set STEPS=1 -- torchrun`, rank 1 leaking), copied with each header '
           'rewritten (test/bench/gen_ranks.py); the machine is shared, so CPU time is given beside '
           'the wall time:', '',
           table(['what', 'input', 'wall', 'user+sys CPU', 'max RSS', 'leaking rank named'], [])
           + (r.stdout.strip() or 'ranks.sh failed: ' + r.stderr.strip()[-300:]) + '\n']
    d = os.path.join(TMP, 'sites%d' % (1000 if QUICK else 10000))
    t0 = time.perf_counter()
    subprocess.run([os.path.join(B, 'memtally'), 'report', '--top', '100000', d], capture_output=True, check=True)
    md += ['Symbolizing %s call sites (`memtally report --top 100000`): %.2f s.' % ('1000' if QUICK else '10000',
                                                                               time.perf_counter() - t0), '']
    md += ['Commands: `make bench` (all of the above; `BENCH_ROUNDS=N` for more rounds; `PEERS_ROUNDS=N` for the '
           'peers\' table, whose section alone `/usr/bin/python3 test/bench/peers.py --results` reruns in place). '
           'bench.py took %.0f min here, the peers\' part included (its time is in its section); `make bench` '
           'then runs cadence.py and prom.py.' % ((time.perf_counter() - T0) / 60), '']
    text = '\n'.join(md)
    if QUICK:
        print(text)
        print('bench smoke: ok')
    else:
        with open(os.path.join(ROOT, 'test/bench/RESULTS.md'), 'w') as f:
            f.write(text)
        print(text)
    shutil.rmtree(TMP, ignore_errors=True)

main()
