"""Damaged and hostile input in a directory (issue 33, item 9): a file is
read up to its damage and the lines before it are used; a damaged file
never takes the others with it; memory is bounded by the largest file,
not by the directory, nor by what a file claims to hold.

- cut: a file cut inside its first zstd frame (a process killed during
  its first write) beside a complete one: left out with a note, exit 0,
  the complete file reported (before: exit 1, nothing);
- corrupt: bytes overwritten in the middle of a compressed file: report,
  leaks and ranks show every file, the damaged one up to the damage,
  name the file and the byte, and exit 1 (before: nothing printed);
- bomb: 1 GiB of zeros in a 32 KiB zstd file: named as what it is ("a NUL
  byte") with a small peak RSS (before: 1 GiB read into memory and "no
  header record");
- longline: 300 MiB of spaces after a '{': refused at the line bound
  (256 MiB), named so;
- many: 40 files of 10 MB each read one at a time: `report` on the
  directory peaks at about what one file takes (before: the sum)."""
import json, os, shutil, struct, subprocess, sys
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
        if cmd == 'ranks' and rc == 0:
            # ranks reads each snapshot's summary frame (checked on its
            # own) and decodes no frame that has one: damage inside the
            # rows it does not read leaves its answer whole
            mt.check(len(procs) == 2 and all(p['snapshots'] == nsnaps for p in procs),
                     'ranks: both files, every snapshot, from their summaries')
            continue
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

mt.done()
