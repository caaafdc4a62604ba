"""The files the shim writes, in a directory others can write to: a link
planted at a predictable name is never followed, and nothing earlier is
overwritten.
  dump-link:   a link at the OOM dump's name pointing at a victim file: the
               victim keeps its bytes, the dump goes to the next free name
  dump-repeat: a dump of the same pid from an earlier run stays as it was
  reopen-link: the main file deleted mid-run and a link planted at its name:
               the next snapshot makes a new file, the victim is untouched
  out-link:    `memtally html/flame/torch -o PATH` with a link at PATH: the
               link is replaced by the new file, the victim is untouched
  out-device:  `-o` naming a device node (a private copy of /dev/null) or a
               FIFO writes into it; the node stays a node (renaming over it
               made /dev/null a file for every user of the machine), and
               `-o -` and `-o /dev/stdout` write to standard output
  setuid:      a setuid-root program started by an ordinary user, with the
               shim in /etc/ld.so.preload (where glibc loads it for secure
               programs) and MEMTALLY_OUT set by that user: the shim stays
               out of it (AT_SECURE): no file, the program unchanged
  modes:       a new output directory is 0750 and files 0640 (were 0777 and
               0644 less the umask: argv readable by every user)
  foreign-dir: an output directory of another (non-root) user is refused
               with a message; the program runs on unchanged
  setpriv:     `setpriv --reuid=65534 --regid=65534 --clear-groups /bin/echo`
               under the shim as root prints and exits 0 (it aborted: glibc's
               set*id on the writer thread, which lacked setpriv's kept
               capabilities, failed), and its file holds its exec snapshot
  drop-threads: a root program with four threads drops to nobody before
               its first snapshot: its file (in root's 0750 directory) holds
               what it allocated after the drop (there was no file: it was
               made after the drop, errno 13); with MEMTALLY_INTERVAL the
               writer runs across the drops
  userns:      `unshare --user` (refused to a process with two threads)
               runs, with and without a periodic writer (it failed, EINVAL),
               40 times with the CPUs busy (the joined writer was still
               counted: EINVAL in 62 of 300)
  root-link:   as root, MEMTALLY_OUT names a link nobody planted in a sticky
               world-writable directory: refused, nothing written where it
               points (the file landed there)
  root-foreign: as root, a nobody-owned 0777 directory is refused (it was
               taken)
(The first version opened dumps O_CREAT|O_TRUNC and re-opened a deleted
file O_CREAT|O_APPEND, following both links.)"""
import time, ctypes, glob, json, os, shutil, socket, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
HOST = socket.gethostname().replace('/', '_').replace('.', '_')
VICTIM = 'precious bytes\n'

# Run inside the traced process: plant links by its own pid, then act.
PROG = r'''
import ctypes, os, socket, sys
out, case = sys.argv[1], sys.argv[2]
host = socket.gethostname().replace('/', '_').replace('.', '_')
base = os.path.join(out, 'memtally.%s.p%d' % (host, os.getpid()))
libc = ctypes.CDLL(None)
libc.malloc.argtypes = [ctypes.c_size_t]
libc.malloc.restype = ctypes.c_void_p
snap = libc.memtally_snapshot
if case == 'dump-link':
    os.symlink(os.path.join(out, 'victim'), base + '.oom1.jsonl')
    assert libc.malloc(1 << 62) is None
elif case == 'dump-repeat':
    with open(base + '.oom1.jsonl', 'w') as f:
        f.write('an earlier run\n')
    assert libc.malloc(1 << 62) is None
elif case == 'reopen-link':
    snap(b'first')
    ext = '.jsonl' if os.environ.get('MEMTALLY_COMPRESS') == '0' else '.jsonl.zst'
    os.unlink(base + ext)
    os.symlink(os.path.join(out, 'victim'), base + ext)
    x = [bytearray(100) for _ in range(1000)]
    snap(b'second')
print('ran')
'''

