"""check_outputs.py MEMTALLY DIR — the writers' outputs for the files the
fuzz_names harness made (MT_FUZZ_EMIT=DIR), read by the readers people
use: Python's json (strict: no NaN or Infinity), its expat XML parser for
the flame SVG, the page's data block as JSON, pickle for `torch` (both
formats), Google's `go tool pprof` for `pprof`, and flamegraph.pl's line
format for `flame --folded`.
Prints one line per failure and a count; exits 1 on any failure."""
import glob, json, os, pickle, re, shutil, subprocess, sys
import xml.etree.ElementTree as ET

MT, DIR = sys.argv[1], sys.argv[2]
GO = shutil.which('go')
LIMIT = int(sys.argv[3]) if len(sys.argv) > 3 else 10 ** 9
fails = checked = 0


def strict(x):
    raise ValueError('not JSON: %s' % x)


def fail(what):
    global fails
    fails += 1
    print('check_outputs: ' + what)


def run(args):
    return subprocess.run([MT] + args, capture_output=True, timeout=60)


for proc in sorted(glob.glob(os.path.join(DIR, 'memtally.n*.p7.jsonl')))[:LIMIT]:
    dump = proc[:-len('.jsonl')] + '.oom1.jsonl'
    for args in (['report', proc], ['leaks', proc], ['ranks', proc, dump], ['diff', proc, dump],
                 ['oom', dump], ['report', dump]):
        r = run(args[:1] + ['--json'] + args[1:])
        if r.returncode:
            continue
        checked += 1
        try:
            json.loads(r.stdout.decode('utf-8'), parse_constant=strict)
        except Exception as e:
            fail('%s --json %s: %s' % (args[0], ' '.join(args[1:]), e))
        r = run(args)
        if r.returncode == 0:
            checked += 1
            try:
                t = r.stdout.decode('utf-8')
                if re.search(r'[\x00-\x08\x0b-\x1f\x7f]', t):
                    raise ValueError('a control character reaches the terminal')
            except Exception as e:
                fail('%s %s: text: %s' % (args[0], ' '.join(args[1:]), e))
    for src in (proc, dump):
        svg = src + '.svg'
        if run(['flame', src, '-o', svg]).returncode == 0:
            checked += 1
            try:
                ET.parse(svg)
            except Exception as e:
                fail('flame %s: the SVG is not XML: %s' % (src, e))
    page = proc + '.html'
    if run(['html', proc, dump, '-o', page]).returncode == 0:
        checked += 1
        try:
            text = open(page, encoding='utf-8').read()
            m = re.search(r'<script id="mt-data" type="application/json">(.*?)</script>', text, re.S)
            if not m or '<' in m.group(1):
                raise ValueError('no data block, or a "<" in it')
            json.loads(m.group(1), parse_constant=strict)
        except Exception as e:
            fail('html %s: %s' % (proc, e))
    for fmt in ('2', '1.13'):
        pk = dump + '.pickle'
        if run(['torch', '--format', fmt, dump, '-o', pk]).returncode == 0:
            checked += 1
            try:
                with open(pk, 'rb') as f:
                    d = pickle.load(f)
                assert isinstance(d, dict) and 'segments' in d if fmt == '2' else isinstance(d, list)
            except Exception as e:
                fail('torch --format %s %s: the pickle does not load: %r' % (fmt, dump, e))
    for src in (proc, dump):
        r = run(['flame', '--folded', src])
        if r.returncode == 0:
            checked += 1
            try:
                for line in r.stdout.decode('utf-8').splitlines():
                    if not re.match(r'^(.*)\s+?(\d+(?:\.\d*)?)$', line) or re.search(r'[\x00-\x1f]', line):
                        raise ValueError('a line flamegraph.pl does not read: %r' % line[:80])
            except Exception as e:
                fail('flame --folded %s: %s' % (src, e))
        pb = src + '.pb.gz'
        if GO and run(['pprof', src, '-o', pb]).returncode == 0:
            checked += 1
            r = subprocess.run([GO, 'tool', 'pprof', '-raw', pb], capture_output=True, timeout=60)
            if r.returncode:
                fail('pprof %s: go tool pprof cannot read it: %s' % (src, r.stderr[-200:]))

print('check_outputs: %d outputs read by their readers, %d failed' % (checked, fails))
sys.exit(1 if fails or not checked else 0)
