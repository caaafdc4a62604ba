"""Nothing lost at exec (issue 15): an image that execs before its first
snapshot left no file (destructors do not run at exec).  The exec family
(execl, execlp, execle, execv, execvp, execve, ...) writes an "exec"
snapshot before the image is replaced, holding what it had live; a failed
exec changes nothing the program sees (its return, errno, output and exit
code as without the shim) and the file goes on to its exit snapshot; a
vfork child's exec writes nothing into its parent's file, and a fork
child that execs before any snapshot of its own (a shell's fork + exec)
leaves no file of its own (the image it runs writes one)."""
import os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
LIB = os.path.join(B, 'libmemtally.so')
prog = os.path.join(B, 'test', 'prog_exec')

for mode, reasons in (('ok', ['exec']), ('lp', ['exec']), ('le', ['exec']), ('fail', ['exec', 'exit']),
                      ('vfork', ['exit']), ('fork', ['exit'])):
    d = os.path.join(OUT, mode)
    plain = subprocess.run([prog, mode], capture_output=True, text=True)
    r = subprocess.run([prog, mode], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=LIB, MEMTALLY_OUT=d))
    mt.check((r.returncode, r.stdout) == (plain.returncode, plain.stdout),
             '%s: same output and exit code as without the shim (%d %r)' % (mode, r.returncode, r.stdout))
    mine = [f for f in mt.files(d) if f.header['argv'][:2] == [prog, mode]]
    got = [s['reason'] for s in mine[0].snapshots] if mine else None
    mt.eq(got, reasons, '%s: the exec\'ing image\'s file and its snapshots' % mode)
    if mine and mine[0].snapshots:
        s = mine[0].snapshots[0]
        keep = mine[0].sites_by_function(s, ('heap',)).get(('keep_config', 'heap'), {})
        if mode in ('vfork', 'fork'):
            files = sorted(os.path.basename(f.path) for f in mt.files(d))
            mt.check(len(files) == 2 and all(f.header['argv'] in ([prog, mode], ['/bin/true'], ['true'])
                                             for f in mt.files(d)),
                     '%s: two files, the parent\'s and true\'s, none for the child between (%s)' % (mode, files))
        mt.check(keep.get('live_bytes') == 1 << 20,
                 '%s: its first snapshot holds keep_config\'s 1 MiB (%s)' % (mode, keep.get('live_bytes')))
# The exit snapshot is the last in a file: the writer thread, waiting on
# its lock with an interval snapshot while exit wrote, used to write one
# after it (a leaking PyTorch trainer's file then ended at the exit level,
# and its teardown was read as part of the run).  Python processes (whose
# exit snapshot takes a while: thousands of stacks) snapshot every
# millisecond; every file must end with "exit".
d = os.path.join(OUT, 'exit-last')
bad = []
for i in range(20):
    subprocess.run(['/usr/bin/python3', '-c', 'import json, email.parser; x = [bytearray(100) for _ in range(1000)]'],
                   capture_output=True, env=dict(os.environ, LD_PRELOAD=LIB, MEMTALLY_OUT=d, MEMTALLY_INTERVAL='0.001'))
for f in mt.files(d):
    if f.snapshots and f.snapshots[-1]['reason'] != 'exit':
        bad.append([s['reason'] for s in f.snapshots[-3:]])
mt.check(len(mt.files(d)) == 20 and not bad, 'exit is the last snapshot in all of 20 files (%d end otherwise: %s)'
         % (len(bad), bad[:2]))
mt.done()
