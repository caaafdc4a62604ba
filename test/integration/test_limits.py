"""The program behaves as without memtally at the edges of its limits
(issue 45), each case run with and without the shim:
  header:  the first snapshot cannot be written (RLIMIT_FSIZE of 1 KiB, 2 plain,
           SIGXFSZ ignored): the file holds its header, written when the
           file was made, and the reader takes it (it was empty: the
           header went out with the first snapshot, which was cut back);
           plain and zstd files
  fds:     `ulimit -n 64` and 200, a program that opens /dev/null until
           EMFILE: its first descriptor (3) and its count as without the
           shim (which took 3 of them: its file and libunwind's pipe).
           With soft = hard (unprivileged, or root without
           CAP_SYS_RESOURCE) the shim holds no descriptor between writes,
           so a snapshot while the program has them all is lost (the exit
           snapshot of one that exits so; written when it closes them
           first); with `ulimit -Sn 64` (soft < hard) its file sits above
           the soft limit and the exit snapshot is written
  oomfds:  malloc fails while the program has every descriptor open:
           with soft = hard the dump cannot be opened, and the warning (in
           the file) names it (it printed an uninitialised path); with
           soft < hard the dump is written
  vm:      `ulimit -v 20000` (and 15000, 24000) and calloc(8 MiB), as root and
           as an ordinary user (nobody, through setpriv): succeeds as
           without the shim, whose exit snapshot is written too (the
           shim's address space at start was 10 MB more than without it,
           as root: its file's buffers and zstd's context, the CFI rule
           table, the OOM dump buffer, libunwind's caches, libm; now
           2.5 MB, most of it libzstd, libunwind and the shim itself)
  disk:    a 16 MiB tmpfs holds the program's output and the shim's; the
           program fills it to all but 4 KiB, asks for 8 snapshots, writes
           the last 4 KiB: with MEMTALLY_DISK_FLOOR=2M it succeeds as
           without the shim (the snapshots are not written, the file says
           why once, and writing resumes once the program frees the
           space; `memtally run` prints the warning at the end); with no
           floor (0) the shim takes the last bytes: ENOSPC, exit 4 (the
           failure the floor prevents)
"""
import os, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
PROG = os.path.join(B, 'test', 'prog_limits')
MT = os.path.join(B, 'memtally')
env0 = {k: v for k, v in os.environ.items() if not k.startswith('MEMTALLY_') and k != 'LD_PRELOAD'}


def run(name, limits, args, shim=True, **vars):
    """args under bash with limits (ulimit/trap lines), with or without the shim."""
    env = dict(env0)
    out = os.path.join(OUT, name)
    if shim:  # the program's, not bash's (its exec would make a second file)
        env.update(PRELOAD=SHIM, MEMTALLY_OUT=out)
        env.update({'MEMTALLY_' + k: v for k, v in vars.items()})
    script = '%s; %s exec "$@"' % (limits, 'LD_PRELOAD=$PRELOAD' if shim else '')
    r = subprocess.run(['bash', '-c', script, 'x'] + args, env=env, capture_output=True, text=True, timeout=120)
    return r, out


if mt.case('header'):
    for compress in ('0', '1'):
        # the header fits, the first snapshot (maps, stacks, the line)
        # does not: 1 KiB compressed; 2 KiB plain (the plain header lists
        # every option in its config: over 1 KiB now)
        kib = 2 if compress == '0' else 1
        lim = "ulimit -f %d; trap '' XFSZ" % kib
        a, _ = run('hdr-plain%s' % compress, lim, [PROG, 'calloc'], shim=False)
        b, out = run('hdr%s' % compress, lim, [PROG, 'calloc'], COMPRESS=compress)
        mt.eq((b.returncode, b.stdout), (a.returncode, a.stdout),
              'COMPRESS=%s, RLIMIT_FSIZE %d KiB: the program as without the shim' % (compress, kib))
        names = sorted(os.listdir(out)) if os.path.isdir(out) else []
        sizes = [os.path.getsize(os.path.join(out, n)) for n in names]
        mt.check(len(names) == 1 and sizes[0] > 0, 'COMPRESS=%s: one file, not empty (%s)' % (compress, sizes))
        f = mt.files(out)
        mt.check(len(f) == 1 and f[0].header is not None and f[0].header.get('pid') and not f[0].snapshots,
                 'COMPRESS=%s: its header, and no snapshot (the one that did not fit was cut off)' % compress)
        r = subprocess.run([MT, 'report', out], capture_output=True, text=True)
        mt.check(r.returncode == 0 and 'only its header' in r.stdout,
                 'COMPRESS=%s: report takes the header-only file (%s)' % (compress, (r.stdout + r.stderr)[-200:]))