def run(case):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'victim'), 'w') as f:
        f.write(VICTIM)
    r = subprocess.run(['/usr/bin/python3', '-c', PROG, d, case], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d), timeout=60)
    mt.eq((r.returncode, r.stdout), (0, 'ran\n'), '%s: the program runs on (%s)' % (case, r.stderr[-200:]))
    got = open(os.path.join(d, 'victim')).read()
    mt.check(got == VICTIM, '%s: the victim file keeps its bytes (now %d bytes: %r)' % (case, len(got), got[:60]))
    return d

def records(p):
    return [json.loads(l) for l in mt.lines(p) if l.strip()]

if mt.case('dump-link'):
    d = run('dump-link')
    dumps = [p for p in glob.glob(d + '/*.oom*.jsonl') if not os.path.islink(p)]
    mt.check(len(dumps) == 1 and '.x1.oom1.' in dumps[0], 'dump-link: the dump took the next name: %s'
             % [os.path.basename(p) for p in dumps])
    mt.check(dumps and any(r.get('type') == 'oom' for r in records(dumps[0])), 'dump-link: a complete dump')
if mt.case('dump-repeat'):
    d = run('dump-repeat')
    old = [p for p in glob.glob(d + '/*.oom1.jsonl') if '.x' not in os.path.basename(p)]
    mt.check(old and open(old[0]).read() == 'an earlier run\n', 'dump-repeat: the earlier dump is unchanged')
    mt.eq(len(glob.glob(d + '/*.x1.oom1.jsonl')), 1, 'dump-repeat: the new dump beside it')
if mt.case('reopen-link'):
    d = run('reopen-link')
    files = [p for p in mt.jsonl(d) if not os.path.islink(p)]
    mt.check(len(files) == 1 and '.x1.jsonl' in files[0], 'reopen-link: a new file: %s'
             % [os.path.basename(p) for p in files])
    if files:
        labels = [r.get('label') for r in records(files[0]) if r.get('type') == 'snapshot']
        mt.check('second' in labels and records(files[0])[0].get('type') == 'header',
                 'reopen-link: the new file has a header and the later snapshot %s' % labels)
if mt.case('out-link'):
    d = os.path.join(OUT, 'out-link')
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, 'src')  # a snapshot file and a dump, no link
    os.makedirs(src, exist_ok=True)
    for p in glob.glob(run('dump-link') + '/memtally.*'):
        if not os.path.islink(p):
            shutil.copy(p, src)
    MT = os.path.join(B, 'memtally')
    for cmd, name in (('html', 'r.html'), ('flame', 'f.svg'), ('torch', 'd.pickle')):
        victim = os.path.join(d, 'victim-' + name)
        with open(victim, 'w') as f:
            f.write(VICTIM)
        link = os.path.join(d, name)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(victim, link)
        arg = glob.glob(src + '/*.oom1.jsonl')[0] if cmd == 'torch' else src
        r = subprocess.run([MT, cmd, arg, '-o', link], capture_output=True, text=True)
        if cmd == 'torch':  # a host dump: torch refuses it, and writes nothing
            mt.check(r.returncode == 1 and os.path.islink(link), 'out-link: torch refuses a host dump, the link stays')
        else:
            mt.check(r.returncode == 0 and not os.path.islink(link) and os.path.getsize(link) > 1000,
                     'out-link: %s -o replaced the link with its file (%s)' % (cmd, r.stderr.strip()[-100:]))
        got = open(victim).read()
        mt.check(got == VICTIM, 'out-link: %s left the link\'s target alone (%d bytes: %r)' % (cmd, len(got), got[:40]))
        mt.eq([x for x in os.listdir(d) if '.XXXX' in x or x.startswith(name + '.')], [],
              'out-link: %s left no temporary file' % cmd)
