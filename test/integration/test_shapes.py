"""Leak verdicts on trainer shapes (issue 15): prog_shapes runs 400 steps
with 40 snapshots, with and without step marks.  A leak of 48 KiB a step
is named whatever else happens -- a 64 MiB evaluation buffer early, in the
middle or late, periodic checkpoints, leaks in bursts, a real teardown
that frees everything at exit -- and nothing is named for a cache that
fills then saturates or a run with only a spike.  (A spike once counted
everything after it as "teardown", below 4/5 of the peak, and the leak
behind it went unnamed: "too few snapshots after warm-up (1; need 3)".)
When too few snapshots are left, the message says where they went."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
prog = os.path.join(B, 'test', 'prog_shapes')

for shape, leak in (('early', 1), ('middle', 1), ('late', 1), ('ckpt', 1), ('bursty', 1),
                    ('teardown', 1), ('cache', 0), ('noleak', 0)):
    for marks in ('', 'marks'):
        d = os.path.join(OUT, shape + marks)
        r = subprocess.run([MT, 'run', '--out', d, '--', prog, shape] + ([marks] if marks else []),
                           capture_output=True, text=True)
        j = subprocess.run([MT, 'leaks', '--json', d], capture_output=True, text=True)
        p = json.loads(j.stdout)['processes'][0]
        sus = [s['function'] for s in p['suspects']]
        ok = sus[:1] == ['leak_step'] if leak else sus == []
        mt.check(r.returncode == 0 and ok and p['snapshots_used'] >= 10,
                 '%s%s: %s (%d snapshots used; suspects %s)' % (shape, ' with step marks' if marks else '',
                 'the leak is named' if leak else 'nothing is named', p['snapshots_used'], sus[:3]))
        if leak and marks and sus[:1] == ['leak_step']:
            per_step = p['suspects'][0].get('bytes_per_step')
            want = 48 << 10 if shape != 'bursty' else (480 << 10) / 10
            mt.check(per_step is not None and abs(per_step - want) <= 0.1 * want,
                     '%s with step marks: %s bytes a step (want %d)' % (shape, per_step, want))

d = os.path.join(OUT, 'one')
subprocess.run([MT, 'run', '--out', d, '--', os.path.join(B, 'test', 'prog_trainer'), 'leak', '3'],
               capture_output=True)
r = subprocess.run([MT, 'leaks', d], capture_output=True, text=True)
mt.check('too few snapshots to judge growth: 1 in all, 0 in warm-up' in r.stdout and 'need 3' in r.stdout,
         'one snapshot: the message says how many there were and where they went (%r)'
         % r.stdout.strip().split('\n')[-1][:200])
mt.done()
