"""Golden outputs: every text command (and each --json form) on the fixed
inputs in test/golden/in (made by test/golden/make_fixtures.py: two ranks
of a Python trainer, rank 0 leaking at one line, and a CUDA OOM dump),
compared byte for byte with test/golden/<case>.txt.  A change in what a
command prints shows here as a diff to read; when it is meant,
MEMTALLY_GOLDEN_UPDATE=1 rewrites the files (review them in the commit).
MEMTALLY_CASE=<case> runs one."""
import difflib, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B = os.environ['MT_BUILD']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
G = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'golden')
IN = os.path.join(G, 'in')
R0 = os.path.join(IN, 'memtally.node1.r0.p100.jsonl')
R1 = os.path.join(IN, 'memtally.node1.r1.p101.jsonl')
UPDATE = os.environ.get('MEMTALLY_GOLDEN_UPDATE') == '1'

CASES = [
    ('report', ['report', IN]),
    ('report-json', ['report', '--json', R0]),
    ('report-stacks', ['report', '--stacks', '--top', '3', R0]),
    ('leaks', ['leaks', IN]),
    ('leaks-json', ['leaks', '--json', IN]),
    ('ranks', ['ranks', IN]),
    ('ranks-json', ['ranks', '--json', IN]),
    ('oom', ['oom', IN]),
    ('oom-json', ['oom', '--json', IN]),
    ('diff', ['diff', R1, R0]),
    ('diff-json', ['diff', '--json', R1, R0]),
    ('report-80', ['report', R0]),  # a terminal of 80 columns (COLUMNS=80)
    ('report-kind-heap', ['report', '--kind', 'heap', R0]),  # the peak by heap alone
    ('flame-folded', ['flame', '--folded', '--snapshot', 'peak', IN]),
    ('functions', ['functions', IN]),
    ('functions-json', ['functions', '--json', R0]),
    ('metrics', ['metrics', IN]),
    ('metrics-peak', ['metrics', '--at', 'peak', '--top', '3', R0]),
    ('report-phases', ['report', R1]),  # rank 1's phases: the mmap peak in a checkpoint
    ('diff-phases', ['diff', R1 + '@phase:checkpoint save', R1 + '@last']),  # a phase against the end
]

for name, args in CASES:
    if not mt.case(name):
        continue
    env = {k: v for k, v in os.environ.items() if k != 'COLUMNS'}  # a pipe: whole names
    if name.endswith('-80'):
        env['COLUMNS'] = '80'
    r = subprocess.run([MT] + args, capture_output=True, text=True, cwd=G, env=env)
    # paths in the output are the inputs' own: make them relative
    got = ('$ memtally %s\n' % ' '.join(os.path.relpath(a, G) if a.startswith('/') else a for a in args) +
           r.stdout.replace(G + '/', '') + r.stderr.replace(G + '/', '') + ('[exit %d]\n' % r.returncode))
    path = os.path.join(G, name + '.txt')
    if UPDATE:
        with open(path, 'w') as f:
            f.write(got)
    want = open(path).read() if os.path.exists(path) else ''
    if got != want:
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                   'golden/' + name + '.txt', 'now', n=2))
    mt.check(got == want, '%s: output as in golden/%s.txt' % (name, name))
mt.done()
