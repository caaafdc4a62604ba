"""Reserved address space is not memory, and a Go program's last state
reaches the file (issue 33, item 6).

- prog_reserve: 1 GiB reserved (mmap PROT_NONE), 16 MiB made memory with
  mprotect, 8 MiB with mmap MAP_FIXED, 4 MiB given back with mprotect
  PROT_NONE: the mmap kind holds the 20 MiB that are memory, the rest is
  mmap_reserved_bytes (before: 1 GiB of live mmap bytes, and mprotect was
  not seen);
- a cgo program (only where `go` is installed): Go reserves its arenas
  PROT_NONE (693 MiB of "live mmap" against 11 MiB RSS before); it leaves
  through exit_group, past the exit snapshot, so the shim says so once and,
  without MEMTALLY_INTERVAL, snapshots every second."""
import os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
SHIM = os.path.join(B, 'libmemtally.so')
MIB = 1 << 20

if mt.case('c'):
    out = os.path.join(OUT, 'c')
    r = subprocess.run([os.path.join(B, 'test', 'prog_reserve')], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out))
    f = mt.files(out)[0]
    last = f.final()
    mmap = last.get('mmap', {}).get('live_bytes', 0)
    mt.check(r.returncode == 0 and mmap == 20 * MIB,
             'mmap live bytes are the 20 MiB made memory (got %.1f MiB)' % (mmap / MIB))
    mt.eq(last.get('mmap_reserved_bytes'), 1024 * MIB - 24 * MIB + 4 * MIB,
          'the rest of the GiB is reserved address space')
    rep = subprocess.run([os.path.join(B, 'memtally'), 'report', out], capture_output=True, text=True)
    mt.check('of address space reserved (PROT_NONE)' in rep.stdout, 'report says it apart')

if mt.case('go'):
    go = shutil.which('go')
    if not go:
        print('  skip go: `go` is not installed (apt golang-go)')
    else:
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'go')
        exe = os.path.join(OUT, 'cgoprog')
        env = dict(os.environ, GOCACHE=os.path.join(OUT, 'gocache'), GOPATH=os.path.join(OUT, 'gopath'),
                   GOFLAGS='-mod=mod', CGO_ENABLED='1', GO111MODULE='on', GOPROXY='off')
        b = subprocess.run([go, 'build', '-o', exe, '.'], cwd=src, env=env, capture_output=True, text=True)
        if b.returncode:
            mt.check(False, 'go build: %s' % b.stderr[-300:])
        else:
            plain = subprocess.run([exe], capture_output=True, text=True)
            out = os.path.join(OUT, 'go')
            r = subprocess.run([exe], capture_output=True, text=True,
                               env=dict(os.environ, LD_PRELOAD=SHIM, MEMTALLY_OUT=out))
            warn = [l for l in r.stderr.splitlines() if 'exit_group' in l]
            mt.check((r.returncode, r.stdout) == (plain.returncode, plain.stdout) and len(warn) == 1 and
                     'MEMTALLY_INTERVAL=1' in warn[0], 'cgo: runs as bare, one warning (%r)' % r.stderr[-300:])
            fs = mt.files(out)
            snaps = fs[0].snapshots if fs else []
            mt.check(len([s for s in snaps if s['reason'] == 'interval']) >= 1,
                     'cgo: interval snapshots without MEMTALLY_INTERVAL (%d snapshots)' % len(snaps))
            last = snaps[-1] if snaps else {}
            rss = last.get('proc', {}).get('rss_bytes', 0)
            mmap = last.get('mmap', {}).get('live_bytes', 0)
            mt.check(last.get('mmap_reserved_bytes', 0) > 256 * MIB and mmap < 128 * MIB,
                     'cgo: Go\'s arenas are reserved address space (%.0f MiB), mmap %.1f MiB, RSS %.1f MiB' %
                     (last.get('mmap_reserved_bytes', 0) / MIB, mmap / MIB, rss / MIB))
mt.done()