if mt.case('fds'):
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    def same(tag, lim, mode):
        a, _ = run('fds-plain-%s' % tag, lim, [PROG, 'fds'] + mode, shim=False)
        b, out = run('fds-%s' % tag, lim, [PROG, 'fds'] + mode)
        mt.eq((b.returncode, b.stdout), (a.returncode, a.stdout),
              '%s %s: the program opens as many descriptors as without the shim, from the same first'
              % (lim, ' '.join(mode)))
        return out
    for n in (64, 200):
        # soft = hard, and no CAP_SYS_RESOURCE to raise them (a container's
        # root): the shim keeps no descriptor between writes
        lim = 'ulimit -n %d' % n
        out = same('%d' % n, lim, [])
        f = mt.files(out)
        if os.geteuid() == 0:  # root made its file at start (its header)
            mt.check(len(f) == 1 and f[0].header is not None,
                     '%s: root\'s file, made at start, holds its header' % lim)
        out = same('%d-close' % n, lim, ['close'])
        f = mt.files(out)
        mt.check(len(f) == 1 and f[0].snapshots and f[0].snapshots[-1].get('reason') == 'exit',
                 '%s, the program closes them before it exits: the exit snapshot is written' % lim)
    if hard >= 64 + 16:
        # soft < hard: the shim's descriptor sits above the soft limit
        lim = 'ulimit -Sn 64'
        out = same('soft', lim, [])
        f = mt.files(out)
        mt.check(len(f) == 1 and f[0].snapshots and f[0].snapshots[-1].get('reason') == 'exit',
                 '%s: the exit snapshot is written though the program has every descriptor open' % lim)
    else:
        print('  note: hard RLIMIT_NOFILE %d: the soft-limit case skipped' % hard)
if mt.case('oomfds'):
    # an allocation fails while the program has every descriptor open: the
    # OOM dump cannot be opened (soft = hard) and the warning names it; it
    # is written when the shim may raise the soft limit (soft < hard)
    import re, resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for lim in ['ulimit -n 64'] + (['ulimit -Sn 64'] if hard >= 80 else []):
        tag = 'oom-soft' if '-S' in lim else 'oom'
        a, _ = run(tag + '-plain', lim, [PROG, 'fds', 'oom'], shim=False)
        b, out = run(tag, lim, [PROG, 'fds', 'oom'], QUIET='1')
        mt.eq((b.returncode, b.stdout, b.stderr), (a.returncode, a.stdout, a.stderr),
              '%s, malloc fails at the limit: the program as without the shim' % lim)
        f = mt.files(out)
        pid = f[0].header.get('pid') if f else None
        dumps = [n for n in os.listdir(out) if '.oom' in n] if os.path.isdir(out) else []
        warns = [w for w in (f[0].warnings if f else []) if 'OOM dump' in w]
        if '-S' in lim:
            mt.check(len(dumps) == 1 and not warns, '%s: the dump is written (%s %s)' % (lim, dumps, warns))
        else:
            want = r'^cannot write OOM dump %s/memtally\.[^/ ]+\.p%s\.oom1\.jsonl \(errno 24\)$' % (re.escape(out), pid)
            mt.check(not dumps and len(warns) == 1 and re.match(want, warns[0]),
                     '%s: no dump; the warning names the file it could not open (%s)' % (lim, warns))

