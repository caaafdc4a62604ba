"""`srun memtally run -- python ...` (issue 8) on a one-node Slurm cluster
the test starts itself (munged, slurmctld, slurmd on their own socket,
ports and directories, stopped at the end): every rank's file is named by
its rank (SLURM_PROCID), and `memtally ranks` names the rank that leaks.
Skipped, with the reason, where the daemons cannot start (not root)."""
import os, shutil, signal, socket, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'py', 'py_rankleak.py')
for tool in ('srun', 'slurmctld', 'slurmd', 'munged', 'mungekey'):
    if not shutil.which(tool):
        print('  FAIL %s is not installed (scripts/setup-deps.sh installs slurm-wlm and munge)' % tool)
        sys.exit(1)
if os.geteuid() != 0:
    print('  skipped: starting slurmd needs root here')
    mt.done()

S = os.path.join(OUT, 'slurm')
shutil.rmtree(S, ignore_errors=True)
for d in ('state', 'spool', 'log', 'munge'):
    os.makedirs(os.path.join(S, d))
os.chmod(os.path.join(S, 'munge'), 0o700)
host = socket.gethostname().split('.')[0]
port = 17000 + os.getpid() % 2000
sock = os.path.join(S, 'munge', 'munge.sock')
conf = os.path.join(S, 'slurm.conf')
with open(conf, 'w') as f:
    f.write('\n'.join([
        'ClusterName=memtally', 'SlurmctldHost=' + host, 'SlurmUser=root', 'SlurmdUser=root',
        'AuthType=auth/munge', 'AuthInfo=socket=' + sock, 'CredType=cred/munge',
        'StateSaveLocation=%s/state' % S, 'SlurmdSpoolDir=%s/spool' % S,
        'SlurmctldPidFile=%s/ctld.pid' % S, 'SlurmdPidFile=%s/d.pid' % S,
        'SlurmctldLogFile=%s/log/ctld.log' % S, 'SlurmdLogFile=%s/log/d.log' % S,
        'ProctrackType=proctrack/linuxproc', 'TaskPlugin=task/none', 'SchedulerType=sched/builtin',
        'SelectType=select/cons_tres', 'SelectTypeParameters=CR_Core', 'ReturnToService=2',
        'MpiDefault=none', 'SlurmctldPort=%d' % port, 'SlurmdPort=%d' % (port + 1),
        'NodeName=%s CPUs=%d State=UNKNOWN' % (host, os.cpu_count()),
        'PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP', '']))
env = dict(os.environ, SLURM_CONF=conf)
key = os.path.join(S, 'munge', 'munge.key')
procs = []

def stop():
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()

try:
    subprocess.run(['mungekey', '--create', '--keyfile=' + key], check=True, capture_output=True)
    procs.append(subprocess.Popen(['munged', '--foreground', '--force', '--socket=' + sock, '--key-file=' + key,
                                   '--pid-file=' + os.path.join(S, 'munge', 'pid'),
                                   '--log-file=' + os.path.join(S, 'log', 'munge.log'),
                                   '--seed-file=' + os.path.join(S, 'munge', 'seed')],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.5)
    procs.append(subprocess.Popen(['slurmctld', '-D', '-f', conf], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
    procs.append(subprocess.Popen(['slurmd', '-D', '-f', conf], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
    up = False
    for _ in range(60):
        r = subprocess.run(['sinfo', '-h', '-o', '%T'], env=env, capture_output=True, text=True)
        if r.stdout.strip() == 'idle':
            up = True
            break
        time.sleep(0.5)
    if not up:
        print('  skipped: the one-node Slurm cluster did not come up (%s)' %
              open(os.path.join(S, 'log', 'd.log')).read()[-300:].replace('\n', ' | '))
        mt.done()
    d = os.path.join(OUT, 'run')
    r = subprocess.run(['srun', '-n', '2', MT, 'run', '--out', d, '--interval', '0.1', '--',
                        '/usr/bin/python3', script], env=env, capture_output=True, text=True, timeout=120)
    mt.eq(r.returncode, 0, 'srun -n 2 memtally run -- python3: exit code (%s)' % r.stderr[-300:])
    mt.eq(sorted(r.stdout.split('\n')[:-1]), ['rank 0 done', 'rank 1 done'], 'both ranks ran to their end')
    names = sorted(os.path.basename(f.path).split('.')[2] for f in mt.files(d))
    mt.eq(names, ['r0', 'r1'], 'each rank\'s file named by its rank (SLURM_PROCID)')
    mt.check(r.stderr.count('; see: memtally report') == 2, 'each memtally run says where its files are')
    r = subprocess.run([MT, 'ranks', '--json', d], capture_output=True, text=True)
    import json
    mt.eq(json.loads(r.stdout)['outliers'] if r.returncode == 0 else r.stderr, [1],
          'ranks names the leaking rank 1, and only it')
finally:
    stop()
mt.done()
