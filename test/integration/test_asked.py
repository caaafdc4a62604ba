"""mmap as asked and as mapped (issue 53): prog_asked's call sites map
lengths that are not whole pages (10 x 2048 bytes; 5000 grown to 9000 by
mremap; 100 bytes of a file) and one that is (4 x 8192), under the shim:
 - the file's call sites give asked_bytes beside alloc_bytes where the
   calls asked for less (the lengths asked, every call), none where they
   asked whole pages, and every live figure stays the pages mapped;
 - `report --json` gives the same asked_bytes; `report --stacks` says
   "asked for X of the Y mapped" under those rows only;
 - a file whose asked_bytes is above alloc_bytes is refused, naming the
   file and line."""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
run = os.path.join(OUT, 'run')
data = os.path.join(OUT, 'data.bin')
with open(data, 'wb') as fh:
    fh.write(b'x' * 100)
env = dict(os.environ, LD_PRELOAD=os.path.join(B, 'libmemtally.so'), MEMTALLY_OUT=run)
r = subprocess.run([os.path.join(B, 'test', 'prog_asked'), data], env=env, capture_output=True, text=True,
                   timeout=60)
mt.eq((r.returncode, r.stdout), (0, 'ok\n'), 'prog_asked ran')
f = mt.files(run)[0]
FUNCS = ('many_small', 'whole_pages', 'grown', 'from_file')
# want: (kind, alloc_bytes, live_bytes, asked_bytes or None)
WANT = {'many_small': ('mmap', 40960, 40960, 20480), 'whole_pages': ('mmap', 32768, 32768, None),
        'grown': ('mmap', 8192 + 12288, 12288, 14000), 'from_file': ('mmap_file', 4096, 4096, 100)}
end = f.final()
got = {}
for c in end['callsites']:
    if c['kind'] not in ('mmap', 'mmap_file'):
        continue
    names = [fn for fn, _ in f.symbolize(f.stacks.get(c['stack'], []))]
    fn = next((n for n in names if n in FUNCS), None)
    if fn:
        got[fn] = (c['kind'], c['alloc_bytes'], c['live_bytes'], c.get('asked_bytes'))
for fn in FUNCS:
    mt.eq(got.get(fn), WANT[fn], '%s: kind, alloc_bytes (pages), live_bytes (pages), asked_bytes' % fn)

# report --json: the same figure on the same sites
rj = subprocess.run([MT, 'report', '--json', '--top', '200', f.path], capture_output=True, text=True)
sites = json.loads(rj.stdout)['processes'][0]['last']['callsites'] if rj.returncode == 0 else []
asked = sorted(s['asked_bytes'] for s in sites if 'asked_bytes' in s)
mt.eq(asked, [100, 14000, 20480], 'report --json: asked_bytes on the three sites that asked less, only')

# report --stacks: the line under those rows only
rt = subprocess.run([MT, 'report', '--stacks', '--top', '200', f.path], capture_output=True, text=True).stdout
lines = re.findall(r'asked for (.+) of the (.+) mapped', rt)
mt.eq(sorted(lines), sorted([('20.0 KiB', '40.0 KiB'), ('13.7 KiB', '20.0 KiB'), ('100 B', '4.00 KiB')]),
      'report --stacks: "asked for X of the Y mapped" under the three rows (%s)' % lines)

# a file that says more was asked than mapped: refused, with its line
text = mt.text(f.path).splitlines()
i, c = next((i, l) for i, l in enumerate(text) if '"asked_bytes":20480' in l)
bad = os.path.join(OUT, 'memtally.bad.p1.jsonl')
with open(bad, 'w') as fh:
    fh.write('\n'.join(text[:i] + [c.replace('"asked_bytes":20480', '"asked_bytes":99999')] + text[i + 1:]) + '\n')
rb = subprocess.run([MT, 'report', bad], capture_output=True, text=True)
mt.check(rb.returncode == 1 and '%s:%d: call site: field "asked_bytes" is 99999, outside 0 .. alloc_bytes (40960)'
         % (bad, i + 1) in rb.stderr, 'asked_bytes above alloc_bytes: refused at its line (%s)' % rb.stderr.strip())
mt.done()
