"""gen_ranks.py JOBDIR OUTDIR N [OUTLIER]: N rank files of one job, made
from a real torchrun job's files (ddp_train.py under `memtally run`): its
rank 0 file copied N-1 times and its leaking rank 1 file once (as rank
OUTLIER, default N // 3), each copy's header rewritten (rank, local_rank,
world_size, host, pid), so the bench reads real stacks and real snapshot
shapes at any scale.

A copy is: a zstd frame of its own header line (a raw block, made here),
then the template's first frame without its header line (compressed once,
by the zstd command), then the rest of the template's bytes as they are
(every later snapshot frame and its summary frame, doc/FORMAT.md).  Any
concatenation of zstd frames reads as one stream; the reader's summary
path sees a first frame with no summary after it and decodes it."""
import glob, json, os, struct, subprocess, sys

SUMMARY_MAGIC = 0x184D2A5E


def raw_frame(data):
    """One zstd frame holding data in a raw block (no compression)."""
    assert len(data) < 128 << 10
    fhd = (2 << 6) | (1 << 5)  # 4-byte content size, single segment
    blk = 1 | (0 << 1) | (len(data) << 3)  # last block, raw
    return (struct.pack('<IBI', 0xFD2FB528, fhd, len(data)) +
            struct.pack('<I', blk)[:3] + data)


def template(path):
    b = open(path, 'rb').read()
    # the first summary frame ends the first snapshot's frame
    at = 0
    while True:
        at = b.find(struct.pack('<I', SUMMARY_MAGIC), at + 1)
        if at < 0:
            sys.exit('%s: no summary frame (written by a memtally without them?)' % path)
        n = struct.unpack('<I', b[at + 4:at + 8])[0]
        if b[at + 8:at + 12] == b'\x28\xb5\x2f\xfd' and at + 8 + n <= len(b):
            break
    first = subprocess.run(['zstd', '-qdc'], input=b[:at], stdout=subprocess.PIPE,
                           check=True).stdout
    nl = first.index(b'\n')
    header = json.loads(first[:nl])
    rest = subprocess.run(['zstd', '-q', '-3', '-c'], input=first[nl + 1:],
                          stdout=subprocess.PIPE, check=True).stdout
    return header, rest, b[at:]


def main():
    job, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    outlier = int(sys.argv[4]) if len(sys.argv) > 4 else n // 3
    files = sorted(glob.glob(os.path.join(job, 'memtally.*.jsonl.zst')))
    r0 = [f for f in files if '.r0.' in os.path.basename(f)]
    r1 = [f for f in files if '.r1.' in os.path.basename(f)]
    if not r0 or not r1:
        sys.exit('%s: no rank 0 and rank 1 files' % job)
    tpl = {0: template(r0[0]), 1: template(r1[0])}
    os.makedirs(out, exist_ok=True)
    for i in range(n):
        header, rest, tail = tpl[1 if i == outlier else 0]
        h = dict(header)
        host = 'node%04d' % (i // 8)
        h.update(rank=i, local_rank=i % 8, world_size=n, host=host, pid=100000 + i,
                 ppid=90000 + i // 8)
        line = json.dumps(h, separators=(',', ':')).encode() + b'\n'
        name = 'memtally.%s.r%d.p%d.jsonl.zst' % (host, i, 100000 + i)
        with open(os.path.join(out, name), 'wb') as f:
            f.write(raw_frame(line))
            f.write(rest)
            f.write(tail)
    print('%d rank files in %s (rank %d leaks)' % (n, out, outlier))


if __name__ == '__main__':
    main()
