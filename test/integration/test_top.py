"""memtally top, tried as a person uses it: in tmux (send-keys,
capture-pane).

- once: `--once` (and stdout not a terminal) prints one frame: every
  process with its figures and trends, the selected one's call sites and
  leak suspects, the OOM dumps;
- follow: a run directory written while top watches it: a file holding
  half of a run and a line cut in the middle, then the rest and a second
  rank's file: the next frames show the later snapshot and the new rank,
  and the cut line never broke anything (only whole lines are read);
- torch: a real PyTorch trainer that leaks (torch_train.py, the loss kept
  with its graph) under `memtally run`; top sorted by growth ([s]), two
  captures seconds apart name the leaking site (the trainer's forward
  line) first and show its live bytes grown."""
import os, re, shutil, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
GOLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'golden', 'in')
TMUX = shutil.which('tmux')
SESSION = 'mttop%d' % os.getpid()


def tmux(*args):
    return subprocess.run([TMUX] + list(args), capture_output=True, text=True)


def capture():
    return tmux('capture-pane', '-p', '-t', SESSION).stdout


def wait_for(pred, secs):
    end = time.time() + secs
    while time.time() < end:
        text = capture()
        if pred(text):
            return text
        time.sleep(0.3)
    return capture()


if mt.case('once'):
    r = subprocess.run([MT, 'top', '--once', GOLD], capture_output=True, text=True)
    out = r.stdout
    mt.check(r.returncode == 0 and 'node1 r0 p100' in out and 'node1 r1 p101' in out and
             re.search(r'model\.py:17 in Model\.forward   via functional\.py:1457 relu', out) and
             'memtally.node1.r0.p100.oom1.jsonl' in out and re.search(r'node1 r0 p100 .* \+81\.4 KiB/step', out),
             'top --once: both ranks with their trend per step, the leaking site by name, the OOM dump')
    r2 = subprocess.run([MT, 'top', GOLD], capture_output=True, text=True, timeout=30)
    mt.check(r2.returncode == 0 and r2.stdout.count('memtally top') == 1,
             'top with stdout not a terminal: one frame, then it exits')

if not TMUX:
    mt.check(False, 'tmux is installed (scripts/setup-deps.sh)')
    mt.done()

if mt.case('follow'):
    d = os.path.join(OUT, 'follow')
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    r0 = os.path.join(GOLD, 'memtally.node1.r0.p100.jsonl')
    lines = open(r0, 'rb').read().split(b'\n')[:-1]
    snaps = [i for i, l in enumerate(lines) if b'"type":"snapshot"' in l]
    half = snaps[len(snaps) // 2]
    dst = os.path.join(d, os.path.basename(r0))
    with open(dst, 'wb') as f:  # half the run, and the next line cut in two
        f.write(b'\n'.join(lines[:half + 1]) + b'\n' + lines[half + 1][:40])
    tmux('kill-session', '-t', SESSION)
    tmux('new-session', '-d', '-s', SESSION, '-x', '200', '-y', '50',
         '%s top --interval 0.5 %s' % (MT, d))
    try:
        first = wait_for(lambda t: 'snapshot' in t and 'node1 r0' in t, 15)
        seq0 = re.search(r'snapshot (\d+) \(', first)
        with open(dst, 'ab') as f:  # the rest, and a second rank appears
            f.write(lines[half + 1][40:] + b'\n' + b'\n'.join(lines[half + 2:]) + b'\n')
        shutil.copy(os.path.join(GOLD, 'memtally.node1.r1.p101.jsonl'), d)
        second = wait_for(lambda t: 'node1 r1' in t and 'snapshot 23 ' in t, 15)
        mt.check(seq0 and int(seq0.group(1)) < 23 and 'snapshot 23 (exit)' in second and 'node1 r1 p101' in second,
                 'top follows the files: snapshot %s of half a run (a cut line waiting), then snapshot 23 '
                 'and the new rank\'s file' % (seq0.group(1) if seq0 else None))
        tmux('send-keys', '-t', SESSION, 'n')
        third = wait_for(lambda t: re.search(r'^> node1 r1', t, re.M), 10)
        mt.check(re.search(r'^> node1 r1', third, re.M) and 'node1 r1 p101  python3 train.py' in third,
                 'top: [n] selects the next process')
        tmux('send-keys', '-t', SESSION, 'q')
        time.sleep(0.5)
        mt.check(tmux('has-session', '-t', SESSION).returncode != 0 or 'memtally top' not in capture(),
                 'top: [q] quits')
    finally:
        tmux('kill-session', '-t', SESSION)

if mt.case('torch'):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'torch_train.py')
    fwd = [i + 1 for i, l in enumerate(open(script)) if 'model(x)' in l][0]
    d = os.path.join(OUT, 'torch')
    shutil.rmtree(d, ignore_errors=True)
    # sampled (--sample 512K): in exact mode this trainer writes ~12 MB/s of
    # stack records (issue 14), more than top reads while it also answers
    train = subprocess.Popen([MT, 'run', '--out', d, '--interval', '0.5', '--sample', '512K', '--',
                              '/usr/bin/python3', script,
                              'leak', '/dev/null', '1000000'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    tmux('kill-session', '-t', SESSION)
    tmux('new-session', '-d', '-s', SESSION, '-x', '220', '-y', '50', '%s top --interval 1 %s' % (MT, d))
    try:
        # wait until the trainer's steps have run a while (past `import
        # torch`, which takes seconds; more on a loaded machine)
        def training(t):
            m = re.search(r'\+([\d.]+) MiB\s+heap\s+torch_train\.py:%d ' % fwd, t)
            return m and float(m.group(1)) >= 8
        wait_for(training, 150)
        tmux('send-keys', '-t', SESSION, 's')  # by growth
        time.sleep(2.5)
        cap = []
        for _ in range(2):
            text = capture()
            row = re.search(r'top call sites by growth.*\n.*\n\s+([\d.]+ \S+)\s+\+([\d.]+ \S+) heap\s+(.*)', text)
            cap.append((text, row))
            time.sleep(4)
        units = {'B': 1, 'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}
        val = lambda s: float(s.split()[0]) * units[s.split()[1]]
        ok = all(r and ('torch_train.py:%d' % fwd) in r.group(3) for _, r in cap)
        grew = ok and val(cap[1][1].group(1)) > val(cap[0][1].group(1))
        mt.check(ok and grew, 'top on a leaking PyTorch trainer: two captures 4 s apart name the forward line '
                 '(torch_train.py:%d) first by growth, its live bytes grew: %s -> %s'
                 % (fwd, cap[0][1].group(1) if cap[0][1] else None, cap[1][1].group(1) if cap[1][1] else None))
        if not (ok and grew):
            print(cap[-1][0])
        with open(os.path.join(OUT, 'torch-capture.txt'), 'w') as f:
            f.write(cap[-1][0])
    finally:
        tmux('kill-session', '-t', SESSION)
        try:
            os.killpg(train.pid, 9)
        except OSError:
            pass
        train.wait()
mt.done()
