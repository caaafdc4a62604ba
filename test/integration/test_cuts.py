"""Every command as a newcomer types it (issue 44): the small cuts.

  pprof:  `-o FILE` is the file written: a run directory of several
          processes gives that one profile (each process's samples labelled
          pid), `--each` a file a process; at the peak (the default) the
          profile has all four Go heap sample types, every sample holding
          bytes has a count, alloc figures >= in-use ones;
  cat:    takes a directory, FILE@N (the file up to snapshot N's line),
          FILE@peak; an option it does not take is a usage error;
  usage:  an unknown option is a usage error (exit 2, named) in every
          command;
  run:    --steps N, --set NAME and --set MEMTALLY_NAME alike, --out naming
          a regular file refused before the program starts, 126 for a file
          that cannot be executed and 127 for none;
  adds:   rows + other = the total above them in diff (JSON), report's and
          functions' peak tables, whatever --top and MEMTALLY_TOP; diff's
          label names the peak's step and time; no count of 0 beside bytes;
  helpers: a trainer with DataLoader workers: `leaks` gives the trainer a
          section and its workers one line (--all-processes: each in
          full); `ranks` compares the trainer, not its workers;
  capi:   a program calling memtally_mark and memtally_snapshot through
          shim/memtally.h, built without -lmemtally (C PIE and non-PIE, C++),
          runs bare unchanged (exit 0, the API answers -1, no memtally-out)
          and, preloaded, writes its marks."""
import glob, json, os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
MT = os.path.join(B, 'memtally')
GO = shutil.which('go')


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=kw.pop('timeout', 120), **kw)


def memtally(*args, **kw):
    return sh([MT] + list(args), **kw)


# a run of three processes: a shell and two trainers it starts
run3 = os.path.join(OUT, 'run3')
trainer = os.path.join(B, 'demo_trainer')
r = memtally('run', '--out', run3, '--', 'sh', '-c', '%s 120 >/dev/null & %s 160 >/dev/null; wait'
             % (trainer, trainer))
files3 = mt.jsonl(run3)
mt.check(r.returncode == 0 and len(files3) == 3, 'a run of three processes: %d files %r' % (len(files3), r.stderr[-200:]))

if mt.case('pprof'):
    if not GO:
        mt.check(False, 'go (golang-go) is installed: scripts/setup-deps.sh installs it')
    pb = os.path.join(OUT, 'heap.pb.gz')
    r = memtally('pprof', run3, '-o', pb)
    written = sorted(os.listdir(OUT))
    mt.check(r.returncode == 0 and os.path.exists(pb) and not [p for p in written if p.startswith('heap.') and p != 'heap.pb.gz'],
             'pprof DIR -o heap.pb.gz writes heap.pb.gz and nothing else: %r' % written)
    raw = sh([GO, 'tool', 'pprof', '-raw', pb]).stdout
    pids = set(re.findall(r'pid:\[(\d+) count\]', raw))
    mt.check(len(pids) >= 2, 'one profile holds the processes, labelled by pid: %r' % sorted(pids))
    for label, args in (('the peak', []), ('the last snapshot', ['--snapshot', 'last']), ('one file at the peak', [])):
        src = files3[-1] if label == 'one file at the peak' else run3
        one = os.path.join(OUT, 'x.pb.gz')
        memtally('pprof', src, '-o', one, *args)
        raw = sh([GO, 'tool', 'pprof', '-raw', one]).stdout
        mt.check('alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]' in raw,
                 'pprof at %s: the four Go heap sample types, inuse_space the default' % label)
        samples = raw.split('Samples:')[1].split('Locations')[0] if 'Samples:' in raw else ''
        vals = [tuple(int(x) for x in m.groups()) for m in
                re.finditer(r'^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+):', samples, re.M)]
        bad = [v for v in vals if (v[3] > 0 and v[2] == 0) or v[0] < v[2] or v[1] < v[3]]
        mt.check(vals and not bad, 'pprof at %s: %d samples, each with bytes has a count, allocs >= in use: bad %r'
                 % (label, len(vals), bad[:3]))
    r = memtally('pprof', '--each', run3, '-o', os.path.join(OUT, 'each.pb.gz'))
    each = [p for p in os.listdir(OUT) if p.startswith('each.')]
    mt.check(r.returncode == 0 and len(each) == 3 and 'each.pb.gz' not in each,
             'pprof --each: a profile a process: %r' % sorted(each))

