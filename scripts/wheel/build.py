"""build.py — writes memtally's wheel with the standard library alone (no
network, no setuptools): a zip with the package, its dist-info (METADATA,
WHEEL, entry_points.txt) and a RECORD of sha256 sums (PEP 427, 376).

    python3 scripts/wheel/build.py VERSION BUNDLE PYDIR OUTDIR

BUNDLE is `make bundle`'s folder (libmemtally.so and memtally with RPATH
$ORIGIN/lib, lib/ with the non-glibc libraries they load); PYDIR is
scripts/python.  The wheel holds:

    memtally/__init__.py         scripts/python/memtally.py (the user API)
    memtally/__main__.py         `python -m memtally` and the `memtally` command
    memtally/pytest_plugin.py    the pytest plugin (entry point pytest11)
    memtally/_bin/               the bundle: memtally, libmemtally.so, lib/,
                                 python/ (the start-up hook `memtally run`
                                 puts on PYTHONPATH: scripts/python's files
                                 but memtally.py, its _memtally/ package, and
                                 memtally/__init__.py that stands for the
                                 installed package)

Tagged py3-none-manylinux_<glibc>_<arch>: the glibc it was built against."""
import base64, hashlib, os, platform, sys, zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def glibc_tag():
    v = os.confstr('CS_GNU_LIBC_VERSION') or ''  # "glibc 2.36"
    name, _, ver = v.partition(' ')
    if name != 'glibc' or ver.count('.') < 1:
        sys.exit('build.py: not a glibc system (%r): no manylinux tag' % v)
    major, minor = ver.split('.')[:2]
    return 'manylinux_%s_%s_%s' % (major, minor, platform.machine())


def main(version, bundle, pydir, outdir):
    files = []  # (path in the wheel, bytes, executable)

    def add_file(arc, src, exe=False):
        with open(src, 'rb') as f:
            files.append((arc, f.read(), exe))

    def add_tree(arc, src):
        for root, dirs, names in os.walk(src):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__')
            for n in sorted(names):
                if n.endswith(('.pyc', '.pyo')):
                    continue
                p = os.path.join(root, n)
                add_file(arc + '/' + os.path.relpath(p, src), p, os.access(p, os.X_OK))

    add_file('memtally/__init__.py', os.path.join(pydir, 'memtally.py'))
    for n in ('__main__.py', 'pytest_plugin.py'):
        add_file('memtally/' + n, os.path.join(HERE, n))
    for n in ('memtally', 'libmemtally.so'):
        add_file('memtally/_bin/' + n, os.path.join(bundle, n), True)
    add_tree('memtally/_bin/lib', os.path.join(bundle, 'lib'))
    for n in sorted(os.listdir(pydir)):
        if n.endswith('.py') and n != 'memtally.py':
            add_file('memtally/_bin/python/' + n, os.path.join(pydir, n))
    if os.path.isdir(os.path.join(pydir, '_memtally')):
        add_tree('memtally/_bin/python/_memtally', os.path.join(pydir, '_memtally'))
    add_file('memtally/_bin/python/memtally/__init__.py', os.path.join(HERE, 'hook_memtally.py'))

    tag = 'py3-none-' + glibc_tag()
    info = 'memtally-%s.dist-info' % version
    meta = ('Metadata-Version: 2.1\nName: memtally\nVersion: %s\n'
            'Summary: Memory by call site for native, Python and CUDA programs '
            '(an LD_PRELOAD shim and its analysis command)\n'
            'Requires-Python: >=3.8\nClassifier: Framework :: Pytest\n' % version)
    wheel = ('Wheel-Version: 1.0\nGenerator: memtally scripts/wheel/build.py\n'
             'Root-Is-Purelib: false\nTag: %s\n' % tag)
    entry = ('[console_scripts]\nmemtally = memtally.__main__:main\n\n'
             '[pytest11]\nmemtally = memtally.pytest_plugin\n')
    for n, text in (('METADATA', meta), ('WHEEL', wheel), ('entry_points.txt', entry),
                    ('top_level.txt', 'memtally\n')):
        files.append(('%s/%s' % (info, n), text.encode(), False))

    record = []
    for arc, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
        record.append('%s,sha256=%s,%d' % (arc, digest, len(data)))
    record.append('%s/RECORD,,' % info)
    files.append(('%s/RECORD' % info, ('\n'.join(record) + '\n').encode(), False))

    os.makedirs(outdir, exist_ok=True)
    out = os.path.join(outdir, 'memtally-%s-%s.whl' % (version, tag))
    tmp = out + '.tmp'
    with zipfile.ZipFile(tmp, 'w', zipfile.ZIP_DEFLATED) as z:
        for arc, data, exe in files:
            zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = (0o100755 if exe else 0o100644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, out)
    print(out)


if __name__ == '__main__':
    if len(sys.argv) != 5:
        sys.exit(__doc__.split('\n\n')[1])
    main(*sys.argv[1:])
