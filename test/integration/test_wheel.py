"""The wheel (make wheel, scripts/wheel/) and its pytest plugin, in a fresh
venv, offline (pip --no-index):
 - the wheel is tagged py3-none-manylinux_<glibc>_<arch>, its RECORD's
   sums are right, its binaries executable, its entry points the command
   and the pytest plugin;
 - installed: `memtally` on the venv's PATH and `python -m memtally` are
   build/memtally (the same --help); `memtally run` from the venv records
   a script with the installed shim and hook and report names its line;
 - `import memtally`: figures() under the shim gives a peak since
   peak_reset() that a transient allocation raises and a reset lowers; the
   hook's folder stands for the installed package (another interpreter
   gets the same API); without the shim figures() says it is not
   recording;
 - `pytest --memtally` (and the ini option) on samples (py/wheel_*.py):
   each _ok test passes and each _over/_leaks test fails, naming the line
   its "# names:" comment marks: host peak, leaks per call, CUDA on the
   fake driver (200 MB against 64 MB), a real CPU PyTorch model; the
   session report ranks the highest peaks; without --memtally the
   markers do nothing; a bad limit is a usage error naming the marker;
 - pip uninstall leaves nothing of it."""
import glob, hashlib, base64, os, re, shutil, subprocess, sys, zipfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
import mt

B, OUT = os.environ['MT_BUILD'], os.environ['MT_OUT']
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
SAMPLES = os.path.join(ROOT, 'test', 'integration', 'py')
FAKE = os.path.join(B, 'test', 'fakecuda')
env0 = {k: v for k, v in os.environ.items()
        if k not in ('PYTHONPATH', 'LD_PRELOAD', 'MEMTALLY_OUT', 'MEMTALLY_LIB', 'PYTHONHOME')}
env0.update(PIP_NO_INDEX='1', PIP_DISABLE_PIP_VERSION_CHECK='1', PIP_NO_CACHE_DIR='1')


def run(cmd, **kw):
    kw.setdefault('env', env0)
    kw.setdefault('cwd', OUT)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, **kw)


# ---- the wheel ----
r = run(['make', '-s', '-C', ROOT, 'wheel'])
whl = sorted(glob.glob(os.path.join(ROOT, 'dist', 'memtally-*.whl')))
mt.check(r.returncode == 0 and len(whl) == 1, 'make wheel writes one wheel' + ('' if r.returncode == 0 else r.stdout[-300:]))
if not whl:
    mt.done()
whl = whl[0]
glibc = os.confstr('CS_GNU_LIBC_VERSION').split()[1].split('.')
tag = 'py3-none-manylinux_%s_%s_%s' % (glibc[0], glibc[1], os.uname().machine)
mt.check(re.fullmatch(r'memtally-\d+\.\d+\.\d+-' + re.escape(tag) + r'\.whl', os.path.basename(whl)),
         'the wheel is tagged for this glibc: %s' % os.path.basename(whl))
with zipfile.ZipFile(whl) as z:
    names = z.namelist()
    info = [n for n in names if n.endswith('.dist-info/RECORD')][0].rsplit('/', 1)[0]
    record = {}
    for line in z.read(info + '/RECORD').decode().splitlines():
        path, h, size = line.rsplit(',', 2)
        record[path] = (h, size)
    bad = []
    for n in names:
        if n == info + '/RECORD':
            continue
        data = z.read(n)
        h = 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
        if record.get(n) != (h, str(len(data))):
            bad.append(n)
    mt.check(not bad and set(record) == set(names), 'RECORD lists every file with its sha256 and size %s' % bad)
    ex = {n: (z.getinfo(n).external_attr >> 16) & 0o111 for n in names}
    mt.check(ex.get('memtally/_bin/memtally') and ex.get('memtally/_bin/libmemtally.so'),
             'the command and the shim are executable in the wheel')
    for n in ('memtally/__init__.py', 'memtally/__main__.py', 'memtally/pytest_plugin.py',
              'memtally/_bin/python/sitecustomize.py', 'memtally/_bin/python/memtally/__init__.py'):
        mt.check(n in names, 'the wheel holds %s' % n)
    mt.check(any(n.startswith('memtally/_bin/lib/libunwind') for n in names) and
             any(n.startswith('memtally/_bin/lib/libdw') for n in names),
             'the wheel holds the libraries the shim and command load (libunwind, libdw)')
    ep = z.read(info + '/entry_points.txt').decode()
    mt.check('memtally = memtally.__main__:main' in ep and '[pytest11]' in ep,
             'entry points: the command and the pytest plugin')
    mt.check('Root-Is-Purelib: false' in z.read(info + '/WHEEL').decode(), 'WHEEL: platform-specific')