if mt.case('cat'):
    f = max(files3, key=lambda p: len(mt.File(p).snapshots))
    whole = memtally('cat', f).stdout
    seqs = [json.loads(l)['seq'] for l in whole.splitlines() if '"type":"snapshot"' in l]
    mt.check(len(seqs) >= 2, 'cat FILE: its snapshots %r' % seqs)
    for n in seqs[:-1] + [seqs[-1]]:
        r = memtally('cat', '%s@%d' % (f, n))
        lines = r.stdout.splitlines()
        last = json.loads(lines[-1]) if lines else {}
        mt.check(r.returncode == 0 and last.get('type') == 'snapshot' and last.get('seq') == n
                 and whole.startswith(r.stdout),
                 'cat FILE@%d: the file up to snapshot %d\'s line, ending there' % (n, n))
    r = memtally('cat', f + '@peak')
    mt.check(r.returncode == 0 and json.loads(r.stdout.splitlines()[-1])['type'] == 'snapshot',
             'cat FILE@peak ends on the peak\'s snapshot')
    r = memtally('cat', '%s@%d' % (f, 99999))
    mt.check(r.returncode == 1 and 'no snapshot 99999' in r.stderr, 'cat FILE@99999: exit 1, said: %r' % r.stderr.strip())
    r = memtally('cat', run3)
    heads = [l for l in r.stdout.splitlines() if l.startswith('{"type":"header"')]
    mt.check(r.returncode == 0 and len(heads) == 3, 'cat DIR: every file of the run (%d headers)' % len(heads))
    for bad in ('--json', '--bogus', '-x'):
        r = memtally('cat', bad, f)
        mt.check(r.returncode == 2 and bad in r.stderr and not r.stdout,
                 'cat %s FILE: a usage error naming it, nothing printed: %d %r' % (bad, r.returncode, r.stderr[:60]))

if mt.case('usage'):
    for cmd in ('report', 'leaks', 'functions', 'top', 'diff', 'ranks', 'oom', 'flame', 'html', 'torch',
                'pprof', 'cat', 'run'):
        r = memtally(cmd, '--frobnicate', run3)
        mt.check(r.returncode == 2 and '--frobnicate' in r.stderr,
                 '%s --frobnicate: exit 2, the option named: %d %r' % (cmd, r.returncode, r.stderr[:70]))

if mt.case('run'):
    # --steps and --set MEMTALLY_NAME reach the program's environment
    probe = 'echo "$MEMTALLY_STEPS $MEMTALLY_EVERY $MEMTALLY_DEPTH"'
    for args, want in ((['--steps', '7'], '7  '), (['--set', 'MEMTALLY_EVERY=300'], ' 300 '),
                       (['--set', 'every=300'], ' 300 '), (['--set', 'memtally_depth=20'], '  20')):
        d = os.path.join(OUT, 'env%d' % len(os.listdir(OUT)))
        r = memtally('run', '--out', d, *args, '--', 'sh', '-c', probe)
        mt.check(r.returncode == 0 and r.stdout.strip('\n') == want,
                 'run %s: the program sees %r (got %r %r)' % (' '.join(args), want, r.stdout, r.stderr[-100:]))
    r = memtally('run', '--out', os.path.join(OUT, 'e'), '--set', 'MEMTALLY_NOPE=1', '--', 'true')
    mt.check(r.returncode == 2 and 'MEMTALLY_NOPE is not a memtally variable' in r.stderr,
             'run --set MEMTALLY_NOPE=1: named once, usage error: %r' % r.stderr[:80])
    # --out naming a regular file: refused before the program starts
    reg = os.path.join(OUT, 'regular')
    open(reg, 'w').close()
    marker = os.path.join(OUT, 'started')
    r = memtally('run', '--out', reg, '--', 'touch', marker)
    mt.check(r.returncode == 2 and 'not a directory' in r.stderr and not os.path.exists(marker),
             'run --out FILE: exit 2 before the program starts: %d %r' % (r.returncode, r.stderr[:80]))
    r = memtally('run', '--out', os.path.join(reg, 'sub'), '--', 'touch', marker)
    mt.check(r.returncode == 2 and not os.path.exists(marker), 'run --out FILE/sub: exit 2, not started: %r' % r.stderr[:80])
    # 126 and 127, as a shell
    noexec = os.path.join(OUT, 'noexec.sh')
    with open(noexec, 'w') as fh:
        fh.write('#!/bin/sh\necho hi\n')
    for prog, want in ((noexec, 126), (os.path.join(OUT, 'missing'), 127), (OUT, 126)):
        r = memtally('run', '--out', os.path.join(OUT, 'x%d' % want), '--', prog)
        s = sh(['sh', '-c', '"$0"', prog])
        mt.check(r.returncode == want == s.returncode, 'run %s: exit %d as sh (%d, sh %d)'
                 % (os.path.basename(prog), want, r.returncode, s.returncode))

