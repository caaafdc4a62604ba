"""The output file compressed (MEMTALLY_COMPRESS=1, the default; issue 14).

- default: `.jsonl.zst`, a zstd frame for the header, then one per snapshot (zstd's own `-l`
  counts them), which zstd's command decodes to exactly what `memtally cat`
  prints;
- the same program with MEMTALLY_COMPRESS=0 writes `.jsonl` with the same
  snapshots (report --json of prog_known, snapshots on allocation counts
  alone: exact counts and bytes), and every command answers the same from
  a `.jsonl.zst` and its decompressed `.jsonl` (no figure that depends on
  when a run took its snapshots is compared);
- a file cut inside its last frame (a process killed mid-write) reads back
  with every earlier snapshot; a corrupt frame is refused naming the file;
- `memtally top --once` reads a compressed directory;
- `memtally cat` on a plain file passes it through byte for byte."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
T = os.path.join(B, 'test')


def run(name, env, prog=('prog_trainer', 'leak', '40')):
    d = os.path.join(OUT, name)
    e = dict(os.environ, MEMTALLY_EVERY='2000')
    e.pop('MEMTALLY_COMPRESS', None)
    e.update(env)
    r = subprocess.run([MT, 'run', '--out', d, '--', os.path.join(T, prog[0])] + list(prog[1:]),
                       capture_output=True, text=True, env=e)
    mt.eq(r.returncode, 0, '%s: the program ran (%s)' % (name, r.stderr[-200:]))
    return d


def cat(path):
    r = subprocess.run([MT, 'cat', path], capture_output=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def report(path):
    r = subprocess.run([MT, 'report', '--json', '--top', '20', path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)['processes'][0]
    return ([(s['reason'], s.get('heap_live_bytes'), s.get('mmap_live_bytes')) for s in p['snapshots']],
            sorted((c['where'], c['live_bytes'], c['allocs']) for c in p['last']['callsites']))


if mt.case('default'):
    d = run('zst', {})
    names = os.listdir(d)
    mt.check(len(names) == 1 and names[0].endswith('.jsonl.zst'), 'the default file is .jsonl.zst: %s' % names)
    p = os.path.join(d, names[0])
    plain = subprocess.run(['zstd', '-dcq', p], capture_output=True).stdout
    mt.check(plain == cat(p) and plain.startswith(b'{"type":"header"'),
             'zstd -dc and memtally cat give the same JSON lines (%d bytes)' % len(plain))
    snaps = plain.count(b'"type":"snapshot"')
    m = re.search(r'^\s*(\d+)\s+(\d+)\s', subprocess.run(['zstd', '-l', p], capture_output=True,
                                                          text=True).stdout.split('\n')[1])
    # the header's frame (issue 45: written as the file is made), then each
    # snapshot's frame and its summary's skippable frame (doc/FORMAT.md)
    mt.check(m and int(m.group(1)) == 2 * snaps + 1 and int(m.group(2)) == snaps and snaps >= 3,
             'a frame for the header, then one per snapshot and a summary each (%s frames, '
             '%s skippable, %d snapshots)' % (m and m.group(1), m and m.group(2), snaps))
    data = open(p, 'rb').read()
    summ = 0
    at = data.find(b'\x5e\x2a\x4d\x18')
    while at >= 0:
        n = 8 + int.from_bytes(data[at + 4:at + 8], 'little')
        summ += n
        at = data.find(b'\x5e\x2a\x4d\x18', at + n)
    mt.check((len(data) - summ) * 2 < len(plain), 'compressed %d -> %d bytes (and %d of summaries)'
             % (len(plain), len(data) - summ, summ))
    mt.check(summ <= 1024 * snaps, 'summaries: %d bytes a snapshot' % (summ // snaps))

if mt.case('same'):
    # Two runs, one written each way, snapshot on counts alone (every 500
    # allocations, and the exit): the cadence's time snapshots and the rise
    # check's (every 100 ms) fall where the clock says, and would make the
    # runs differ by when they ran, not by the format.
    fixed = {'MEMTALLY_EVERY': '500', 'MEMTALLY_CADENCE': '0', 'MEMTALLY_RISE': '0'}
    a = run('same-zst', fixed, ('prog_known',))
    b = run('same-plain', dict(fixed, MEMTALLY_COMPRESS='0'), ('prog_known',))
    pa, pb = [os.path.join(x, os.listdir(x)[0]) for x in (a, b)]
    mt.check(pa.endswith('.jsonl.zst') and pb.endswith('.jsonl'), 'names: %s, %s' % (pa, pb))
    ra, rb = report(pa), report(pb)
    mt.check(ra == rb and len(ra[0]) >= 3, 'report --json: the same snapshots and call sites from '
             'the shim\'s two writers (%d snapshots: %s; %r)' % (len(ra[0]), ra[0], rb[0]))
    # Answers that weigh time (leaks: the start-up is the first 20% of the
    # run's time) on the same records: the compressed file and its own
    # decompressed copy.
    c = os.path.join(OUT, 'same-copy')
    os.makedirs(c, exist_ok=True)
    with open(os.path.join(c, os.path.basename(pa)[:-len('.zst')]), 'wb') as f:
        f.write(subprocess.run(['zstd', '-dcq', pa], capture_output=True, check=True).stdout)
    for cmd in ('report', 'leaks', 'functions', 'flame --folded'):
        oa = subprocess.run([MT] + cmd.split() + [a], capture_output=True, text=True)
        oc = subprocess.run([MT] + cmd.split() + [c], capture_output=True, text=True)
        strip = lambda s: re.sub(r'\S*\.jsonl(\.zst)?', '', s)
        mt.check(oa.returncode == 0 and oa.stdout and strip(oa.stdout) == strip(oc.stdout),
                 '%s: the same answer from the .jsonl.zst and its .jsonl' % cmd)

if mt.case('cut'):
    d = run('cut', {})
    p = os.path.join(d, os.listdir(d)[0])
    whole = subprocess.run(['zstd', '-dcq', p], capture_output=True).stdout
    n = whole.count(b'"type":"snapshot"')
    data = open(p, 'rb').read()
    cutp = os.path.join(OUT, 'memtally.cut.p1.jsonl.zst')
    with open(cutp, 'wb') as f:  # the last frame loses its second half
        f.write(data[:len(data) - 300])
    r = subprocess.run([MT, 'report', '--json', cutp], capture_output=True, text=True)
    got = len(json.loads(r.stdout)['processes'][0]['snapshots']) if r.returncode == 0 else -1
    mt.check(got in (n - 1, n), 'a file cut in its last frame: %d of %d snapshots read (exit %d %s)' %
             (got, n, r.returncode, r.stderr[-200:]))
    bad = bytearray(data)
    for i in range(len(bad) // 2, len(bad) // 2 + 64):
        bad[i] ^= 0x5a
    badp = os.path.join(OUT, 'memtally.bad.p1.jsonl.zst')
    with open(badp, 'wb') as f:
        f.write(bytes(bad))
    r = subprocess.run([MT, 'report', badp], capture_output=True, text=True)
    mt.check(r.returncode == 1 and (badp + ':') in r.stderr and r.returncode < 128,
             'a corrupt frame: exit 1 naming the file (%d: %r)' % (r.returncode, r.stderr.strip()[:200]))

if mt.case('top'):
    d = run('top', {})
    r = subprocess.run([MT, 'top', '--once', d], capture_output=True, text=True, env=dict(os.environ, COLUMNS='120'))
    mt.check(r.returncode == 0 and 'prog_trainer leak 40' in r.stdout and 'leak_history' in r.stdout,
             'top --once reads a compressed run: %r' % r.stdout[:300])

if mt.case('cat-plain'):
    d = run('cat-plain', {'MEMTALLY_COMPRESS': '0'})
    p = os.path.join(d, os.listdir(d)[0])
    mt.eq(cat(p) == open(p, 'rb').read(), True, 'memtally cat passes a plain file through')
    r = subprocess.run([MT, 'cat'], capture_output=True, text=True)
    mt.check(r.returncode == 2 and 'no input files' in r.stderr, 'cat without a file: usage, exit 2')

mt.done()
