"""Phases and the workload (issue 56).
 - capi: prog_phases marks phases and a workload through memtally.h: the
   snapshot inside "outer" > "inner" names "inner", each span is listed
   once (checkpoint_save's at step 19, while its 16 MiB buffer lived), the
   heap's peak says "checkpoint_save" and report says "during checkpoint
   save at step 19"; an end of a phase never begun, an empty name and a
   workload that is not one object are refused (-1); every step snapshot
   carries its own workload.
 - grow / leak: torch_rl.py (Debian's torch 1.13), an RL-shaped trainer
   whose rollouts vary and grow, with a weight sync, evaluation and
   checkpoints, under `memtally run` and no option.  The start-up hook
   marks its phases (checkpoint_save, state_dict, weight_load, eval, data,
   backward, optimizer); each step snapshot carries the shape of the batch
   the DataLoader handed over in that step ([4, L], tokens 4 L); report
   names the checkpoint phase of the torch.save spike.  Without a leak
   `leaks` raises no suspect and says the logits row follows the workload
   (JSON follows_workload, on tokens, 2048 bytes a token); with a 96 KiB a
   step leak on top, that leak is the first (the only) suspect.
 - grow also: a snapshot inside each checkpoint and evaluation, and
   `diff run@phase:eval run@phase:checkpoint save` compares them.
 - meta: memtally.mark("step", n, meta=...) adds the program's numbers to
   the batch's shapes."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))
PY = '/usr/bin/python3'
RL = os.path.join(HERE, 'torch_rl.py')
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'PYTHONPATH'}


def under(name, args, env=None):
    d = os.path.join(OUT, name)
    r = subprocess.run([MT, 'run', '--out', d, '--'] + args, env=env or env0,
                       capture_output=True, text=True, timeout=280)
    return r, d


def cmd(*args):
    return subprocess.run([MT] + list(args), capture_output=True, text=True, timeout=120)


def seqlen(i):
    return 16 + 4 * i + (37 * i) % 48


if mt.case('capi'):
    r, d = under('capi', [os.path.join(B, 'test', 'prog_phases')],
                 dict(env0, MEMTALLY_STEPS='1'))
    mt.eq(r.stdout.split(), ['-1', '-1', '-1'], 'refused: an end never begun, an empty name, a non-object workload')
    f = mt.files(d)[0]
    snaps = f.snapshots
    nested = [s for s in snaps if s.get('label') == 'nested']
    mt.eq([s.get('phase') for s in nested], ['inner'], 'the snapshot inside outer > inner names the innermost')
    spans = [(n, tuple(sp)) for s in snaps for n, p in s.get('phases', {}).items() for sp in p.get('spans', [])]
    mt.eq(sorted(n for n, _ in spans), ['checkpoint_save', 'inner', 'outer'], 'each span listed once')
    mt.eq([sp[2] for n, sp in spans if n == 'checkpoint_save'], [19], 'the checkpoint began at step 19')
    mt.eq(f.final()['heap'].get('peak_phase'), 'checkpoint_save', 'the heap peaked inside the checkpoint')
    steps = [s for s in snaps if s['reason'] == 'step']
    mt.eq([s['workload']['tokens'] for s in steps], [100 * s['marks']['step'] for s in steps],
          'each step snapshot carries its own workload')
    rep = cmd('report', d).stdout
    mt.check('heap 16.0 MiB during checkpoint save at step 19' in rep, 'report names the peak\'s phase')


def rl(name, *extra):
    r, d = under(name, [PY, RL, '150'] + list(extra))
    mt.eq(r.returncode, 0, '%s: exit code (%s)' % (name, r.stderr[-300:]))
    fs = [f for f in mt.files(d) if f.header['argv'][-1 - len(extra):] == ['150'] + list(extra)
          or f.header['argv'][-1] == (extra[-1] if extra else '150')]
    return d, fs[0] if fs else None


if mt.case('grow'):
    d, f = rl('grow')
    phases = set()
    for s in f.snapshots:
        phases.update(s.get('phases', {}))
    mt.eq(sorted(phases & {'checkpoint_save', 'state_dict', 'weight_load', 'eval', 'data', 'backward',
                           'optimizer'}),
          ['backward', 'checkpoint_save', 'data', 'eval', 'optimizer', 'state_dict', 'weight_load'],
          'the hook marks the phases without code')
    fin = f.final()['phases']
    mt.eq((fin['checkpoint_save']['count'], fin['eval']['count'], fin['weight_load']['count']),
          (3, 7, 30), 'checkpoints every 50 steps, evaluations every 20, weight syncs every 5')
    steps = [s for s in f.snapshots if s['reason'] == 'step']
    bad = [s['marks']['step'] for s in steps
           if s.get('workload', {}).get('shapes') != [[4, seqlen(int(s['marks']['step']) - 1)]]
           or s['workload'].get('tokens') != 4 * seqlen(int(s['marks']['step']) - 1)]
    mt.check(len(steps) > 50 and not bad,
             'each of %d step snapshots carries its batch\'s shape and tokens (wrong: %s)' % (len(steps), bad[:5]))
    rep = cmd('report', d).stdout
    mt.check(re.search(r'torch\.save.*\n\s+during checkpoint save at step (49|50|99|100|149|150)\n', rep) is not None,
             'report names the checkpoint phase of the torch.save spike')
    j = json.loads(cmd('leaks', '--json', d).stdout)
    p = j['processes'][0] if 'processes' in j else j[0] if isinstance(j, list) else j
    mt.eq([s['where'] for s in p['suspects']], [], 'no leak suspect')
    fol = [x for x in p['follows_workload'] if 'logits = model(ids)' in x['where']]
    mt.check(len(fol) == 1 and fol[0]['on'] == 'tokens' and abs(fol[0]['bytes_per_unit'] - 2048) < 64
             and fol[0]['r2'] > 0.98,
             'the logits row follows the workload: ~2048 bytes a token (%s)' % fol)
    txt = cmd('leaks', d).stdout
    mt.check('follows the workload' in txt and 'no leak suspects' in txt, 'leaks says so')
    labels = [s.get('label') for s in f.snapshots if s['reason'] == 'request']
    # every checkpoint's; evaluations' while they cost under 5% of the run
    mt.check(labels.count('phase checkpoint_save') == 3 and 1 <= labels.count('phase eval') <= 7,
             'a snapshot inside each checkpoint (3) and the evaluations the budget allows (1-7), before each '
             'ends: %s' % [(x, labels.count(x)) for x in ('phase checkpoint_save', 'phase eval')])
    r = cmd('diff', d + '@phase:eval', d + '@phase:checkpoint save')
    mt.check(r.returncode == 0 and re.search(r'\n\s+\S+ \S+\s+\S+ \S+\s+\S+ \S+\s+\d+ heap\s+torch_rl.py:\d+  torch\.save', r.stdout),
             'diff compares the evaluation with the checkpoint: the torch.save row (%s)' % r.stdout[:400])

if mt.case('leak'):
    d, f = rl('leak', 'leak')
    j = json.loads(cmd('leaks', '--json', d).stdout)
    p = j['processes'][0] if 'processes' in j else j[0] if isinstance(j, list) else j
    sus = [s['where'] for s in p['suspects']]
    mt.check(sus and 'history.append' in sus[0], 'the leak on top of the growing workload is first: %s' % sus[:3])
    mt.check(not any('logits = model(ids)' in s for s in sus), 'the logits row is not a suspect')

if mt.case('meta'):
    r, d = under('meta', [PY, RL, '30', 'meta'])
    mt.eq(r.returncode, 0, 'exit code (%s)' % r.stderr[-300:])
    f = mt.files(d)[0]
    # step 1 was marked by the hook (at the optimizer step) before the
    # program's first mark took over: its workload is the batch's alone
    steps = [s for s in f.snapshots if s['reason'] == 'step' and s['marks']['step'] >= 2]
    ok = [s['workload'].get('seq') == seqlen(int(s['marks']['step']) - 1) and s['workload'].get('rollouts') == 4
          and s['workload'].get('shapes') == [[4, seqlen(int(s['marks']['step']) - 1)]] for s in steps]
    mt.check(len(ok) >= 25 and all(ok), 'mark(meta=) adds the program\'s numbers to the batch\'s shape')
mt.done()