# ---- a fresh venv, offline ----
venv = os.path.join(OUT, 'venv')
r = run(['/usr/bin/python3', '-m', 'venv', '--system-site-packages', venv])
mt.eq(r.returncode, 0, 'a fresh venv (%s)' % r.stdout[-200:])
vpy, vbin = os.path.join(venv, 'bin', 'python'), os.path.join(venv, 'bin')
r = run([vpy, '-m', 'pip', 'install', '--no-index', '--no-deps', whl])
mt.check(r.returncode == 0, 'pip install --no-index the wheel (%s)' % r.stdout[-400:])
venv_env = dict(env0, PATH=vbin + ':' + env0.get('PATH', ''), VIRTUAL_ENV=venv)
mt.eq(shutil.which('memtally', path=venv_env['PATH']), os.path.join(vbin, 'memtally'),
      'memtally is on the venv\'s PATH')
want = run([os.path.join(B, 'memtally'), '--help']).stdout
mt.check(want.startswith('usage: memtally') and run(['memtally', '--help'], env=venv_env).stdout == want,
         'memtally --help: build/memtally\'s')
mt.check(run([vpy, '-m', 'memtally', '--help'], env=venv_env).stdout == want,
         'python -m memtally --help: build/memtally\'s')
site = run([vpy, '-c', 'import sysconfig; print(sysconfig.get_paths()["platlib"])']).stdout.strip()

# ---- memtally run from the venv, and the API ----
script = os.path.join(OUT, 'script.py')
with open(script, 'w') as f:
    f.write('''import sys, memtally
print("hook", sys.modules["sitecustomize"].__file__)
print("api", memtally.__path__[0])
memtally.peak_reset()
f0 = memtally.figures()
x = [bytearray(1000) for _ in range(10000)]  # the line
del x
f1 = memtally.figures()
memtally.peak_reset()
f2 = memtally.figures()
print("figures", f1.recording, f1.host_peak - f0.host_live, f2.host_peak - f2.host_live)
''')
line = open(script).read().splitlines().index(
    '    x = [bytearray(1000) for _ in range(10000)]  # the line'.strip()) + 1
rec = os.path.join(OUT, 'rec')
r = run(['memtally', 'run', '--out', rec, '--', 'python', script], env=venv_env)
mt.check(r.returncode == 0, 'memtally run from the venv (%s)' % r.stdout[-300:])
hook = os.path.join(site, 'memtally', '_bin', 'python', 'sitecustomize.py')
mt.check('hook %s' % hook in r.stdout, 'the installed hook ran (%s)' % r.stdout[:300])
mt.check('api %s' % os.path.join(site, 'memtally') in r.stdout, 'import memtally: the installed package')
m = re.search(r'figures True (\d+) (-?\d+)', r.stdout)
mt.check(m and int(m.group(1)) >= 10 * 10**6 and abs(int(m.group(2))) < 10**6,
         'figures: a 10 MB passing allocation is the peak since peak_reset; a reset starts it '
         'again (%r)' % (m and m.groups(),))
