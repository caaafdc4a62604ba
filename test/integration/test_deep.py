"""Native stacks past MEMTALLY_DEPTH keep both ends (issue 53): the walk
goes on past the depth to the stack's end (up to 128 frames), and the
stack keeps its innermost three quarters of the depth, a mark standing
for the k frames between ("[k frames left out: MEMTALLY_DEPTH]", frame
value 0x100 + k) and its outermost quarter: the program's own outer
frames (outer_user, main, a thread's start) are not the ones dropped.

prog_deep allocates at the bottom of a recursion D deep, from main or from
a thread, under the CFI walker, libunwind (and, in make check, frame
pointers).  For each D and depth, against the whole stack (the same program
under MEMTALLY_DEPTH=128, checked against the program's own shape: D + 1
rec frames, outer_user, then main and libc's start, or the thread's
start):
 - a stack within the depth is whole, with no mark;
 - a deeper one is whole[:3/4 depth - 1] + mark(k) + whole[-depth/4:],
   k the frames between, exactly;
 - one the walk could not finish (over 128 frames) keeps its innermost
   depth frames and no mark, as before;
 - every view names the mark: report --stacks, the folded stacks, pprof."""
import gzip, os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
PROG = os.path.join(B, 'test', 'prog_deep')
MARK = re.compile(r'^\[(\d+) frames? left out: MEMTALLY_DEPTH\]$')


def frames(tag, d, depth, thread=False, unwind=None):
    """The function names of the stack holding prog_deep's 4 blocks."""
    run = os.path.join(OUT, tag)
    shutil.rmtree(run, ignore_errors=True)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=run,
               MEMTALLY_DEPTH=str(depth), **({'MEMTALLY_UNWIND': unwind} if unwind else {}))
    r = subprocess.run([PROG, str(d)] + (['thread'] if thread else []), env=env, capture_output=True,
                       text=True, timeout=60)
    mt.eq(r.returncode, 0, '%s: prog_deep ran' % tag)
    f = mt.files(run)[0]
    rows = [c for c in f.final()['callsites'] if c['kind'] == 'heap' and c['live_count'] == 4]
    mt.eq(len(rows), 1, '%s: one site holds the 4 blocks' % tag)
    if not rows:
        return f, []
    pcs = f.stacks.get(rows[0]['stack'], [])
    names = [fn for fn, _ in f.symbolize([pc for pc in pcs if pc > 0x10000])]
    it = iter(names)
    out = [('[%d frames left out: MEMTALLY_DEPTH]' % (pc - 0x100) if pc != 0x101 else
            '[1 frame left out: MEMTALLY_DEPTH]') if 0x100 < pc <= 0x180 else next(it) for pc in pcs]
    return f, out


def outer_of(thread):
    return ['outer_user', 'start_thread'] if thread else ['outer_user', 'main']


CASES = [(10, 32, False, None), (40, 32, False, None), (60, 32, True, None), (100, 32, False, None),
         (200, 32, False, None), (30, 8, False, None), (60, 32, False, 'libunwind')]
if mt.full():
    CASES += [(27, 32, False, None), (28, 32, False, None), (60, 16, True, None), (100, 64, False, None),
              (120, 128, False, None), (60, 32, True, 'libunwind'), (60, 32, False, 'fp'),
              (200, 32, False, 'libunwind')]
for d, depth, thread, unwind in CASES:
    tag = 'd%d-depth%d%s%s' % (d, depth, '-thread' if thread else '', '-' + unwind if unwind else '')
    if not mt.case(tag):
        continue
    _, whole = frames(tag + '-whole', d, 128, thread, unwind)  # (the same walker's)
    n = len(whole)
    # the whole stack is the program's: D + 1 rec frames, then its outer ones
    if n < 128:
        mt.eq(whole[:d + 1], ['rec'] * (d + 1), '%s: the whole stack starts with %d rec frames' % (tag, d + 1))
        got = [x for x in whole[d + 1:] if x in ('outer_user', 'main', 'start_thread')]
        mt.eq(got, outer_of(thread), '%s: then outer_user and %s' % (tag, outer_of(thread)[1]))
    _, kept = frames(tag, d, depth, thread, unwind)
    tail, head = depth // 4, depth - 1 - depth // 4
    if n <= depth:
        mt.eq(kept, whole, '%s: %d frames, within the depth: the whole stack, no mark' % (tag, n))
    elif n < 128:
        want = whole[:head] + ['[%d frame%s left out: MEMTALLY_DEPTH]' % (n - head - tail,
                                                                        '' if n - head - tail == 1 else 's')
                               ] + whole[n - tail:]
        mt.eq(kept, want, '%s: %d frames: the innermost %d, the mark, the outermost %d' % (tag, n, head, tail))
        mt.check(all(x in kept for x in outer_of(thread)[:1] if tail >= 6),
                 '%s: the program\'s own outer frame kept' % tag)
    else:
        mt.eq(kept, whole[:depth], '%s: deeper than the walk goes (128): the innermost %d, no mark'
              % (tag, depth))

if mt.case('views'):
    f, kept = frames('views', 60, 32)
    mark = next((x for x in kept if MARK.match(x)), None)
    mt.check(mark is not None, 'views: the stack has the mark (%s)' % mark)
    run = os.path.dirname(f.path)
    rep = subprocess.run([MT, 'report', '--stacks', run], capture_output=True, text=True).stdout
    mt.check(mark and mark in rep and 'outer_user' in rep, 'report --stacks shows the mark and outer_user')
    folded = os.path.join(OUT, 'views.folded')
    subprocess.run([MT, 'flame', '--folded', '-o', folded, run], capture_output=True, text=True)
    txt = open(folded).read() if os.path.exists(folded) else ''
    mt.check(mark and mark in txt and 'outer_user' in txt, 'flame --folded: the mark and outer_user')
    pb = os.path.join(OUT, 'views.pb.gz')
    subprocess.run([MT, 'pprof', '-o', pb, run], capture_output=True, text=True)
    raw = gzip.open(pb).read() if os.path.exists(pb) else b''
    mt.check(mark and mark.encode() in raw and b'outer_user' in raw, 'pprof: the mark\'s function and outer_user')
mt.done()