if mt.case('vm'):
    # as the runner (root here: it makes its file at start, and once mapped
    # the writer's buffers then) and as an ordinary user (nobody)
    users = [('runner', [])]
    if shutil.which('setpriv') and os.geteuid() == 0:
        users.append(('nobody', ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']))
    else:
        print('  note: needs root and setpriv: nobody\'s case skipped')
    # copies anyone can read, and an output directory under /tmp
    tmp = tempfile.mkdtemp(prefix='mt-limits-')
    os.chmod(tmp, 0o755)
    shim, prog = os.path.join(tmp, 'libmemtally.so'), os.path.join(tmp, 'prog_limits')
    shutil.copy(SHIM, shim)
    shutil.copy(PROG, prog)
    for who, pre in users:
        for kb in (15000, 20000, 24000):
            out = '%s-out-%s-%d' % (tmp, who, kb)
            script = 'ulimit -v %d; %s exec "$@"'
            a = subprocess.run(pre + ['bash', '-c', script % (kb, ''), 'x', prog, 'calloc'],
                               env=env0, capture_output=True, text=True, timeout=60)
            b = subprocess.run(pre + ['bash', '-c', script % (kb, 'LD_PRELOAD=%s MEMTALLY_OUT=%s' % (shim, out)),
                                      'x', prog, 'calloc'], env=env0, capture_output=True, text=True, timeout=60)
            mt.eq((b.returncode, b.stdout), (a.returncode, a.stdout),
                  'ulimit -v %d, calloc(8 MiB), as %s: as without the shim' % (kb, who))
            f = mt.files(out) if os.path.isdir(out) else []
            if kb >= 20000:  # below, room for the program, not for the shim's snapshot
                mt.check(len(f) == 1 and f[0].snapshots and f[0].snapshots[-1].get('reason') == 'exit',
                         'ulimit -v %d, as %s: and the shim wrote its exit snapshot (%s)' % (kb, who, b.stderr[-200:]))
            shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
if mt.case('disk'):
    fs = tempfile.mkdtemp(prefix='mt-disk-')
    prog = os.path.join(B, 'test', 'prog_diskfull')
    if os.geteuid() != 0 or subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', fs]).returncode:
        print('  note: cannot mount a tmpfs here: skipped')
    else:
        try:
            def clean():
                for n in os.listdir(fs):
                    p = os.path.join(fs, n)
                    shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
            a = subprocess.run([prog, fs], env=env0, capture_output=True, text=True, timeout=120)
            outs = {}
            for floor in ('2M', '0'):
                clean()
                out = os.path.join(fs, 'out')
                r = subprocess.run([prog, fs], capture_output=True, text=True, timeout=120,
                                   env=dict(env0, LD_PRELOAD=SHIM, MEMTALLY_OUT=out, MEMTALLY_DISK_FLOOR=floor,
                                            MEMTALLY_QUIET='1'))
                f = mt.files(out)
                outs[floor] = (r, [s.get('label') for s in f[0].snapshots] if f else None,
                               f[0].warnings if f else None)
            r, labels, warns = outs['2M']
            mt.eq((r.returncode, r.stdout), (a.returncode, a.stdout),
                  'DISK_FLOOR=2M: the program fills the disk as without the shim (%s)' % a.stdout.strip())
            mt.check(labels is not None and 'full' not in labels and 'space back' in labels,
                     'below the floor no snapshot is written; once the space is back, it is (%s)' % labels)
            mt.check(warns is not None and len([w for w in warns if 'below the floor' in w]) == 1,
                     'the file says so, once (%s)' % warns)
            r, labels, warns = outs['0']
            mt.eq((r.returncode, r.stdout.strip()), (4, 'last write: No space left on device'),
                  'with no floor the shim takes the last bytes (the failure the floor prevents)')
            clean()
            r = subprocess.run([MT, 'run', '--out', os.path.join(fs, 'run'), '--', prog, fs], capture_output=True,
                               text=True, timeout=120, env=dict(env0, MEMTALLY_DISK_FLOOR='2M'))
            fr = mt.files(os.path.join(fs, 'run'))
            mt.check(r.returncode == 0 and 'memtally: warning from 1 process: the output filesystem has' in r.stderr,
                     'memtally run: exit 0 and the floor\'s warning at the end (%s %s %s)' % (r.returncode, [x.warnings for x in fr], r.stderr[-300:]))
        finally:
            subprocess.run(['umount', fs])
    os.rmdir(fs)
mt.done()
