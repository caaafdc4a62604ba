"""`memtally ranks` over many rank files reads each file's summary (its
snapshots' totals and marks), not its model: made from a real two-rank
run (rank 1 leaks) copied into 16, 64 and 128 rank files with the leaking
rank at the start, middle and end (test/bench/gen_ranks.py, as `make
bench` makes 1,024), the outlier is named every time and the command's
peak RSS grows by a small summary a file, far below a model a file.  The
summary equals the one the line reader makes (plain JSONL, and a zstd
file without summary frames), and a file cut where a killed process
leaves it (inside a snapshot's frame, between a frame and its summary,
inside the summary; and a real SIGKILL) has every snapshot that `memtally
cat` decodes from it."""
import glob, json, os, shutil, signal, struct, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
ROOT = os.path.join(os.path.dirname(__file__), '..', '..')
GEN = os.path.join(ROOT, 'test', 'bench', 'gen_ranks.py')
MEMTALLY = os.path.join(B, 'memtally')
MAGIC = struct.pack('<I', 0x184D2A5E)

# Each rank imports a few modules (stacks: a model of some size), then
# allocates and frees every 5 ms; rank 1 keeps 64 KiB each time.
SCRIPT = r'''
import os, sys, time, json, decimal, email.parser, xml.dom.minidom, argparse, unittest
rank = int(os.environ['RANK'])
keep = []
for i in range(int(sys.argv[1])):
    b = bytearray(64 << 10)
    if rank == 1:
        keep.append(b)
    time.sleep(0.005)
'''


def env(out, rank):
    return dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=out,
                MEMTALLY_COMPRESS='1', MEMTALLY_INTERVAL='0.02', RANK=str(rank),
                WORLD_SIZE='2')


def job(out, loops):
    for rank in (0, 1):
        r = subprocess.run(['/usr/bin/python3', '-c', SCRIPT, str(loops)], env=env(out, rank),
                           capture_output=True, text=True, timeout=120)
        mt.eq(r.returncode, 0, 'rank %d runs (%s)' % (rank, r.stderr[-300:]))


def ranks(path, extra=()):
    """ranks --json and the command's peak RSS in KiB"""
    r = subprocess.run(['/usr/bin/time', '-f', 'maxrss %M', MEMTALLY, 'ranks', '--json', *extra,
                        path], capture_output=True, text=True, timeout=300)
    mt.eq(r.returncode, 0, 'ranks %s (%s)' % (path, r.stderr[-300:]))
    rss = int(r.stderr.strip().splitlines()[-1].split()[1])
    return json.loads(r.stdout), rss


def snaps_in_cat(path):
    r = subprocess.run([MEMTALLY, 'cat', path], capture_output=True, text=True, timeout=60)
    return r.stdout.count('"type":"snapshot"')


tpl = os.path.join(OUT, 'job')
job(tpl, 200)
files = sorted(glob.glob(os.path.join(tpl, '*.jsonl.zst')))
mt.eq(len(files), 2, 'two rank files')
for f in files:
    mt.check(open(f, 'rb').read().count(MAGIC) >= 10, '%s has summary frames' % f)

