"""Damaged and hostile input in a directory (issue 33, item 9): a file is
read up to its damage and the lines before it are used; a damaged file
never takes the others with it; memory is bounded by the largest file,
not by the directory, nor by what a file claims to hold.

- cut: a file cut inside its first zstd frame (a process killed during
  its first write) beside a complete one: left out with a note, exit 0,
  the complete file reported (before: exit 1, nothing);
- corrupt: bytes overwritten in the middle of a compressed file: report,
  leaks and ranks show every file, the damaged one up to the damage,
  name the file and the byte, and exit 1 (before: nothing printed; ranks,
  which parses summaries only, exited 0 until issue 51);
- skiplen: a skippable frame whose length runs past the end of the file:
  every command names it with its byte, exit 1;
- bomb: 1 GiB of zeros in a 32 KiB zstd file: named as what it is ("a NUL
  byte") with a small peak RSS (before: 1 GiB read into memory and "no
  header record");
- longline: 300 MiB of spaces after a '{': refused at the line bound
  (256 MiB), named so;
- many: 40 files of 10 MB each read one at a time: `report` on the
  directory peaks at about what one file takes (before: the sum)."""
import itertools, json, os, shutil, struct, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
T = os.path.join(B, 'test')


def measured(argv):
    """(exit code, stdout, stderr, the child's own peak RSS in KiB from wait4)."""
    r, w = os.pipe()
    e_r, e_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        os.dup2(e_w, 2)
        os.close(r)
        os.close(e_r)
        os.execv(argv[0], argv)
    os.close(w)
    os.close(e_w)
    out = err = b''
    with os.fdopen(r, 'rb') as fo, os.fdopen(e_r, 'rb') as fe:
        out = fo.read()
        err = fe.read()
    _, status, ru = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors='replace'), err.decode(errors='replace'), ru.ru_maxrss


def program_files(name, n=2):
    d = os.path.join(OUT, name)
    for i in range(n):
        r = subprocess.run([os.path.join(B, 'memtally'), 'run', '--append', '--out', d, '--',
                            os.path.join(T, 'prog_trainer'), 'leak', '40'],
                           capture_output=True, text=True, env=dict(os.environ, MEMTALLY_EVERY='500'))
        assert r.returncode == 0, r.stderr
    return sorted(os.path.join(d, f) for f in os.listdir(d))


if mt.case('cut'):
    good, other = program_files('cut')
    data = open(other, 'rb').read()
    with open(other, 'wb') as f:  # killed during its first write
        f.write(data[:60])
    rc, out, err, _ = measured([MT, 'report', os.path.dirname(good)])
    mt.check(rc == 0 and out.count('== ') == 1 and 'prog_trainer leak 40' in out,
             'a file cut in its first frame beside a complete one: exit %d, %d process reported' %
             (rc, out.count('== ')))
    mt.check(other in err and 'first zstd frame' in err and 'left out' in err,
             'the cut file is named and left out: %r' % err.strip()[:300])
    rc, out, err, _ = measured([MT, 'report', other])
    mt.check(rc == 1 and 'no complete record' in err, 'named alone, it is bad input: exit %d %r' %
             (rc, err.strip()[:200]))