if mt.case('capi'):
    src = os.path.join(OUT, 'marks.c')
    with open(src, 'w') as fh:
        fh.write('#include "memtally.h"\n#include <stdio.h>\n#include <stdlib.h>\n'
                 'int main(void) {\n  void *keep[40];\n'
                 '  for (int i = 1; i <= 40; i++) { keep[i - 1] = malloc(100000); memtally_mark("step", i); }\n'
                 '  int r = memtally_snapshot("end");\n'
                 '  printf("mark=%d snapshot=%d\\n", memtally_mark("step", 41), r);\n'
                 '  for (int i = 0; i < 40; i++) free(keep[i]);\n  return 0;\n}\n')
    shutil.copy(src, src + 'c')  # marks.cc: C++
    builds = {'c-pie': ['cc', '-fPIE', '-pie', src], 'c-nopie': ['cc', '-fno-PIE', '-no-pie', src],
              'c++': ['c++', src + 'c'], 'c99-pedantic': ['cc', '-std=c99', '-pedantic', src]}
    if shutil.which('clang'):
        builds['clang-nopie'] = ['clang', '-fno-PIE', '-no-pie', src]
    for name, cc in builds.items():
        exe = os.path.join(OUT, 'marks-' + name)
        r = sh(cc + ['-Wall', '-Wextra', '-Werror', '-I', os.path.join(ROOT, 'shim'), '-o', exe])
        mt.check(r.returncode == 0, 'capi %s: builds from memtally.h alone, no -lmemtally: %r' % (name, r.stderr[-300:]))
        if r.returncode:
            continue
        needed = sh(['readelf', '-d', exe]).stdout
        mt.check('libmemtally' not in needed, 'capi %s: needs no libmemtally.so' % name)
        cwd = os.path.join(OUT, 'bare-' + name)
        os.mkdir(cwd)
        env = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_')}
        r = sh([exe], cwd=cwd, env=env)
        mt.check(r.returncode == 0 and r.stdout == 'mark=-1 snapshot=-1\n' and not os.listdir(cwd),
                 'capi %s: bare, it runs unchanged: exit 0, the API says -1, nothing written (%r, %r)'
                 % (name, r.stdout, os.listdir(cwd)))
        d = os.path.join(OUT, 'rec-' + name)
        r = memtally('run', '--out', d, '--', exe)
        fs = mt.files(d)
        marks = fs[0].snapshots[-1].get('marks') if fs else None
        reasons = [s['reason'] for s in fs[0].snapshots] if fs else []
        mt.check(r.returncode == 0 and r.stdout == 'mark=0 snapshot=0\n' and marks == {'step': 41}
                 and 'request' in reasons,
                 'capi %s: preloaded, its marks and its snapshot are recorded (%r, %r, %r)'
                 % (name, r.stdout, marks, reasons))
