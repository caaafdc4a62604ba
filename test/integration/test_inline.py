"""Inlined frames as frames (issue 53): a C program (remember() inlined
into batch_a() and batch_b(), both inlined into main; leaf < mid < outer
inlined into work, a lexical block between) and a C++ one (a member
function inlined through a template and a namespace's functions into main;
libstdc++'s allocator chain under std::vector), each built at -O2 and -O3
(every view checked on both programs):

 - every return address of the program's own module reads, in
   `report --json`'s frames, exactly as `addr2line -i -f -C` gives it
   (function, file, line, innermost first), the chain's frames but the
   last marked inlined; at least one chain is two frames or more;
 - gdb's `bt` at remember's line gives the same functions as that site's
   chain (where gdb is installed);
 - the two inlined call sites of remember are two rows, naming batch_a
   and batch_b and main (report), and every view carries the chain:
   `report --stacks`, `flame --folded`, `functions`, pprof's Line
   entries (`go tool pprof -traces`, where go is installed).

PyTorch's own frames under --native (Debian's torch: libtorch_cpu.so
and libtorch_python.so ship no DWARF, only their dynamic symbol table, so
there is no inlined chain or line for memtally or addr2line to give): for
every frame of those libraries in `report --native --json`'s rows, one
that memtally names is the function `addr2line -f -C` names; one it leaves
unnamed (module+offset) lies past the end of the nearest symbol before it
(its st_size, from `nm -D -S`), where addr2line names that symbol anyway:
a local function's code, not the exported one's."""
import json, os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
LIB = os.path.join(B, 'libmemtally.so')
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'inline')
os.makedirs(OUT, exist_ok=True)


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)


def line_of(src, tag):
    return [i + 1 for i, l in enumerate(open(src)) if tag in l][0]


def build_and_run(src, opt):
    name = '%s-O%d' % (os.path.splitext(os.path.basename(src))[0], opt)
    exe = os.path.join(OUT, name)
    cc = 'g++' if src.endswith('.cc') else 'gcc'
    r = sh([cc, '-O%d' % opt, '-g', '-o', exe, src])
    mt.eq(r.returncode, 0, '%s: builds (%s)' % (name, r.stderr[-200:]))
    out = os.path.join(OUT, name + '.out')
    shutil.rmtree(out, ignore_errors=True)
    r = sh([exe], env=dict(os.environ, LD_PRELOAD=LIB, MEMTALLY_OUT=out))
    mt.eq(r.returncode, 0, '%s: exit code' % name)
    return name, exe, out


def sites(out):
    """Every call site of report --json --stacks, last and at the peak."""
    r = sh([MT, 'report', '--json', '--stacks', '--top', '1000', out])
    p = json.loads(r.stdout)['processes'][0]
    return p['last']['callsites'] + p['peak']['callsites']


def chains(frames, exe):
    """The frames of each return address in exe, innermost first:
    [(offset, [frame, ...])]."""
    out = []
    for f in frames:
        if f['module'] != exe:
            continue
        if out and out[-1][0] == f['offset'] and out[-1][1][-1]['inlined']:
            out[-1][1].append(f)
        else:
            out.append((f['offset'], [f]))
    return out


def addr2line(exe, off):
    r = sh(['addr2line', '-i', '-f', '-C', '-e', exe, off])
    v = r.stdout.splitlines()
    return [(v[i], os.path.basename(v[i + 1].rsplit(':', 1)[0]), int(v[i + 1].rsplit(':', 1)[1].split()[0])
             if v[i + 1].rsplit(':', 1)[1].split()[0].isdigit() else 0) for i in range(0, len(v) - 1, 2)]


def check_addr2line(name, exe, out):
    seen, deep, bad = set(), 0, []
    for c in sites(out):
        for off, ch in chains(c['frames'], exe):
            if off in seen:
                continue
            seen.add(off)
            mine = [(f['function'], os.path.basename(f['file']) if f['file'] else '??', f['line'])
                    for f in ch]
            want = addr2line(exe, off)
            if mine[0][0] == '_start':  # no line: addr2line says ??:0
                continue
            if mine != want or any(not f['inlined'] for f in ch[:-1]):
                bad.append((off, mine, want))
            deep = max(deep, len(ch))
    mt.check(seen and not bad, '%s: %d return addresses read as addr2line -i gives them%s'
             % (name, len(seen), (': ' + repr(bad[0])[:400]) if bad else ''))
    mt.check(deep >= 3, '%s: inline chains up to %d frames (3 at least)' % (name, deep))
    return seen


