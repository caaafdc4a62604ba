"""Test helper for the pictures memtally draws (test_pictures.py,
test_pictures_torch.py): Debian's headless Chromium on a page or an SVG
(a fresh profile each time, every network request made to fail), its
console errors, the DOM it built, and what the page and the flame graph
hold."""
import html, json, os, re, shutil, subprocess, tempfile
import xml.dom.minidom
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
MT = os.environ.get('MT_MEMTALLY') or os.path.join(B, 'memtally')
CHROME = shutil.which('chromium')


def chrome(url, *extra):
    """Headless Chromium on url, in a fresh profile (no state between
    runs, no lock shared with another Chromium), network requests made to
    fail; returns the CompletedProcess (console lines in stderr)."""
    prof = tempfile.mkdtemp(prefix='chrome-', dir=OUT)
    args = [CHROME, '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
            '--no-first-run', '--proxy-server=http://127.0.0.1:9', '--enable-logging=stderr', '--v=0',
            '--user-data-dir=' + prof] + list(extra) + [url]
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(prof, ignore_errors=True)


def console_errors(stderr):
    return [l for l in stderr.splitlines() if 'CONSOLE' in l and ('Uncaught' in l or 'rror' in l)]


def dom_of(url, *extra):
    """The DOM Chromium built for url (its script run), and the console
    errors on the way."""
    r = chrome(url, '--virtual-time-budget=10000', '--dump-dom', *extra)
    return r.stdout, console_errors(r.stderr)


def page_data(path):
    """The data the page's script draws (its <script id="mt-data">)."""
    m = re.search(r'<script id="mt-data" type="application/json">(.*?)</script>', open(path).read(), re.S)
    return json.loads(m.group(1))


def cells(dom, cls):
    """The rows <tr class="cls ..."> of a DOM as lists of cell texts."""
    rows = re.findall(r'<tr class="%s(?: [^"]*)?"[^>]*>(.*?)</tr>' % cls, dom, re.S)
    return [[html.unescape(re.sub(r'<[^>]+>', '', c)) for c in re.findall(r'<td[^>]*>(.*?)</td>', r, re.S)]
            for r in rows]


def moment(dom):
    """What the page's table says it shows ("at the peak ...", "at
    snapshot 5 ...")."""
    m = re.search(r'<span id="moment-label">([^<]*)</span>', dom)
    return html.unescape(m.group(1)) if m else None


def bare(name):
    """A row's name without its " [N sites]"."""
    return re.sub(r' \[\d+ sites\]$', '', name or '')


def report_first_at_peak(path, label):
    """The name `memtally report` gives its first row at the peak, for the
    process labelled so ("== label  argv")."""
    out = subprocess.run([MT, 'report', path], capture_output=True, text=True).stdout
    block = out.split('== ' + label + ' ', 1)[1].split('\n== ', 1)[0]
    rows = block.split('top call sites at the peak', 1)[1].splitlines()[2:]
    return rows[0].split(None, 5)[5] if rows else None


def svg_frames(what, svg):
    """The frames (<g class="f">) of a flame graph SVG, checked on the way:
    no negative width, no NaN."""
    text = open(svg).read()
    neg = len(re.findall(r'width="-', text))
    mt.check(neg == 0 and 'NaN' not in text and 'Infinity' not in text,
             '%s: no negative width (%d width="-") and no NaN in the SVG' % (what, neg))
    return [g for g in xml.dom.minidom.parse(svg).getElementsByTagName('g') if g.getAttribute('class') == 'f']


def folded_total(args):
    """`memtally flame --folded ARGS`: the sum of its values, and its text."""
    r = subprocess.run([MT, 'flame', '--folded'] + args, capture_output=True, text=True)
    return sum(int(l.rsplit(' ', 1)[1]) for l in r.stdout.splitlines()), r.stdout