# --- many files: the outlier named, memory a small summary a file ---
if mt.case('many'):
    rss = {}
    for n in (16, 64, 128):
        for out_rank in (0, n // 2, n - 1):
            d = os.path.join(OUT, 'r%d' % n)
            shutil.rmtree(d, ignore_errors=True)
            subprocess.run(['/usr/bin/python3', GEN, tpl, d, str(n), str(out_rank)], check=True,
                           capture_output=True)
            got, rss[n] = ranks(d)
            mt.eq(len(got['ranks']), n, '%d ranks: a row each' % n)
            mt.eq(got['outliers'], [out_rank], '%d ranks: rank %d named' % (n, out_rank))
            text = subprocess.run([MEMTALLY, 'ranks', d], capture_output=True, text=True).stdout
            mt.check(any(' r%d ' % out_rank in l and 'outlier: growth' in l
                         for l in text.splitlines()), '%d ranks: the text names r%d' % (n, out_rank))
    # The same files read whole (report reads one model at a time): what
    # one file's model costs, to compare the summary with.
    one = sorted(glob.glob(os.path.join(OUT, 'r16', '*.zst')))[0]
    r = subprocess.run(['/usr/bin/time', '-f', 'maxrss %M', MEMTALLY, 'report', one],
                       capture_output=True, text=True, timeout=120)
    model_kb = int(r.stderr.strip().splitlines()[-1].split()[1])
    per_file = (rss[128] - rss[16]) / 112.0
    print('peak RSS: 16 files %d KiB, 64 files %d KiB, 128 files %d KiB; %.0f KiB a file; '
          'report of one file %d KiB' % (rss[16], rss[64], rss[128], per_file, model_kb))
    # generous: 256 KiB a file (the summaries are ~100 bytes... 1 KiB a
    # snapshot), and far below what 112 more models would take
    mt.check(per_file <= 256, 'ranks holds a summary a file (%.0f KiB a file)' % per_file)
    mt.check(rss[128] <= 64 * 1024 + 128 * 256, 'ranks over 128 files: %d KiB' % rss[128])

# --- the summary path equals the line reader's ---
if mt.case('same'):
    for how in ('plain', 'oneframe'):
        want, _ = ranks(tpl)
        d = os.path.join(OUT, how)
        os.makedirs(d, exist_ok=True)
        for f in files:
            data = subprocess.run(['zstd', '-qdc', f], capture_output=True, check=True).stdout
            name = os.path.basename(f)
            if how == 'plain':
                open(os.path.join(d, name[:-4]), 'wb').write(data)
            else:  # one frame, no summaries: decoded and scanned
                subprocess.run(['zstd', '-q', '-o', os.path.join(d, name)], input=data, check=True)
        got, _ = ranks(d)
        for g, w in zip(got['ranks'], want['ranks']):
            g.pop('file'), w.pop('file')
        mt.eq(got, want, '%s: the same answer as the summary frames give' % how)
    # summaries damaged (a byte changed): zstd's checksum or decoding
    # refuses them, the frames are read
    want, _ = ranks(tpl)
    d = os.path.join(OUT, 'damaged')
    os.makedirs(d, exist_ok=True)
    for f in files:
        data = bytearray(open(f, 'rb').read())
        for k in range(3):
            at = data.find(MAGIC, len(data) * (k + 1) // 4)
            i = at + 8 + struct.unpack('<I', data[at + 4:at + 8])[0] // 2
            data[i] ^= 0x10
        open(os.path.join(d, os.path.basename(f)), 'wb').write(bytes(data))
    got, _ = ranks(d)
    for g, w in zip(got['ranks'], want['ranks']):
        g.pop('file'), w.pop('file')
    mt.eq(got, want, 'damaged summaries: the answer the frames give')

# --- killed: complete up to the last snapshot ---
if mt.case('killed'):
    data = open(files[1], 'rb').read()
    sums = [i for i in range(len(data)) if data.startswith(MAGIC, i) and
            data[i + 8:i + 12] == b'\x28\xb5\x2f\xfd']
    last = sums[-1]
    prev_end = sums[-2] + 8 + struct.unpack('<I', data[sums[-2] + 4:sums[-2] + 8])[0]
    cuts = {'in the last snapshot frame': (prev_end + last) // 2,
            'between a frame and its summary': last,
            'in the summary frame header': last + 5,
            'in the summary': last + 40,
            'in an earlier frame': (sums[len(sums) // 2] + sums[len(sums) // 2 - 1]) // 2}
    for what, at in cuts.items():
        d = os.path.join(OUT, 'cut')
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        p = os.path.join(d, os.path.basename(files[1]))
        open(p, 'wb').write(data[:at])
        got, _ = ranks(d)
        mt.eq(got['ranks'][0]['snapshots'], snaps_in_cat(p), 'cut %s: every snapshot' % what)
    # a real one: SIGKILL at several moments of a run
    for delay in (0.3, 0.55, 0.8):
        d = os.path.join(OUT, 'kill')
        shutil.rmtree(d, ignore_errors=True)
        pr = subprocess.Popen(['/usr/bin/python3', '-c', SCRIPT, '100000'], env=env(d, 1))
        time.sleep(delay)
        pr.send_signal(signal.SIGKILL)
        pr.wait()
        p = glob.glob(os.path.join(d, '*.zst'))[0]
        got, _ = ranks(d)
        n = snaps_in_cat(p)
        mt.check(n >= 2, 'killed after %.2f s: snapshots written (%d)' % (delay, n))
        mt.eq(got['ranks'][0]['snapshots'], n, 'killed after %.2f s: every snapshot' % delay)
mt.done()
