"""Reliability: faults and hostile programs (issue 9).  Every case runs the
same program with and without the shim and requires the same output and
exit code; where the shim had something to record, what it wrote must read
back (`memtally report` exits 0).  The table it prints is doc/reliability.md's
Reliability section (`memtally` writes it to test/out/reliability.md)."""
import glob, os, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
T = os.path.join(B, 'test')
rows = []

def case(name, tried, argv, extra=None, out=None, check_file=True, compare_stderr=True):
    out = out or os.path.join(OUT, name)
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out)
    env.update(extra or {})
    shim = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    same = shim.returncode == plain.returncode and shim.stdout == plain.stdout
    warns = [l for l in shim.stderr.splitlines() if l.startswith('memtally:')]
    if compare_stderr:
        same = same and [l for l in shim.stderr.splitlines() if not l.startswith('memtally:')] == \
            plain.stderr.splitlines()
    readable = True
    files = mt.jsonl(out, '*') if os.path.isdir(out) else []
    if check_file and files:
        readable = subprocess.run([MT, 'report', out], capture_output=True).returncode == 0
        # an empty file (an image that exec'd before its first line) is skipped with a note
    mt.check(same, '%s: same output and exit code (%d)' % (name, shim.returncode))
    mt.check(len(warns) <= 1, '%s: at most one warning (%d)' % (name, len(warns)))
    mt.check(readable, '%s: what was written reads back' % name)
    rows.append((name, tried, '%s; %d warning%s; %d file%s%s' %
                 ('same output and exit code' if same else 'OUTPUT DIFFERS', len(warns),
                  '' if len(warns) == 1 else 's', len(files), '' if len(files) == 1 else 's',
                  ', all readable' if files and readable else ''),
                 'nothing' if same and readable else 'SEE LOG'))
    return shim, files

prog = os.path.join(T, 'prog_trainer')
# faults
case('unwritable directory', 'MEMTALLY_OUT under /proc (cannot be created)', [prog, 'leak', '50'],
     out='/proc/memtally-cannot')
tmpfs = os.path.join(OUT, 'full')
os.makedirs(tmpfs, exist_ok=True)
mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', tmpfs]).returncode == 0
if mounted:
    shim, files = case('full filesystem', '64 KiB tmpfs, a snapshot every 5 steps', [prog, 'leak', '200'], out=tmpfs)
    subprocess.run(['umount', tmpfs])
else:
    mt.check(False, 'full filesystem: cannot mount a tmpfs here (run as root)')
# deleted mid-run: the directory goes while the program runs
d = os.path.join(OUT, 'deleted')
p = subprocess.Popen([os.path.join(T, 'prog_grow'), '60', '10'], env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d,
                     MEMTALLY_INTERVAL='0.05'), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(0.3)
shutil.rmtree(d, ignore_errors=True)
o, e = p.communicate(timeout=60)
ok = p.returncode == 0 and o == 'grew 60 MiB\n'
mt.check(ok, 'deleted mid-run: the program finishes as usual')
files = mt.jsonl(d, '*')
mt.check(len(files) == 1 and subprocess.run([MT, 'report', d], capture_output=True).returncode == 0,
         'deleted mid-run: the file is made again and reads back')
rows.append(('output deleted mid-run', 'rm -rf of MEMTALLY_OUT while snapshots are written',
             'program unchanged; the file is re-created with a header and carries on', 'nothing after the deletion'
             if ok else 'SEE LOG'))
# SIGKILL: every completed snapshot readable
d = os.path.join(OUT, 'killed')
p = subprocess.Popen([os.path.join(T, 'prog_grow'), '300', '10'], env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=d,
                     MEMTALLY_INTERVAL='0.02'), stdout=subprocess.DEVNULL)
time.sleep(1.0)
p.send_signal(signal.SIGKILL)
p.wait()
f = mt.files(d)[0]
r = subprocess.run([MT, 'report', '--json', d], capture_output=True, text=True)
mt.check(r.returncode == 0 and len(f.snapshots) >= 5, 'SIGKILL: %d snapshots read back' % len(f.snapshots))
rows.append(('SIGKILL', 'kill -9 during interval snapshots', 'the file reads back (%d snapshots); a cut last line is '
             'ignored' % len(f.snapshots), 'at most the snapshot being written'))
case('tables full', 'MEMTALLY_MAX_STACKS=16 MEMTALLY_MAX_LIVE=64', [os.path.join(T, 'prog_known')],
     extra={'MEMTALLY_MAX_STACKS': '16', 'MEMTALLY_MAX_LIVE': '64'})
rows[-1] = rows[-1][:3] + ('what did not fit, counted in every snapshot (shim.dropped_*)',)
# hostile programs
h = os.path.join(T, 'prog_hostile')
case('malloc in a signal handler', 'SIGALRM every 2 ms; the handler mallocs and frees', [h, 'sigmalloc'])
od = os.path.join(OUT, 'closefds')
os.makedirs(od, exist_ok=True)
shim, files = case('all fds closed', 'close_range(3, ~0) after the shim opened its file; the program opens 8 files',
                   [h, 'closefds', od], out=od)
own = [open(os.path.join(od, 'own%d.txt' % i)).read() for i in range(8)]
mt.eq(own, ['own file %d\n' % i for i in range(8)], 'all fds closed: the program\'s files hold only its own text')
if files:
    f = mt.File([x for x in files if '.oom' not in x][0])
    mt.check(any(s.get('label') == 'after' for s in f.snapshots), 'all fds closed: the shim reopened its own file')
case('SA_RESETHAND', 'its own SIGUSR1 handler with SA_RESETHAND, raised once', [h, 'resethand'])
shim, files = case('exec itself', 'execs itself 20 times (same pid), a snapshot at every allocation',
                   [h, 'execself', '20'], extra={'MEMTALLY_EVERY': '1'})
mt.check(len(files) == 21 and len(set(files)) == len(files),
         'exec itself: images sharing the pid write separate files (%d; .x<N> names), none overwritten' % len(files))
case('vfork and posix_spawn', 'vfork + exec, posix_spawn', [h, 'vfork'])
case('allocation in TLS destructors', '20 threads whose pthread key destructors malloc at exit', [h, 'tlsdtor'])
case('custom allocator on raw mmap', 'a bump allocator in one 64 MiB mmap', [h, 'rawmmap'])
static = os.path.join(OUT, 'static_hello')
with open(static + '.c', 'w') as f:
    f.write('#include <stdio.h>\nint main(void){puts("static ok");return 3;}\n')
if subprocess.run(['gcc', '-static', '-O1', '-o', static, static + '.c']).returncode == 0:
    r = subprocess.run([MT, 'run', '--out', os.path.join(OUT, 'static'), '--', static], capture_output=True, text=True)
    mt.eq((r.returncode, r.stdout), (3, 'static ok\n'), 'static binary: runs, same output and exit code')
    mt.check('statically linked' in r.stderr, 'static binary: memtally run says the shim cannot be there')
    rows.append(('statically linked binary', '`memtally run` on a gcc -static program', 'runs unchanged; a note '
                 'says nothing can be recorded', 'nothing (there was nothing to record)'))
with open(os.path.join(os.path.dirname(OUT), 'reliability.md'), 'w') as f:
    f.write('| case | what was tried | what happened | what was lost |\n|---|---|---|---|\n')
    for r in rows:
        f.write('| %s | %s | %s | %s |\n' % r)
print(open(os.path.join(os.path.dirname(OUT), 'reliability.md')).read())
mt.done()