def chains_of(out, exe, func):
    """The chains (function names) whose innermost frame is func."""
    got = []
    for c in sites(out):
        for off, ch in chains(c['frames'], exe):
            names = [re.sub(r'\(.*', '', f['function']) for f in ch]
            if names[0] == func and names not in got:
                got.append(names)
    return got


def check_gdb(name, exe, src, out):
    if not shutil.which('gdb'):
        print('  skip gdb: not installed')
        return
    r = sh(['gdb', '-nx', '-batch', '-ex', 'break %s:%d' % (os.path.basename(src), line_of(src, 'SITE_REMEMBER')),
            '-ex', 'run', '-ex', 'bt', exe])
    bt = re.findall(r'^#\d+\s+(?:0x\w+ in )?(\w+)', r.stdout, re.M)
    have = chains_of(out, exe, 'remember')
    mt.check(bt[:2] == ['remember', 'batch_a'] and bt in have,
             '%s: gdb\'s bt at remember (%r) is one of its chains (%r)' % (name, bt, have))


def pprof_traces(name, out):
    """`go tool pprof -traces -lines` of out's profile; None without go."""
    go = shutil.which('go')
    if not go:
        print('  skip pprof: go not installed')
        return None
    pb = os.path.join(OUT, name + '.pb.gz')
    sh([MT, 'pprof', out, '-o', pb])
    return sh([go, 'tool', 'pprof', '-traces', '-lines', pb], timeout=300).stdout


def check_views(name, exe, src, out):
    a, b, site = (line_of(src, t) for t in ('CALL_A', 'CALL_B', 'SITE_REMEMBER'))
    base = os.path.basename(src)
    rep = sh([MT, 'report', out]).stdout
    for batch in ('batch_a', 'batch_b'):
        want = 'remember (%s:%d) < %s < main' % (base, site, batch)
        mt.check(want in rep, '%s: report has the row %r' % (name, want))
    mt.check('[2 sites]' not in rep, '%s: the two inlined call sites are not one row' % name)
    st = sh([MT, 'report', '--stacks', out]).stdout
    for batch, line in (('batch_a', a), ('batch_b', b)):
        want = '\n'.join(['remember (%s:%d) [inlined]' % (src, site),
                          '%s (%s:%d) [inlined]' % (batch, src, line), 'main ('])
        flat = '\n'.join(l.strip() for l in st.splitlines())
        mt.check(want in flat, '%s: --stacks shows remember < %s (line %d) < main, inlined' % (name, batch, line))
    fold = sh([MT, 'flame', '--folded', out]).stdout
    for batch in ('batch_a', 'batch_b'):
        mt.check(re.search(r';main;%s;remember \(%s:%d\) \d+' % (batch, re.escape(base), site), fold),
                 '%s: folded has main;%s;remember' % (name, batch))
    fn = sh([MT, 'functions', out]).stdout
    for f in ('batch_a (%s:%d)' % (base, a), 'batch_b (%s:%d)' % (base, b), 'remember (%s:%d)' % (base, site)):
        mt.check(f in fn, '%s: functions lists %s' % (name, f))
    tr = pprof_traces(name, out)
    if tr is None:
        return
    for batch, line in (('batch_a', a), ('batch_b', b)):
        want = (r'remember %s:%d \(inline\)\s*\n\s*%s %s:%d \(inline\)\s*\n\s*main '
                % (re.escape(src), site, batch, re.escape(src), line))
        mt.check(re.search(want, tr), '%s: pprof -traces -lines: remember < %s:%d < main' % (name, batch, line))


def line_with(src, text):
    return next(i for i, l in enumerate(open(src), 1) if text in l)


def check_views_cc(name, src, out):
    """The C++ program's two chains (grab < fill<K> < stage < main) in
    report's rows, the folded stacks, functions and pprof's Line entries."""
    base = os.path.basename(src)
    grab, fill = line_with(src, 'void grab('), line_with(src, 'grab(64 * (K + i))')
    chains = [(4, 'stage_one', line_with(src, 'stage_one() {'), line_with(src, 'app::stage_one();')),
              (7, 'stage_two', line_with(src, 'stage_two() {'), line_with(src, 'app::stage_two();'))]
    rep = sh([MT, 'report', out]).stdout
    fold = sh([MT, 'flame', '--folded', out]).stdout
    fn = sh([MT, 'functions', '--top', '50', out]).stdout
    for k, stage, sline, call in chains:
        want = 'Pool::grab (%s:%d) < void Pool::fill<%d> < %s' % (base, grab, k, stage)
        mt.check(want in rep, '%s: report has the row %r' % (name, want))
        want = ';main;%s;void Pool::fill<%d>();Pool::grab(unsigned long);' % (stage, k)
        mt.check(want in fold, '%s: folded has %r' % (name, want))
        for f in ('void Pool::fill<%d> (%s:%d)' % (k, base, fill), '%s (%s:%d)' % (stage, base, sline)):
            mt.check(f in fn, '%s: functions lists %s' % (name, f))
    mt.check('Pool::grab (%s:%d)' % (base, grab) in fn, '%s: functions lists Pool::grab' % name)
    tr = pprof_traces(name, out)
    if tr is None:
        return
    for k, stage, sline, call in chains:
        want = (r'Pool::grab\(unsigned long\) %s:%d \(inline\)\s*\n\s*void Pool::fill<%d>\(\) %s:%d \(inline\)'
                r'\s*\n\s*%s %s:%d \(inline\)\s*\n\s*main %s:%d\n'
                % (re.escape(src), grab, k, re.escape(src), fill, stage, re.escape(src), sline, re.escape(src), call))
        mt.check(re.search(want, tr), '%s: pprof -traces -lines: grab < fill<%d> < %s < main:%d' % (name, k, stage, call))


