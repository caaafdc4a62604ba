"""What was live at the peak, exactly, with no options (issue 15): the shim
keeps each call site's live bytes as of its kind's last high-water mark,
so the peak is in every snapshot although none fell on it.

- prog_peak (one thread): each site's bytes at the peak, exact, in every
  snapshot as replayed from deltas (a site's figure at the peak moves when
  another site makes a new peak: the delta must carry it);
- a Python script that holds 64 MiB and frees it: a default `memtally run`
  (one snapshot, at exit) names the script's line at the peak;
- json.dumps, whose two join buffers are live together for an instant:
  the heap's peak and its largest consumer agree with heaptrack's on the
  same script (heaptrack_print's "peak heap memory consumption" and "PEAK
  MEMORY CONSUMERS")."""
import glob, json, os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
MIB = 1 << 20

if mt.case('exact'):
    d = os.path.join(OUT, 'exact')
    r = subprocess.run([MT, 'run', '--out', d, '--', os.path.join(B, 'test', 'prog_peak')],
                       capture_output=True, text=True)
    f = mt.files(d)[0]
    want = {'1': {'site_s': 5 * MIB},
            '2': {'site_s': 0, 'site_t': 8 * MIB},
            '3': {'site_s': 0, 'site_t': 0, 'site_a': 10 * MIB, 'site_b': 10 * MIB, 'site_c': 0}}
    for label, w in sorted(want.items()):
        s = f.by_label(label)
        got = {fn: a['at_peak_bytes'] for (fn, kind), a in f.sites_by_function(s, ('heap',)).items()
               if fn.startswith('site_')}
        mt.check(s and all(got.get(k) == v for k, v in w.items()),
                 'snapshot "%s" (%s, deltas replayed): each site at the heap\'s peak %s (got %s)'
                 % (label, s['callsites_mode'] if s else None, w, got))
    fin = f.final()
    mt.check(20 * MIB <= fin['heap']['peak_bytes'] < 20 * MIB + 256 * 1024,
             'the heap\'s peak is 20 MiB and a little (%d)' % fin['heap']['peak_bytes'])
    rep = json.loads(subprocess.run([MT, 'report', '--json', d], capture_output=True, text=True).stdout)
    ap = rep['processes'][0].get('at_peak', {})
    rows = {c['function']: c['at_peak_bytes'] for c in ap.get('callsites', [])}
    mt.check(rows.get('site_a') == 10 * MIB and rows.get('site_b') == 10 * MIB and 'site_c' not in rows,
             'report --json at_peak: site_a and site_b 10 MiB each, site_c not there (%s)' % rows)
    # the HTML page's call-site table has the column, as Chromium draws it
    page = os.path.join(OUT, 'peak.html')
    subprocess.run([MT, 'html', d, '-o', page], capture_output=True)
    dom = subprocess.run(['chromium', '--headless', '--no-sandbox', '--disable-gpu', '--virtual-time-budget=3000',
                          '--dump-dom', 'file://' + page], capture_output=True, text=True, timeout=120).stdout
    # (the page opens at the peak: at peak, then live at the end)
    row = re.search(r'<tr class="site"><td>10\.0 MiB</td><td>0 B</td>[^\n]*?site_a', dom)
    mt.check('<th>at peak</th><th>live at end</th>' in dom and row,
             'html: the call-site table shows each site at the peak (site_a: 10.0 MiB at peak, 0 B at the end)')