def size(t):
    n, u = t.split()
    return float(n) * {'B': 1, 'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}[u]


if mt.case('adds'):
    # rows + other = the total above them: diff (JSON, exact), report's and
    # functions' peak tables (text, to the printed precision), over --top
    # 1, 2, 50 and files that list every call site or only the largest
    d1 = os.path.join(OUT, 'top1')
    memtally('run', '--out', d1, '--top', '1', '--', trainer, '90')
    big = max(files3, key=lambda p: len(mt.File(p).snapshots))
    small = mt.jsonl(d1)[0]
    for top in ('1', '2', '50'):
        for a, b in ((files3[1], files3[2]), (small, big), (big, big + '@1')):
            d = json.loads(memtally('diff', '--json', '--top', top, a, b).stdout)
            for p in d['pairs']:
                for side in 'ab':
                    rows = sum(c['live_bytes_' + side] for c in p['callsites'])
                    mt.check(rows + p['other']['live_bytes_' + side] == p['live_bytes_' + side],
                             'diff --top %s %s: rows + other = live in %s (%d + %d = %d)'
                             % (top, os.path.basename(b), side.upper(), rows,
                                p['other']['live_bytes_' + side], p['live_bytes_' + side]))
                counted = [c for c in p['callsites'] if 'live_count_b' in c and c['live_count_b'] == 0
                           and c['live_bytes_b'] > 0]
                mt.check(not counted, 'diff --top %s: no count of 0 beside bytes' % top)
            txt = memtally('diff', '--top', top, a, b).stdout
            mt.check('(seq ' not in txt.split('\n')[0] or '@' in b,
                     'diff at the peak names when the peak was, not the carrying snapshot: %r' % txt.split('\n')[0])
        for f in (small, big):
            out = memtally('report', '--top', top, f).stdout
            head = re.search(r'high-water mark: (.*)\):', out)
            want = sum(size(x.split(' ', 1)[1]) for x in head.group(1).split(', '))
            table = out[head.end():].split('\n\n')[0].splitlines()[2:]
            got = sum(size(' '.join(l.split()[:2])) for l in table if l.strip())
            mt.check(abs(got - want) <= 0.01 * want + 1024 and (len(table) <= int(top) or 'other' in table[-1]),
                     'report --top %s %s: the peak table adds up to its heading (%d vs %d)'
                     % (top, os.path.basename(os.path.dirname(f)), got, want))
            out = memtally('functions', '--top', top, f).stdout
            want = size(re.search(r', (\S+ \S+) in all', out).group(1))
            rows = out.split('function\n')[1].split('\n\n')[0].splitlines()
            got = sum(size(' '.join((l.split('%')[1] if '%' in l else l).split()[:2])) for l in rows if l.strip())
            mt.check(abs(got - want) <= 0.01 * want + 1024,
                     'functions --top %s %s: self bytes + other = the heading (%d vs %d)'
                     % (top, os.path.basename(os.path.dirname(f)), got, want))

if mt.case('helpers'):
    # a PyTorch trainer with 2 DataLoader workers an epoch, 2 epochs: leaks
    # gives the trainer its section and the workers one line
    script = os.path.join(OUT, 'dl.py')
    with open(script, 'w') as fh:
        fh.write('import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n'
                 'ds = TensorDataset(torch.randn(256, 16), torch.randn(256, 1))\n'
                 'model = torch.nn.Linear(16, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.01)\n'
                 'keep = []\nfor epoch in range(2):\n'
                 '    for x, y in DataLoader(ds, batch_size=16, num_workers=2):\n'
                 '        loss = ((model(x) - y) ** 2).mean()\n'
                 '        opt.zero_grad(); loss.backward(); opt.step()\n'
                 '        keep.append(bytearray(50000))\n')
    d = os.path.join(OUT, 'dl')
    r = memtally('run', '--out', d, '--', '/usr/bin/python3', script, timeout=240)
    n = len(mt.files(d))
    mt.check(r.returncode == 0 and n == 5, 'the trainer and its 4 DataLoader workers: %d files' % n)
    out = memtally('leaks', d).stdout
    heads = [l for l in out.splitlines() if l.startswith('== ')]
    summary = [l for l in out.splitlines() if 'DataLoader worker' in l]
    mt.check(len(heads) == 1 and 'dl.py' in heads[0] and len(summary) == 1
             and summary[0].startswith('4 DataLoader workers:') and 'nothing grows' in summary[0],
             'leaks: one section for the trainer, one line for its workers: %r %r' % (heads, summary))
    out = memtally('report', d).stdout
    heads = [l for l in out.splitlines() if l.startswith('== ')]
    summary = [l for l in out.splitlines() if 'DataLoader worker' in l]
    mt.check(len(heads) == 1 and len(summary) == 1 and summary[0].startswith('4 DataLoader workers:'),
             'report: the trainer in full, its workers one line: %r %r' % (heads, summary))
    out = memtally('report', '--all-processes', d).stdout
    mt.check(len([l for l in out.splitlines() if l.startswith('== ')]) == n, 'report --all-processes: every process')
    out = memtally('leaks', '--all-processes', d).stdout
    heads = [l for l in out.splitlines() if l.startswith('== ')]
    mt.check(len(heads) == n, 'leaks --all-processes: every process in full (%d of %d)' % (len(heads), n))
    # ranks without ranks: the trainer alone is compared, workers not flagged
    out = memtally('ranks', d).stdout
    rows = [l for l in out.splitlines() if l.startswith('vm ')]
    mt.check(len(rows) == 1 and 'outlier' not in out and '4 processes not compared' in out,
             'ranks: the trainer compared, its 4 workers left out, none an outlier: %r' % out[-300:])
    # a worker's file named alone is shown in full: nothing to lead with
    alone = memtally('leaks', *[f.path for f in mt.files(d)
                                if f.header['pid'] != min(g.header['pid'] for g in mt.files(d))][:1]).stdout
    mt.check(alone.startswith('== '), 'leaks on a worker alone: its section: %r' % alone[:60])
mt.done()
