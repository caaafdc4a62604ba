"""One answer in every view (issue 31): programs with known truths, run under
`memtally run` with no options, and every view asked with no options.

  c:      prog_truths.c: 4 threads stepping together; leak A (64 KiB a step
          at keep_a's malloc), leak B (192 KiB a step at keep_b's), a 32 MiB
          spike at step 30 (make_spike's malloc, freed at once, on a thread
          with its own share of the call-site figures, and no new peak of
          the process: a 128 MiB buffer before the steps was), all threads
          churning.
  (test_answers_torch: the same checks on PyTorch, and ranks on a DDP job)

Checks: report's rows at the growth window's end and leaks' first rows name
both leak lines;
report names the spike with its size and step (exact: 32 MiB with 4
threads); top, functions, diff, flame and pprof agree with report at the
peak; ranks flags the leaking rank."""
import json, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
HERE = os.path.dirname(os.path.abspath(__file__))


from views import sh, line_of, main_proc, check_views


# ---- the C program: exact with 4 threads ----
if mt.case('c'):
    d = os.path.join(OUT, 'c')
    r = sh(MT, 'run', '--out', d, '--', os.path.join(B, 'test', 'prog_truths'))
    mt.eq(r.returncode, 0, 'c: exit code')
    src = os.path.join(HERE, 'prog_truths.c')
    p = check_views('c', d, src, 'keep_a (prog_truths.c:%d)' % line_of(src, 'LEAK_A'),
                    'keep_b (prog_truths.c:%d)' % line_of(src, 'LEAK_B'),
                    'make_spike (prog_truths.c:%d)' % line_of(src, '/* SPIKE */'), 32 << 20, 30)
    mt.eq(p['snapshots'][-1]['reason'], 'exit', 'c: the exit snapshot')
    # leaks per step: the planted sizes
    lk = json.loads(sh(MT, 'leaks', '--json', d).stdout)['processes'][0]
    per = {s['function']: s['bytes_per_step'] for s in lk['suspects']}
    mt.eq((per.get('keep_a'), per.get('keep_b')), (65536.0, 196608.0), 'c leaks: 64 KiB and 192 KiB a step')

mt.done()