if mt.case('python'):
    d = os.path.join(OUT, 'py')
    script = os.path.join(OUT, 'hold.py')
    with open(script, 'w') as fh:
        fh.write('def load():\n'
                 '    return [bytearray(4096) for _ in range(16384)]\n'
                 'data = load()\n'
                 'total = sum(len(b) for b in data)\n'
                 'del data\n'
                 'print(total)\n')
    r = subprocess.run([MT, 'run', '--out', d, '--', '/usr/bin/python3', script], capture_output=True, text=True)
    rep = subprocess.run([MT, 'report', d], capture_output=True, text=True).stdout
    m = re.search(r'top call sites at the peak \(each kind at its high-water mark: heap ([\d.]+) MiB', rep)
    row = re.search(r'^\s+([\d.]+) MiB\s+\S+ \S+\s+heap\s+hold\.py:2  return \[bytearray', rep, re.M)
    cnt = re.search(r'^  (\d+) (snapshots?) over ', rep, re.M)
    mt.check(cnt and (cnt.group(2) == 'snapshot') == (cnt.group(1) == '1'),
             'the count of snapshots reads right: "%s"' % (cnt.group(0).strip() if cnt else None))
    mt.check(r.stdout.strip() == str(4096 * 16384) and m and float(m.group(1)) >= 64 and row and
             float(row.group(1)) >= 64,
             'a default run (one snapshot, at exit) shows the 64 MiB peak at the script\'s line: %s; %s'
             % (m.group(0) if m else None, row.group(0).strip() if row else None))

if mt.case('json'):
    d = os.path.join(OUT, 'jd')
    script = os.path.join(OUT, 'jd.py')
    with open(script, 'w') as fh:
        fh.write('import json\n'
                 'd = {"key%d" % i: "v" * 100 for i in range(150000)}\n'
                 's = json.dumps(d)\n'
                 't = json.dumps(d, indent=1)\n'
                 'print(len(s), len(t))\n')
    subprocess.run([MT, 'run', '--out', d, '--', '/usr/bin/python3', script], capture_output=True)
    rep = json.loads(subprocess.run([MT, 'report', '--json', '--top', '1000', d], capture_output=True,
                                    text=True).stdout)['processes'][0]
    ap = rep['at_peak']
    ours_peak = ap['peak_bytes']['heap']
    # the join buffers: the sites whose allocating frame is
    # _PyUnicode_JoinArray (named, in the report, by the script's line, via
    # JSONEncoder.encode's)
    join = sum(c['at_peak_bytes'] for c in ap['callsites'] if c['kind'] == 'heap' and c['frames'] and
               c['frames'][0]['function'] == '_PyUnicode_JoinArray' and
               ' via encoder.py:' in c['where'] and c['where'].endswith(' JSONEncoder.encode'))
    ht = shutil.which('heaptrack')
    if not ht:
        mt.check(False, 'heaptrack is installed (scripts/setup-deps.sh)')
    else:
        for p in glob.glob(os.path.join(OUT, 'ht*')):
            os.unlink(p)
        subprocess.run([ht, '-o', os.path.join(OUT, 'ht'), '/usr/bin/python3', script], capture_output=True,
                       timeout=300)
        zst = glob.glob(os.path.join(OUT, 'ht*.zst')) + glob.glob(os.path.join(OUT, 'ht*.gz'))
        pr = subprocess.run(['heaptrack_print', '-f', zst[0]], capture_output=True, text=True).stdout if zst else ''
        unit = {'': 1, 'K': 1e3, 'M': 1e6, 'G': 1e9}
        m = re.search(r'peak heap memory consumption: ([\d.]+)([KMG]?)', pr)
        top = re.search(r'PEAK MEMORY CONSUMERS\n([\d.]+)([KMG]?) peak memory consumed over \d+ calls from\n'
                        r'(\S+)', pr)
        ht_peak = float(m.group(1)) * unit[m.group(2)] if m else None
        ht_top = float(top.group(1)) * unit[top.group(2)] if top else None
        mt.check(ht_peak and abs(ours_peak - ht_peak) <= 0.01 * ht_peak,
                 'json.dumps: the heap\'s peak %d B, heaptrack\'s %s B (within 1%%)' % (ours_peak, ht_peak))
        wheres = sorted(c['where'] for c in ap['callsites'] if c['kind'] == 'heap' and c['frames'] and
                        c['frames'][0]['function'] == '_PyUnicode_JoinArray')
        mt.check(len(wheres) == 2 and wheres[0].startswith('jd.py:3  ') and wheres[1].startswith('jd.py:4  '),
                 'json.dumps: the two join buffers\' rows name the script\'s own lines, which tell '
                 'them apart: %s' % wheres)
        # the native cause under the Python rows, per function, without --native
        fj = json.loads(subprocess.run([MT, 'functions', '--json', '--snapshot', 'peak', '--top', '100000', d],
                                       capture_output=True, text=True).stdout)['processes'][0]['functions']
        jf = [x['inclusive_bytes'] for x in fj if x['function'] == '_PyUnicode_JoinArray']
        mt.check(jf == [join], 'json.dumps: functions --snapshot peak sums _PyUnicode_JoinArray (native, under '
                 'JSONEncoder.encode) inclusively to the join buffers\' %d B (%s)' % (join, jf))
        mt.check(ht_top and top.group(3) == '_PyUnicode_JoinArray' and abs(join - ht_top) <= 0.01 * ht_top,
                 'json.dumps: at the peak the join buffers hold %d B (encoder.py), heaptrack\'s largest '
                 'peak consumer %s holds %s B (within 1%%)' % (join, top.group(3) if top else None, ht_top))