if mt.case('out-device'):
    import stat
    d = os.path.join(OUT, 'out-device')
    os.makedirs(d, exist_ok=True)
    node = os.path.join(d, 'null')
    if os.path.lexists(node):
        os.unlink(node)
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    src = [p for p in mt.jsonl(run('dump-link'))
           if not os.path.islink(p) and '.oom' not in p][0]
    MT = os.path.join(B, 'memtally')
    r = subprocess.run([MT, 'flame', src, '-o', node], capture_output=True, text=True)
    mt.check(r.returncode == 0 and stat.S_ISCHR(os.lstat(node).st_mode),
             'out-device: flame -o a device node writes into it; the node stays a device (%s)' % r.stderr.strip()[-80:])
    fifo = os.path.join(d, 'fifo')
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    sink = os.path.join(d, 'from-fifo')
    with open(sink, 'wb') as fh:  # (a pipe to us would fill while we wait)
        reader = subprocess.Popen(['cat', fifo], stdout=fh)
        for _ in range(100):  # until cat has the FIFO open (else: ENXIO, at once)
            r = subprocess.run([MT, 'flame', src, '-o', fifo], capture_output=True, text=True, timeout=30)
            if 'No such device' not in r.stderr:
                break
            time.sleep(0.1)
        reader.wait(timeout=30)
    got = open(sink, 'rb').read()
    mt.check(r.returncode == 0 and got.startswith(b'<?xml') and stat.S_ISFIFO(os.lstat(fifo).st_mode),
             'out-device: flame -o a FIFO: its reader gets the SVG (%d bytes), the FIFO stays' % len(got))
    for o in ('-', '/dev/stdout'):
        r = subprocess.run([MT, 'flame', src, '-o', o], capture_output=True)
        mt.check(r.returncode == 0 and r.stdout.startswith(b'<?xml'), 'out-device: -o %s writes to stdout' % o)
if mt.case('modes'):
    d = os.path.join(OUT, 'modes', 'new', 'deeper')
    shutil.rmtree(os.path.join(OUT, 'modes'), ignore_errors=True)
    old = os.umask(0o022)
    r = subprocess.run([os.path.join(B, 'test', 'prog_known')], capture_output=True,
                       env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d))
    os.umask(old)
    files = mt.jsonl(d)
    mt.eq((r.returncode, oct(os.stat(d).st_mode & 0o777), [oct(os.stat(p).st_mode & 0o777) for p in files]),
          (0, '0o750', ['0o640']), 'modes: directory 0750, file 0640 (umask 022)')
    page = os.path.join(OUT, 'modes', 'r.html')
    subprocess.run([os.path.join(B, 'memtally'), 'html', d, '-o', page], capture_output=True)
    mt.eq(oct(os.stat(page).st_mode & 0o777), '0o640', 'modes: memtally -o writes 0640 too')

if mt.case('foreign-dir'):
    if os.geteuid() != 0:
        print('  skip foreign-dir: needs root to make another user\'s directory')
    else:
        d = '/tmp/mt-foreign.%d' % os.getpid()
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        os.chmod(d, 0o777)
        os.chown(d, 1, 1)  # daemon's
        lib = '/tmp/mt-foreign-lib.%d.so' % os.getpid()
        prog = '/tmp/mt-foreign-prog.%d' % os.getpid()
        shutil.copy(SHIM, lib)
        shutil.copy(os.path.join(B, 'test', 'prog_known'), prog)
        os.chmod(lib, 0o755)
        os.chmod(prog, 0o755)
        env = dict(os.environ, LD_PRELOAD=lib, MEMTALLY_OUT=d)
        drop = [os.path.join(B, 'test', 'prog_drop'), '65534', prog]
        plain = subprocess.run(drop, capture_output=True, text=True, env=dict(os.environ, MEMTALLY_OUT=d))
        r = subprocess.run(drop, capture_output=True, text=True, env=env, cwd='/tmp')
        mt.eq((r.returncode, r.stdout), (plain.returncode, plain.stdout), 'foreign-dir: the program runs on')
        mt.check('belongs to another user: not writing there' in r.stderr, 'foreign-dir: says why %r' % r.stderr[-200:])
        mt.eq(os.listdir(d), [], 'foreign-dir: nothing written into another user\'s directory')
        shutil.rmtree(d, ignore_errors=True)
        os.unlink(lib)
        os.unlink(prog)