rep = run(['memtally', 'report', rec], env=venv_env).stdout
mt.check('script.py:%d  ' % line in rep, 'report from the venv names the script\'s line (%d)' % line)
r = run(['memtally', 'run', '--out', os.path.join(OUT, 'rec2'), '--', '/usr/bin/python3', '-c',
         'import memtally; print("other", memtally.figures().recording, memtally.__path__[0])'],
        env=venv_env)
mt.check('other True %s' % os.path.join(site, 'memtally') in r.stdout,
         'another interpreter under the venv\'s memtally run gets the installed API (%s)' % r.stdout[-200:])
r = run([vpy, '-c', 'import memtally; f = memtally.figures(); print(f.recording, f)'])
mt.check(r.stdout.startswith('False') and 'not recording' in r.stdout,
         'without the shim figures() says it is not recording (%s)' % r.stdout.strip())

# ---- the pytest plugin ----
def pytest(sample, *args, env=None):
    shutil.copy(os.path.join(SAMPLES, sample), OUT)
    e = dict(env0, LD_LIBRARY_PATH=FAKE, FAKE_CUDA_MEM=str(1 << 30))
    e.update(env or {})
    return run([vpy, '-m', 'pytest', '-p', 'no:cacheprovider', '-rA', sample] + list(args), env=e)


def verdicts(sample, r):
    """Each test's verdict, and the lines each failure's section names."""
    got = {m.group(2): m.group(1) for m in re.finditer(r'^(PASSED|FAILED) %s::(\w+)' % sample,
                                                      r.stdout, re.M)}
    sections = dict(re.findall(r'^_+ (\w+) _+\n(.*?)(?=^_{3,} \w+ _+$|^=+ )', r.stdout, re.M | re.S))
    return got, sections


def check_sample(sample, r, what):
    src = open(os.path.join(SAMPLES, sample)).read()
    tests = re.findall(r'^def (test_\w+)', src, re.M)
    marks = {m: i + 1 for i, l in enumerate(src.splitlines()) for m in re.findall(r'# names: (\w+)', l)}
    got, sections = verdicts(sample, r)
    for t in tests:
        want = 'FAILED' if t.endswith(('_over', '_leaks')) else 'PASSED'
        mt.eq(got.get(t), want, '%s: %s' % (what, t))
    for t in tests:
        if t.endswith(('_over', '_leaks')):
            tag = t.split('_')[1]
            ln = marks.get(tag)
            mt.check(ln and re.search(r'^  %s:%d ' % (re.escape(sample), ln), sections.get(t, ''), re.M),
                     '%s: %s\'s failure names %s:%s (%s)' % (what, t, sample, ln, sections.get(t, '')[:400]))
    return got, sections


r = pytest('wheel_limits.py', '--memtally', '--memtally-out', os.path.join(OUT, 'pt'))
print(r.stdout[-3000:])
mt.eq(r.returncode, 1, 'pytest --memtally: some tests fail')
got, sections = check_sample('wheel_limits.py', r, '--memtally')
mt.check(re.search(r'over its memtally_limit peak=.8 MB', sections.get('test_host_over', '')) and
         re.search(r'device peak 200\.0 MiB is over its memtally_limit cuda=.64 MB',
                   sections.get('test_cuda_over', '')) and
         re.search(r'kept per call 9\d\.\d KiB is over its memtally_leaks max_per_call=.16 KB',
                   sections.get('test_leak_leaks', '')),
         'each failure says which limit, by how much')
summ = r.stdout.split('memtally: highest peaks', 1)[-1]
mt.check(re.search(r'host \(heap \+ mmap\):\n +2\d\.\d MiB +wheel_limits.py::test_host_over\n', summ) and
         re.search(r'device \(CUDA\):\n +200\.0 MiB +wheel_limits.py::test_cuda_over\n +32\.0 MiB '
                   r'+wheel_limits.py::test_cuda_ok', summ),
         'the session report ranks the highest host and device peaks')