if mt.case('corrupt'):
    good, bad = program_files('corrupt')
    whole = subprocess.run([MT, 'report', '--json', bad], capture_output=True, text=True)
    nsnaps = len(json.loads(whole.stdout)['processes'][0]['snapshots'])
    data = bytearray(open(bad, 'rb').read())
    # in a snapshot's frame near the middle, not in a summary frame
    # (doc/FORMAT.md: zstd skips those; the summary reader checks them)
    mid = len(data) // 2
    summ = struct.pack('<I', 0x184D2A5E)
    at = data.find(summ, mid)
    while at > 0:
        end = at + 8 + struct.unpack('<I', data[at + 4:at + 8])[0]
        at = data.find(summ, end)
        if at - end > 200:
            mid = (end + at) // 2 - 32
            break
    for i in range(mid, mid + 64):
        data[i] ^= 0x5a
    with open(bad, 'wb') as f:
        f.write(bytes(data))
    for cmd in ('report', 'leaks', 'ranks'):
        rc, out, err, _ = measured([MT, cmd, '--json', os.path.dirname(good)])
        try:
            j = json.loads(out)
        except ValueError:
            j = None
        procs = (j or {}).get('processes') or (j or {}).get('ranks') or []
        # ranks too (issue 51: it parsed the summary frames and decoded
        # no frame that had one, and exited 0 on this damage): it decodes
        # every frame to check it, and a damaged one sends the file to
        # the line reader, which says it as report does
        mt.check(rc == 1 and len(procs) == 2,
                 '%s: both files reported, exit 1 (exit %d, %d processes)' % (cmd, rc, len(procs)))
        mt.check(bad in err and 'corrupt zstd data' in err and 'byte' in err,
                 '%s: the damaged file and where: %r' % (cmd, err.strip()[:300]))
    rc, out, err, _ = measured([MT, 'report', '--json', bad])
    got = len(json.loads(out)['processes'][0]['snapshots']) if out else -1
    mt.check(0 < got < nsnaps, 'the damaged file: %d of its %d snapshots, those before the damage' %
             (got, nsnaps))
    rc, out, err, _ = measured([MT, 'report', bad])
    mt.check('DAMAGED' in out, 'report says the file is damaged')

