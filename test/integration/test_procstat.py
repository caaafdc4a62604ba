"""Snapshot figures beyond the shim's own: proc (rss, vms, hwm, swap from
/proc/self/status; pss, uss, shared, pss_anon/file/shmem from smaps_rollup;
threads; open fds), cgroup (this process's own, v2 or v1) and allocator.
A Python program with 5 extra threads and 40 extra open files requests a
snapshot; the figures match what it knows of itself."""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
script = r'''
import ctypes, os, threading, json
ev = threading.Event()
ts = [threading.Thread(target=ev.wait) for _ in range(5)]
for t in ts: t.start()
files = [open('/dev/null') for _ in range(40)]
fds = len([d for d in os.listdir('/proc/self/fd')  # the listing's own, and the shim's file, are not ours
           if 'memtally.' not in os.path.basename(os.readlink('/proc/self/fd/' + d) if os.path.exists('/proc/self/fd/' + d) else '')]) - 1
snap = ctypes.CDLL(None).memtally_snapshot
snap.argtypes = [ctypes.c_char_p]
assert snap(b"probe") == 0
print(json.dumps({"fds": fds, "threads": threading.active_count()}))
ev.set()
'''
for smaps in ('1', '0'):
    out = os.path.join(OUT, 'smaps' + smaps)
    env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=out,
               MEMTALLY_SMAPS=smaps)
    r = subprocess.run(['/usr/bin/python3', '-c', script], env=env, capture_output=True, text=True)
    mt.eq(r.returncode, 0, 'exit code %s' % r.stderr[-200:])
    me = json.loads(r.stdout)
    snap = mt.files(out)[0].by_label('probe')
    p = snap['proc']
    for k in ('rss_bytes', 'vms_bytes', 'hwm_bytes', 'swap_bytes', 'threads', 'fds'):
        mt.check(k in p, 'SMAPS=%s: proc.%s present' % (smaps, k))
    mt.eq(p['fds'], me['fds'], 'SMAPS=%s: open fds' % smaps)
    mt.eq(p['threads'], me['threads'] + 1, 'SMAPS=%s: threads (the program\'s + the shim\'s writer)' % smaps)
    mt.check(p['hwm_bytes'] >= p['rss_bytes'] > 4 << 20, 'SMAPS=%s: hwm >= rss' % smaps)
    smaps_keys = ('pss_bytes', 'uss_bytes', 'shared_bytes', 'pss_anon_bytes', 'pss_file_bytes',
                  'pss_shmem_bytes')
    if smaps == '1':
        mt.check(all(k in p for k in smaps_keys), 'SMAPS=1: smaps_rollup figures present')
        mt.check(p['uss_bytes'] <= p['pss_bytes'] <= p['rss_bytes'], 'uss <= pss <= rss')
    else:
        mt.check(not any(k in p for k in smaps_keys), 'SMAPS=0: no smaps_rollup figures')
    cg = snap.get('cgroup')
    mt.check(cg is not None and cg['version'] in (1, 2) and cg['current_bytes'] > 0 and
             'anon_bytes' in cg and 'events' in cg, 'cgroup figures present: %r' % (cg,))
    mt.eq(snap['allocator']['name'], 'glibc', 'allocator: glibc')
env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'),
           MEMTALLY_OUT=os.path.join(OUT, 'nocg'), MEMTALLY_CGROUP='0')
subprocess.run(['/usr/bin/python3', '-c', script], env=env, capture_output=True, check=True)
mt.check('cgroup' not in mt.files(os.path.join(OUT, 'nocg'))[0].final(), 'CGROUP=0: no cgroup figures')
mt.done()
