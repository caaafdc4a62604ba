"""check_outputs.py MEMTALLY DIR — the writers' outputs for the files the
fuzz_names harness made (MT_FUZZ_EMIT=DIR), read by the readers people
use: Python's json (strict: no NaN or Infinity), its expat XML parser for
the flame SVG, the page's data block as JSON, and pickle for `torch`.
Prints one line per failure and a count; exits 1 on any failure."""
import glob, json, os, pickle, re, subprocess, sys
import xml.etree.ElementTree as ET

MT, DIR = sys.argv[1], sys.argv[2]
fails = checked = 0


def strict(x):
    raise ValueError('not JSON: %s' % x)


def fail(what):
    global fails
    fails += 1
    print('check_outputs: ' + what)


def run(args):
    return subprocess.run([MT] + args, capture_output=True, timeout=60)


for proc in sorted(glob.glob(os.path.join(DIR, 'memtally.n*.p7.jsonl'))):
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
    pk = dump + '.pickle'
    if run(['torch', dump, '-o', pk]).returncode == 0:
        checked += 1
        try:
            with open(pk, 'rb') as f:
                d = pickle.load(f)
            assert isinstance(d, dict) and 'segments' in d
        except Exception as e:
            fail('torch %s: the pickle does not load: %r' % (dump, e))

print('check_outputs: %d outputs read by their readers, %d failed' % (checked, fails))
sys.exit(1 if fails or not checked else 0)