def root_dir(name, mode=0o750):
    d = '/tmp/mt-%s.%d' % (name, os.getpid())
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.chmod(d, mode)
    return d

if mt.case('setpriv'):
    if os.geteuid() != 0 or not shutil.which('setpriv'):
        print('  skip setpriv: needs root and setpriv (util-linux)')
    else:
        d = root_dir('setpriv')
        argv = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '/bin/echo', 'b']
        plain = subprocess.run(argv, capture_output=True, text=True)
        r = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d))
        mt.check((r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (0, 'b\n'),
                 'setpriv: runs as without the shim (exit %d, %r)' % (r.returncode, r.stderr[-200:]))
        fs = [f for f in mt.files(d) if f.header['argv'][0] == 'setpriv']
        mt.check(len(fs) == 1 and fs[0].final()['reason'] == 'exec',
                 'setpriv: its file holds its exec snapshot, written after the drop (%s)' % os.listdir(d))
        shutil.rmtree(d, ignore_errors=True)

if mt.case('drop-threads'):
    if os.geteuid() != 0:
        print('  skip drop-threads: needs root')
    else:
        import resource
        def tight():  # soft = hard: the shim keeps no descriptor between
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))  # writes but across the drop
        for extra, pre in (({}, None), ({'MEMTALLY_INTERVAL': '0.005'}, None), ({}, tight)):
            d = root_dir('drop')
            prog = [os.path.join(B, 'test', 'prog_setid'), '65534']
            env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d, **extra)
            r = subprocess.run(prog, capture_output=True, text=True, env=env, preexec_fn=pre)
            extra = dict(extra, nofile=64) if pre else extra
            fs = mt.files(d)
            last = fs[0].final() if fs and fs[0].snapshots else {'callsites': []}
            after = [c for c in last['callsites'] if c['stack'] and
                     'after_drop' in [fn for fn, _ in fs[0].symbolize(fs[0].stacks[c['stack']])]]
            mt.check(r.returncode == 0 and r.stdout == 'dropped to 65534\n' and len(fs) == 1 and
                     last.get('reason') == 'exit' and after and after[0]['live_bytes'] == 1 << 20,
                     'drop-threads %s: the exit snapshot holds after_drop\'s 1 MiB (exit %d, %d files, %r)' %
                     (extra, r.returncode, len(fs), r.stderr[-200:]))
            shutil.rmtree(d, ignore_errors=True)

if mt.case('userns'):  # unshare(CLONE_NEWUSER) refuses a process with two threads
    if subprocess.run(['unshare', '--user', '--map-root-user', 'true']).returncode != 0:
        print('  skip userns: unshare --user does not work here')
    else:
        for extra in ({}, {'MEMTALLY_INTERVAL': '0.1'}):
            r = subprocess.run(['unshare', '--user', '--map-root-user', 'true'], capture_output=True, text=True,
                               env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=os.path.join(OUT, 'userns'),
                                        **extra))
            mt.check(r.returncode == 0, 'userns %s: unshare --user runs under the shim (exit %d %r)' %
                     (extra, r.returncode, r.stderr[-100:]))
        # the joined writer is still counted by the kernel for a moment
        # after pthread_join: with the CPUs busy, unshare failed (EINVAL)
        # in 62 of 300 runs; each run now waits for the kernel's count
        burn = [subprocess.Popen(['sh', '-c', 'while :; do :; done']) for _ in range(os.cpu_count() or 2)]
        try:
            fails = []
            for i in range(40):
                r = subprocess.run(['unshare', '--user', '--map-root-user', 'true'], capture_output=True,
                                   text=True, env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_INTERVAL='0.1',
                                                       MEMTALLY_OUT=os.path.join(OUT, 'userns')))
                if r.returncode:
                    fails.append(r.stderr.strip()[-80:])
        finally:
            for b in burn:
                b.kill()
                b.wait()
        mt.eq(fails, [], 'userns: 40 runs with a writer thread, the CPUs busy: unshare --user never refused')

