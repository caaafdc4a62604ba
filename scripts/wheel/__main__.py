"""`python -m memtally ...` and the `memtally` command a wheel installs:
the same command as build/memtally (memtally/_bin/memtally, exec'd with
these arguments; it finds the shim and the Python hook beside itself)."""
import os
import sys

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_bin')


def main():
    exe = os.path.join(BIN, 'memtally')
    try:
        os.execv(exe, ['memtally'] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write('memtally: cannot run %s: %s (a damaged install? '
                         'pip install --force-reinstall memtally)\n' % (exe, e.strerror))
        return 127


if __name__ == '__main__':
    sys.exit(main())