mt.check(glob.glob(os.path.join(OUT, 'pt', 'memtally.*.jsonl*')), '--memtally-out holds the file')

r = pytest('wheel_limits.py')
mt.check(r.returncode == 0 and 'memtally: highest peaks' not in r.stdout,
         'without --memtally the markers do nothing (%s)' % r.stdout[-300:])

ini = os.path.join(OUT, 'ini')
os.makedirs(ini)
with open(os.path.join(ini, 'pytest.ini'), 'w') as f:
    f.write('[pytest]\nmemtally = true\nmemtally_out = out\n')
with open(os.path.join(ini, 'test_x.py'), 'w') as f:
    f.write('import pytest\n\n@pytest.mark.memtally_limit(peak="1 MB")\ndef test_big_over():\n'
            '    x = bytearray(8 << 20)  # names: big\n')
os.makedirs(os.path.join(ini, 'sub'))
r = run([vpy, '-m', 'pytest', '-p', 'no:cacheprovider', '../test_x.py'], cwd=os.path.join(ini, 'sub'))
mt.check(r.returncode == 1 and re.search(r'^  test_x.py:5 ', r.stdout, re.M) and
         glob.glob(os.path.join(ini, 'out', 'memtally.*')),
         'the ini option memtally = true runs under the shim, its memtally_out relative to the '
         'ini\'s folder (%s)' % r.stdout[-600:])
# float("inf") (issue 51) and digits past a float's range were an
# INTERNALERROR (int() of an infinite float: OverflowError), exit 3
for bad, marker in (('peak="24 parsecs"', 'memtally_limit(peak=...)'),
                    ('cuda="-1"', 'memtally_limit(cuda=...)'),
                    ('pk="1 MB"', 'memtally_limit: takes peak= and cuda='),
                    ('peak=float("inf")', 'memtally_limit(peak=...)'),
                    ('cuda="%s GB"' % ('9' * 400), 'memtally_limit(cuda=...)'),
                    ('leaks:max_per_call=float("inf")', 'memtally_leaks(max_per_call=...)')):
    mark = 'memtally_limit'
    if bad.startswith('leaks:'):
        mark, bad = 'memtally_leaks', bad[len('leaks:'):]
    with open(os.path.join(ini, 'test_x.py'), 'w') as f:
        f.write('import pytest\n\n@pytest.mark.%s(%s)\ndef test_a():\n    pass\n' % (mark, bad))
    r = run([vpy, '-m', 'pytest', '-p', 'no:cacheprovider', 'test_x.py'], cwd=ini)
    mt.check(r.returncode == 4 and 'test_x.py::test_a: %s' % marker in r.stdout,
             'a bad marker (%s) is a usage error naming it (%s)' % (bad, r.stdout[-300:]))
with open(os.path.join(ini, 'test_x.py'), 'w') as f:
    f.write('import pytest\n\n@pytest.mark.memtally_leaks(max_per_call="1.5 GiB", warmups="2")\n'
            'def test_a():\n    pass\n')
r = run([vpy, '-m', 'pytest', '-p', 'no:cacheprovider', 'test_x.py'], cwd=ini)
mt.check(r.returncode == 4 and 'memtally_leaks(warmups=\'2\')' in r.stdout,
         'a bad warmups is a usage error naming the marker (%s)' % r.stdout[-300:])

r = pytest('wheel_torch.py', '--memtally', '--memtally-out', os.path.join(OUT, 'pt-torch'))
print(r.stdout[-1500:])
check_sample('wheel_torch.py', r, 'a CPU PyTorch model')

# ---- uninstall ----
r = run([vpy, '-m', 'pip', 'uninstall', '-y', 'memtally'])
left = glob.glob(os.path.join(site, 'memtally*')) + glob.glob(os.path.join(vbin, 'memtally*'))
mt.check(r.returncode == 0 and not left, 'pip uninstall leaves nothing (%s)' % left)
mt.done()