# Issue 51: a skippable frame whose length runs past the end of the file
# (its length field damaged) took the rest of the file with it, said by
# nobody, exit 0: the stream decoder skipped to the end, the summary
# reader took it for a file cut there.  Now damage, named by file and
# byte by every command that reads the file, after the lines before it.
if mt.case('skiplen'):
    good, bad = program_files('skiplen')
    whole = subprocess.run([MT, 'report', '--json', bad], capture_output=True, text=True)
    nsnaps = len(json.loads(whole.stdout)['processes'][0]['snapshots'])
    data = bytearray(open(bad, 'rb').read())
    at = data.find(struct.pack('<I', 0x184D2A5E), len(data) // 2)
    data[at + 4:at + 8] = struct.pack('<I', 0x7FFFFFFF)
    with open(bad, 'wb') as f:
        f.write(bytes(data))
    said = '%s: the skippable frame that begins at byte %d says it holds 2147483647 bytes, past the end' % (bad, at)
    o = lambda n: ['-o', os.path.join(OUT, n)]
    for argv in (['report', bad], ['leaks', bad], ['ranks', os.path.dirname(bad)], ['functions', bad],
                 ['diff', good, bad], ['top', '--once', bad], ['cat', bad], ['flame', bad] + o('s.svg'),
                 ['html', bad] + o('s.html'), ['pprof', bad] + o('s.pb.gz')):
        try:
            r = subprocess.run([MT] + argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            mt.check(r.returncode == 1 and said in r.stderr,
                     '%s: the damaged length named, exit %d %r' % (argv[0], r.returncode, r.stderr.strip()[-300:]))
        except subprocess.TimeoutExpired:
            mt.check(False, '%s: ran past 60 s' % argv[0])
    r = subprocess.run([MT, 'report', '--json', bad], capture_output=True, text=True)
    got = len(json.loads(r.stdout)['processes'][0]['snapshots']) if r.stdout else -1
    mt.check(0 < got < nsnaps, 'the snapshots before the frame are used: %d of %d' % (got, nsnaps))
    # A summary cut inside its frame (a process killed inside that write)
    # is the file's normal end, as a cut zstd frame is: no damage said
    # (test_ranks_many cuts it in more places for ranks).
    data = open(good, 'rb').read()
    last = data.rfind(struct.pack('<I', 0x184D2A5E))
    cut = os.path.join(OUT, 'memtally.sumcut.p1.jsonl.zst')
    with open(cut, 'wb') as f:
        f.write(data[:last + 8 + 20])
    for argv in (['report', cut], ['ranks', cut], ['top', '--once', cut], ['cat', cut]):
        r = subprocess.run([MT] + argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        mt.check(r.returncode == 0 and 'skippable' not in r.stderr,
                 '%s: a summary cut inside its frame is a cut, not damage: exit %d %r'
                 % (argv[0], r.returncode, r.stderr.strip()[-300:]))

if mt.case('bomb'):
    p = os.path.join(OUT, 'memtally.bomb.p1.jsonl.zst')
    subprocess.run('head -c 1G /dev/zero | zstd -1 -q -c > %s' % p, shell=True, check=True)
    rc, out, err, kb = measured([MT, 'report', p])
    mt.check(rc == 1 and 'a NUL byte' in err and 'no header' not in err,
             'a zstd bomb of zeros (%d KiB) is named: exit %d %r' % (os.path.getsize(p) >> 10, rc,
                                                                     err.strip()[:200]))
    mt.check(kb < 64 * 1024, 'reading it peaks at %d KiB (bound 64 MiB)' % kb)

if mt.case('longline'):
    p = os.path.join(OUT, 'memtally.long.p1.jsonl.zst')
    subprocess.run("(printf '{'; head -c 300M /dev/zero | tr '\\0' ' ') | zstd -1 -q -c > %s" % p,
                   shell=True, check=True)
    rc, out, err, kb = measured([MT, 'report', p])
    mt.check(rc == 1 and 'longer than 256 MiB' in err,
             'a 300 MiB line is refused at the bound: exit %d %r' % (rc, err.strip()[:200]))
    print('  (peak RSS %d MiB)' % (kb >> 10))

if mt.case('many'):
    d = os.path.join(OUT, 'many')
    os.makedirs(d, exist_ok=True)
    one = os.path.join(d, 'memtally.h.p1.jsonl')
    with open(one, 'w') as f:
        f.write('{"type":"header","version":3,"pid":1,"host":"h","exe":"/x","argv":["x"]}\n')
        for s in range(1, 401):
            f.write('{"type":"stack","id":%d,"pcs":["0x%x","0x%x"]}\n' % (s, 0x1000 + s, 0x2000 + s))
        row = ('{"stack":%d,"kind":"heap","live_bytes":%d,"live_count":%d,"allocs":%d,'
               '"alloc_bytes":%d,"frees":0,"peak_bytes":%d}')
        for k in range(150):
            f.write('{"type":"snapshot","seq":%d,"reason":"every","elapsed_ms":%d,"heap":{"live_bytes":%d},'
                    '"callsites_mode":"full","callsites":[' % (k, k * 100, k * 400) +
                    ','.join(row % (s, k * s, k, k, k * s, k * s) for s in range(1, 401)) + ']}\n')
    for i in range(2, 41):
        os.link(one, os.path.join(d, 'memtally.h.p%d.jsonl' % i))
    single = os.path.join(OUT, 'single')
    os.makedirs(single, exist_ok=True)
    shutil.copy(one, single)
    rc1, _, _, kb1 = measured([MT, 'report', single])
    rc, out, err, kb = measured([MT, 'report', d])
    mt.check(rc == 0 and rc1 == 0 and out.count('== ') == 40, '40 files reported (exit %d)' % rc)
    mt.check(kb < kb1 * 3 // 2 + 16 * 1024,
             '40 files of %d MB peak at %d KiB, one at %d KiB' % (os.path.getsize(one) >> 20, kb, kb1))


# Issue 45.  A file cut inside its first zstd frame after 1,220 records
# (a header and stacks; the snapshot cut): said where it was cut and what
# that frame gave, exit 1 named alone (before: "no snapshots (the process
# wrote only its header)", exit 0); in a directory, left out with that
# note beside a complete file.  The same for a plain file cut in its
# first snapshot line.
def stacks_then_snapshot(nstacks):
    out = ['{"type":"header","version":3,"pid":1,"host":"h","exe":"/x","argv":["x"]}']
    out += ['{"type":"stack","id":%d,"pcs":["0x%x","0x%x","0x%x"]}' % (s, 0x400000 + s * 7919, 0x500000 + s * 31,
                                                                      0x600000 + s * 13) for s in range(1, nstacks + 1)]
    row = ('{"stack":%d,"kind":"heap","live_bytes":%d,"live_count":1,"allocs":1,"alloc_bytes":%d,"frees":0,'
           '"peak_bytes":%d}')
    out.append('{"type":"snapshot","seq":0,"reason":"every","elapsed_ms":5,"heap":{"live_bytes":100},"callsites":[' +
               ','.join(row % (s, s * 16, s * 16, s * 16) for s in range(1, nstacks + 1)) + ']}')
    return ('\n'.join(out) + '\n').encode()

if mt.case('cutframe'):
    for nstacks in (1219, 3000):  # frames of several 128 KiB blocks: the first decodes alone
        d = os.path.join(OUT, 'cutframe%d' % nstacks)
        os.makedirs(d)
        data = stacks_then_snapshot(nstacks)
        z = subprocess.run(['zstd', '-q', '-c', '-3'], input=data, capture_output=True, check=True).stdout
        cutz = os.path.join(d, 'memtally.h.p1.jsonl.zst')
        with open(cutz, 'wb') as f:
            f.write(z[:-100])
        rc, out, err, _ = measured([MT, 'report', cutz])
        got = subprocess.run(['zstd', '-q', '-d', '-c'], input=z[:-100], capture_output=True).stdout
        whole = got.count(b'\n')
        mt.check(rc == 1 and 'cut at byte %d, inside the zstd frame that begins at byte 0' % (len(z) - 100) in err and
                 'that frame gave %d whole records (lines 1-%d)' % (whole, whole) in err and 'no snapshots' not in out,
                 '%d stacks, zstd cut in its first frame, named: exit %d, %r' % (nstacks, rc, err.strip()[-300:]))
        plain = os.path.join(OUT, 'memtally.cutplain%d.p1.jsonl' % nstacks)
        with open(plain, 'wb') as f:
            f.write(data[:-300])
        rc, out, err, _ = measured([MT, 'report', plain])
        mt.check(rc == 1 and '%s:%d: cut inside this line' % (plain, nstacks + 2) in err and
                 'the %d records before it hold no snapshot' % (nstacks + 1) in err,
                 '%d stacks, plain file cut in its first snapshot: exit %d, %r' % (nstacks, rc, err.strip()[-300:]))
        shutil.copy(os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'memtally.v2.p3664.jsonl'), d)
        rc, out, err, _ = measured([MT, 'report', d])
        mt.check(rc == 0 and out.count('== ') == 1 and cutz in err and 'left out' in err,
                 '%d stacks, in a directory beside a whole file: left out, exit %d, %r' % (nstacks, rc, err.strip()[-300:]))

# Memory follows what differs: one snapshot of 300 rows 3,000 times (a
# 250 KB .zst of 130 MB) held 80 bytes a row each time (72 MB; the
# issue's 197 KB file, 1.28 GB).  With increasing seqs they are distinct
# snapshots of one content: their rows are kept once, and every snapshot
# still reads the same; with one seq they are duplicates, refused.
if mt.case('repeat'):
    N, K = 300, 3000
    hdr = ['{"type":"header","version":3,"pid":1,"host":"h","exe":"/x","argv":["x"]}']
    hdr += ['{"type":"stack","id":%d,"pcs":["0x%x","0x%x"]}' % (s, 0x400000 + s * 7919, 0x500000 + s * 31)
            for s in range(1, N + 1)]
    row = ('{"stack":%d,"kind":"heap","live_bytes":%d,"live_count":1,"allocs":1,"alloc_bytes":%d,"frees":0,'
           '"peak_bytes":%d}')
    rows = ','.join(row % (s, s * 16, s * 16, s * 16) for s in range(1, N + 1))
    for name, seq, mode in (('incr', lambda i: i, 'full'), ('same', lambda i: 0, 'full'),
                            ('delta', lambda i: i, 'delta')):
        p = os.path.join(OUT, 'memtally.rep%s.p1.jsonl.zst' % name)
        size = 0
        with open(p, 'wb') as f:
            z = subprocess.Popen(['zstd', '-q', '-c', '-3'], stdin=subprocess.PIPE, stdout=f)
            # one line at a time: measured()'s child starts as a fork of
            # this process, and its peak RSS counts what this one holds
            for chunk in itertools.chain(['\n'.join(hdr) + '\n'], (
                    '{"type":"snapshot","seq":%d,"reason":"every","elapsed_ms":%d,"heap":{"live_bytes":100},'
                    '"callsites_mode":"%s","callsites":[%s]}\n' % (seq(i), 5 + i, 'full' if not i else mode, rows)
                    for i in range(K))):
                z.stdin.write(chunk.encode())
                size += len(chunk)
            z.stdin.close()
            z.wait()
        rc, out, err, kb = measured([MT, 'report', p])
        if name == 'same':
            mt.check(rc == 1 and 'a duplicate snapshot' in err and kb < 64 * 1024,
                     'one snapshot 3,000 times, one seq: refused (exit %d, %d KiB) %r' % (rc, kb, err.strip()[-200:]))
            continue
        mt.check(rc == 0 and '%d snapshots' % K in out and kb < 48 * 1024 and kb * 1024 < 8 * size,
                 '%s: %d snapshots of one content (%d MB of JSONL in %d KB): %d KiB peak (bound 48 MiB)'
                 % (name, K, size >> 20, os.path.getsize(p) >> 10, kb))
        def sites(at):
            r = subprocess.run([MT, 'report', '--json', '--top', '1000', '--snapshot', str(at), p],
                               capture_output=True, text=True)
            return json.loads(r.stdout)['processes'][0]['last']['callsites'] if r.returncode == 0 else r.stderr
        first = sites(0)
        mt.check(len(first) == N and all(sites(at) == first for at in (1, K // 2, K - 1)),
                 '%s: snapshots 1, %d and %d read as snapshot 0 (%d rows, kept once)' % (name, K // 2, K - 1, len(first)))

# Small records that each cost much more than their text (bare snapshots
# of 70 bytes, 1 KB each in the model): reading stops at 8 times the text.
if mt.case('smallrecs'):
    p = os.path.join(OUT, 'memtally.small.p1.jsonl')
    with open(p, 'w') as f:
        f.write('{"type":"header","version":3,"pid":1,"host":"h","exe":"/x","argv":["x"]}\n')
        for i in range(400000):
            f.write('{"type":"snapshot","seq":%d,"reason":"x","elapsed_ms":%d,"callsites":[]}\n' % (i, i))
    rc, out, err, kb = measured([MT, 'report', p])
    mt.check(rc == 1 and 'more than 8 times their text' in err and kb < 64 * 1024,
             '400,000 bare snapshots (%d MB): stopped at the bound, exit %d, %d KiB %r'
             % (os.path.getsize(p) >> 20, rc, kb, err.strip()[-200:]))

# Two `memtally run` into one directory at once: the second is refused
# while the first runs (flock on .memtally-run.lock, released when its
# owner ends or dies); ranks of one launcher job share it.
if mt.case('lock'):
    import signal, time
    d = os.path.join(OUT, 'locked')
    lockf = os.path.join(d, '.memtally-run.lock')
    def first():
        p = subprocess.Popen([MT, 'run', '--out', d, '--append', '--', 'sleep', '30'], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        for _ in range(200):
            if os.path.exists(lockf) and open(lockf).read().strip():
                break
            time.sleep(0.05)
        return p
    again = lambda env=None: subprocess.run([MT, 'run', '--out', d, '--append', '--', 'true'], capture_output=True,
                                            text=True, timeout=60, env=dict(os.environ, **(env or {})))
    p = first()
    r = again()
    mt.check(r.returncode == 2 and 'is being written by another memtally run (pid %d' % p.pid in r.stderr,
             'a second run into a directory being written: refused, exit %d %r' % (r.returncode, r.stderr.strip()[-200:]))
    os.killpg(p.pid, signal.SIGKILL)  # the owner dies: the kernel drops its lock
    p.wait()
    r = again()
    mt.check(r.returncode == 0, 'after its owner was killed: taken (exit %d %r)' % (r.returncode, r.stderr.strip()[-200:]))
    mt.check(not os.path.exists(lockf), 'the last run out removes the lock file')
    job = {'SLURM_JOB_ID': '7', 'SLURM_STEP_ID': '0'}
    p = subprocess.Popen([MT, 'run', '--out', d, '--append', '--', 'sleep', '30'], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, env=dict(os.environ, **job))
    for _ in range(200):
        if os.path.exists(lockf) and open(lockf).read().strip():
            break
        time.sleep(0.05)
    r = again(job)
    mt.check(r.returncode == 0, 'a rank of the same job joins (exit %d %r)' % (r.returncode, r.stderr.strip()[-200:]))
    r = again({'SLURM_JOB_ID': '8', 'SLURM_STEP_ID': '0'})
    mt.check(r.returncode == 2, 'a rank of another job is refused (exit %d)' % r.returncode)
    r = again()
    mt.check(r.returncode == 2, 'a plain run is refused (exit %d)' % r.returncode)
    os.killpg(p.pid, signal.SIGTERM)
    p.wait()

mt.done()