if mt.case('root-link'):
    if os.geteuid() != 0:
        print('  skip root-link: needs root')
    else:
        pub = root_dir('pub', 0o1777)
        target = root_dir('target', 0o755)
        link = os.path.join(pub, 'o')
        os.symlink(target, link)
        os.lchown(link, 65534, 65534)  # nobody planted it
        r = subprocess.run([os.path.join(B, 'test', 'prog_known')], capture_output=True, text=True,
                           env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=link))
        mt.check(r.returncode == 0 and os.listdir(target) == [] and 'belongs to another user' in r.stderr,
                 'root-link: a link nobody planted is not followed (%s; %r)' % (os.listdir(target), r.stderr[-200:]))
        os.lchown(link, 0, 0)  # root's own link: followed
        r = subprocess.run([os.path.join(B, 'test', 'prog_known')], capture_output=True, text=True,
                           env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=link))
        mt.check(r.returncode == 0 and len(mt.jsonl(target)) == 1, 'root-link: root\'s own link is followed')
        shutil.rmtree(pub, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)

if mt.case('root-foreign'):
    if os.geteuid() != 0:
        print('  skip root-foreign: needs root')
    else:
        d = root_dir('nobodys', 0o777)
        os.chown(d, 65534, 65534)
        r = subprocess.run([os.path.join(B, 'test', 'prog_known')], capture_output=True, text=True,
                           env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d))
        mt.check(r.returncode == 0 and os.listdir(d) == [] and 'belongs to another user' in r.stderr,
                 'root-foreign: root refuses nobody\'s 0777 directory (%s)' % os.listdir(d))
        shutil.rmtree(d, ignore_errors=True)

if mt.case('setuid'):
    if os.geteuid() != 0 or subprocess.run(['unshare', '-m', 'true']).returncode:
        print('  skip setuid: needs root and unshare -m')
    else:
        d = '/tmp/mt-setuid.%d' % os.getpid()  # nobody must reach it
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d + '/out')
        os.chmod(d, 0o755)
        os.chmod(d + '/out', 0o777)
        shutil.copy(SHIM, d + '/libmemtally.so')
        shutil.copy(os.path.join(B, 'test', 'prog_known'), d + '/prog')
        os.chmod(d + '/libmemtally.so', 0o755)
        os.chmod(d + '/prog', 0o4755)  # setuid root
        with open(d + '/preload', 'w') as f:
            f.write(d + '/libmemtally.so\n')
        created = not os.path.exists('/etc/ld.so.preload')
        if created:
            open('/etc/ld.so.preload', 'w').close()
        try:
            plain = subprocess.run([os.path.join(B, 'test', 'prog_drop'), '65534', d + '/prog'],
                                   capture_output=True, env=dict(os.environ, MEMTALLY_OUT=d + '/out'))
            r = subprocess.run(['unshare', '-m', 'sh', '-c', 'mount --bind "$0/preload" /etc/ld.so.preload && '
                                'exec "$1" 65534 "$0/prog"', d, os.path.join(B, 'test', 'prog_drop')],
                               capture_output=True, env=dict(os.environ, MEMTALLY_OUT=d + '/out'), timeout=60)
        finally:
            if created:
                os.unlink('/etc/ld.so.preload')
        mt.eq((r.returncode, r.stdout), (plain.returncode, plain.stdout),
              'setuid: the program runs as without the shim (%r)' % r.stderr[-200:])
        mt.eq(os.listdir(d + '/out'), [], 'setuid: nothing written where the caller pointed')
        shutil.rmtree(d, ignore_errors=True)
mt.done()
