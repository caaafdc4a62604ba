"""A 4-rank mpirun job (Debian's Open MPI) under `memtally run` where rank 2
leaks: every rank writes its own file named by its rank, `memtally ranks`
names rank 2 and only rank 2, and `leaks` on rank 2 finds rank_leak at
64 KiB per step."""
import json, os, subprocess, sys, shutil
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
if not shutil.which('mpirun'):
    print('  FAIL mpirun not installed (scripts/setup-deps.sh installs openmpi-bin)')
    sys.exit(1)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
r = subprocess.run([MT, 'run', '--out', OUT, '--', 'mpirun', '--oversubscribe', '-np', '4',
                    os.path.join(B, 'test', 'prog_mpi'), '2'], env=env, capture_output=True, stdin=subprocess.DEVNULL,
                   text=True, timeout=240)
mt.eq(r.returncode, 0, 'mpirun exit code (stderr %r)' % r.stderr[-300:])
mt.check('mpi: 4 ranks done' in r.stdout, 'the job ran')
fs = mt.files(OUT)
ranks = sorted(f.header['rank'] for f in fs if f.header['rank'] is not None)
mt.eq(ranks, [0, 1, 2, 3], 'one file per rank, named by rank')
mt.check(all('.r%d.' % f.header['rank'] in f.path for f in fs if f.header['rank'] is not None),
         'file names carry the rank')
r = subprocess.run([MT, 'ranks', '--json', OUT], capture_output=True, text=True)
mt.eq(r.returncode, 0, 'ranks exit code')
res = json.loads(r.stdout)
mt.eq(res['outliers'], [2], 'ranks names rank 2 and only rank 2')
r = subprocess.run([MT, 'ranks', OUT], capture_output=True, text=True)
line = [l for l in r.stdout.splitlines() if ' r2 ' in l]
mt.check(line and 'outlier' in line[0], 'ranks text marks rank 2: %r' % (line[:1],))
r2 = [f.path for f in fs if f.header['rank'] == 2][0]
r = subprocess.run([MT, 'leaks', '--json', r2], capture_output=True, text=True)
sus = json.loads(r.stdout)['processes'][0]['suspects']
mt.check(sus and sus[0]['function'] == 'rank_leak' and abs(sus[0]['bytes_per_step'] - 65536) < 400,
         'leaks on rank 2: rank_leak at 64 KiB per step (%r)' %
         [(s['function'], s['bytes_per_step']) for s in sus])
mt.done()