if mt.case('demo'):
    # make demo's Python part (scripts/demo.sh): demo_train.py under `memtally run` with
    # no options names the spike's line at the peak and the leak's line
    d = os.path.join(OUT, 'demo')
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts', 'demo_train.py')
    subprocess.run([MT, 'run', '--out', d, '--', '/usr/bin/python3', script], capture_output=True)
    rep = subprocess.run([MT, 'report', d], capture_output=True, text=True).stdout
    lk = subprocess.run([MT, 'leaks', d], capture_output=True, text=True).stdout
    peak = re.search(r'at peak    live now kind      where\n\s+([\d.]+ MiB)\s+0 B heap\s+(\S+:\d+)  ', rep)
    leak = re.search(r'^\s+1 .* heap\s+(demo_train\.py:\d+)  ', lk, re.M)
    mt.check(peak and peak.groups() == ('64.0 MiB', 'demo_train.py:16'),
             'demo_train.py, no options: at the peak, 64 MiB at the spike\'s line (%s)' % (peak.groups() if peak else None,))
    mt.check(leak and leak.group(1) == 'demo_train.py:13',
             'demo_train.py, no options: leaks names the leak\'s line (%s)' % (leak.group(1) if leak else lk[-300:]))

if mt.case('rise'):
    # a ramp: 8 MiB every 50 ms for 2 s; MEMTALLY_RISE alone (the cadence
    # off: its time snapshots would each reset the rise's base) snapshots
    # when live bytes rise 25% and 4 MiB above the last
    script = os.path.join(OUT, 'ramp.py')
    with open(script, 'w') as fh:
        fh.write('import time\nkeep = []\nfor i in range(40):\n    keep.append(bytearray(8 << 20))\n'
                 '    time.sleep(0.05)\ndel keep\n')
    for rise, want in (('0.25', True), ('0', False)):
        d = os.path.join(OUT, 'rise' + rise)
        subprocess.run([MT, 'run', '--out', d, '--set', 'RISE=' + rise, '--set', 'CADENCE=0', '--',
                        '/usr/bin/python3', script],
                       capture_output=True)
        snaps = mt.files(d)[0].snapshots
        ramp = [s['heap']['live_bytes'] for s in snaps if s['reason'] == 'rise']
        ok = (len(ramp) >= 4 and ramp == sorted(ramp) and ramp[-1] >= 200 * MIB and
              # the trigger compares with what the writer saw when it began
              # its last snapshot; the snapshot records a moment later,
              # on a ramp a little more: spaced, though less than 25% exact
              all(b >= a * 1.1 and b - a >= 4 * MIB for a, b in zip(ramp, ramp[1:]))) if want else not ramp
        mt.check(ok, 'MEMTALLY_RISE=%s: %s (heap at each: %s MiB)' % (
            rise, 'rise snapshots on the ramp, spaced (25% and 4 MiB above the level when the last began)'
            if want else 'none',
            [r >> 20 for r in ramp]))
mt.done()
