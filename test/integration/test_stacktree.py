"""Stacks that share frames (format 3, issue 14): a stack record names an
earlier stack ("up") whose outermost "keep" frames complete it, so a file
stores the frames call sites share once.

- prog_tree: 80 call sites under a 13-deep chain of calls; each site's
  frames, rebuilt from the file, name its leaf, bottom, 13 x descend and
  main in order, with the exact bytes; most stack records take frames from
  an earlier one and the file holds well under half the frames it stands
  for; `memtally report --stacks` prints the same frames.
- The format-2 file in test/fixtures (written by the shim before format 3,
  demo_train.py) is still read: its peak and its leak are the same lines
  and bytes as a run of the same script recorded now in format 3."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
PY = os.environ.get('PY', '/usr/bin/python3')

# --- prog_tree --------------------------------------------------------------
if mt.case('tree'):
    d = os.path.join(OUT, 'tree')
    r = subprocess.run([MT, 'run', '--out', d, '--', os.path.join(B, 'test', 'prog_tree')],
                       capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'prog_tree exit code')
    f = mt.files(d)[0]
    mt.eq(f.header['version'], 3, 'header version')
    recs = [json.loads(l) for l in mt.lines(f.path) if l.startswith('{"type":"stack"')]
    own = sum(len(x['pcs']) for x in recs)
    whole = sum(len(f.stacks[x['id']]) for x in recs)
    shared = sum(1 for x in recs if 'up' in x)
    mt.check(shared >= 70, '%d of %d stack records take their outer frames from an earlier one' %
             (shared, len(recs)))
    mt.check(whole > 0 and own * 2 < whole, 'the file holds %d frames for %d in the stacks' % (own, whole))
    # every up names a record before it, and keeps no more than it has
    seen, bad = {}, []
    for x in recs:
        if 'up' in x and (x['up'] not in seen or not 0 < x['keep'] <= seen[x['up']]):
            bad.append(x['id'])
        seen[x['id']] = len(f.stacks[x['id']])
    mt.eq(bad, [], 'stacks whose up is not an earlier record with enough frames')
    # each leaf's sites: the frames rebuilt from the file, in order
    snap = f.final()
    got, wrong = {}, []
    for c in snap['callsites']:
        st = f.stacks.get(c['stack'], [])
        fns = [fn for fn, _ in f.symbolize(st)]
        if not fns or not fns[0].startswith('leaf'):
            continue
        got[fns[0]] = got.get(fns[0], 0) + c['live_bytes']
        want_chain = ['bottom'] + ['descend'] * 13 + ['main']
        if fns[1:1 + len(want_chain)] != want_chain:
            wrong.append((c['stack'], fns[:18]))
    want = {'leaf%d' % i: 2 * (i + 1) * 4096 for t in range(1, 11)
            for i in ([t * 10 + k for k in range(4)] if t < 10 else [100, 101, 102, 103])}
    mt.eq(got, want, 'live bytes by leaf (two sites each)')
    mt.eq(wrong[:3], [], 'sites whose frames are not leaf < bottom < 13 x descend < main')
    # the command rebuilds the same frames
    r = subprocess.run([MT, 'report', '--stacks', '--top', '1', '--snapshot', 'last', f.path],
                       capture_output=True, text=True)
    body = r.stdout.split('top call sites by live bytes', 1)[-1]
    mt.check(r.returncode == 0 and 'leaf103' in body and body.count('descend') >= 13 and 'main' in body,
             'report --stacks prints the whole stack of leaf103: %r' % body[:600])

# --- the format-2 fixture -------------------------------------------------
if mt.case('v2'):
    FIX = os.path.join(ROOT, 'test', 'fixtures', 'memtally.v2.p3664.jsonl')

    def answers(path):
        """(the top site at the peak, its bytes, the leak line's bytes at
        the peak: steps 0-15 each kept one) from report --json; the top
        leak suspect from leaks"""
        r = subprocess.run([MT, 'report', '--json', '--top', '50', path], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        p = json.loads(r.stdout)['processes'][0]
        top = p['at_peak']['callsites'][0]
        # a row leads with the script's line (its text when the file is
        # readable here: compared by file:line)
        line = lambda w: w.split(' ', 1)[0] if w else w
        leak = sum(c['at_peak_bytes'] for c in p['at_peak']['callsites']
                   if line(c['where']) == 'demo_train.py:13')
        r = subprocess.run([MT, 'leaks', '--json', path], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        sus = json.loads(r.stdout)['processes'][0]['suspects']
        return line(top['where']), top['at_peak_bytes'], leak, line(sus[0]['where']) if sus else None

    mt.eq(json.loads(open(FIX).readline())['version'], 2, 'the fixture is a format-2 file')
    old = answers(FIX)
    mt.eq(old, ('demo_train.py:16', (64 << 20) + 1, 16 * (256 * 1024 + 33), 'demo_train.py:13'),
          'format 2: the peak and the leak')
    d = os.path.join(OUT, 'v3')
    r = subprocess.run([MT, 'run', '--out', d, '--', PY, os.path.join(ROOT, 'scripts', 'demo_train.py')],
                       capture_output=True, text=True)
    new_f = mt.files(d)[0]
    mt.eq(new_f.header['version'], 3, 'the run now writes format 3')
    mt.check(any('"up":' in l for l in mt.lines(new_f.path) if l.startswith('{"type":"stack"')),
             'the format-3 file has stacks that share frames')
    mt.eq(answers(new_f.path), old, 'format 3: the same peak and leak as format 2')

mt.done()