for opt in (2, 3):
    if mt.case('c-O%d' % opt):
        src = os.path.join(HERE, 'inline_c.c')
        name, exe, out = build_and_run(src, opt)
        check_addr2line(name, exe, out)
        check_views(name, exe, src, out)
        check_gdb(name, exe, src, out)
    if mt.case('cc-O%d' % opt):
        src = os.path.join(HERE, 'inline_cc.cc')
        name, exe, out = build_and_run(src, opt)
        check_addr2line(name, exe, out)
        have = sorted(chains_of(out, exe, 'Pool::grab'))
        mt.eq(have, [['Pool::grab', 'void Pool::fill<4>', 'stage_one', 'main'],
                     ['Pool::grab', 'void Pool::fill<7>', 'stage_two', 'main']],
              '%s: Pool::grab\'s two inlined chains' % name)
        check_views_cc(name, src, out)


def dynsyms(lib):
    """(start, end) of each defined function in lib's dynamic symbol table, sorted."""
    out = []
    for line in sh(['nm', '-D', '-S', '--defined-only', lib]).stdout.split('\n'):
        f = line.split()
        if len(f) >= 4 and f[2] in 'TtWw':
            out.append((int(f[0], 16), int(f[0], 16) + int(f[1], 16)))
    return sorted(out)


if mt.case('libtorch'):
    run = os.path.join(OUT, 'libtorch')
    shutil.rmtree(run, ignore_errors=True)
    r = sh([MT, 'run', '--', '/usr/bin/python3', '-c',
            'import torch\nkeep = [torch.randn(256, 256) @ torch.randn(256, 256) for _ in range(20)]'],
           env=dict(os.environ, MEMTALLY_OUT=run), timeout=300)
    mt.eq(r.returncode, 0, 'libtorch: the torch script ran under memtally run (%r)' % r.stderr[-300:])
    rows = json.loads(sh([MT, 'report', '--native', '--json', '--top', '300', run]).stdout or '{}')
    frames = {}
    for proc in rows.get('processes', []):
        for c in proc['last']['callsites'] + proc['at_peak']['callsites']:
            for fr in c.get('frames', []):
                if re.search(r'libtorch_(cpu|python)\.so', fr.get('module') or ''):
                    frames[(fr['module'], int(fr['offset'], 16))] = fr
    mt.check(len(frames) >= 20, 'libtorch: frames of libtorch_cpu and libtorch_python in the rows: %d' % len(frames))
    syms, bad_named, bad_unnamed, named = {}, [], [], 0
    for (lib, off), fr in sorted(frames.items()):
        a2l = sh(['addr2line', '-f', '-C', '-e', lib, '%x' % (off - 1)]).stdout.split('\n')[0]
        if fr['function']:
            named += 1
            if fr['function'] != a2l:
                bad_named.append((os.path.basename(lib), hex(off), fr['function'][:60], a2l[:60]))
            continue
        if lib not in syms:
            syms[lib] = dynsyms(lib)
        before = [s for s in syms[lib] if s[0] <= off - 1]
        if before and before[-1][1] > off - 1:  # inside a symbol memtally did not name
            bad_unnamed.append((os.path.basename(lib), hex(off), a2l[:60]))
    mt.check(named >= 10, 'libtorch: frames memtally names: %d of %d' % (named, len(frames)))
    mt.eq(bad_named[:5], [], 'libtorch: named frames whose function differs from addr2line -f -C\'s (%d)'
          % len(bad_named))
    mt.eq(bad_unnamed[:5], [], 'libtorch: unnamed frames that lie inside a dynamic symbol (%d)' % len(bad_unnamed))
mt.done()
