"""memtally's user API in a Python that the wheel's `memtally run` started
(this is memtally/_bin/python/memtally/__init__.py, on PYTHONPATH there):
it stands for the installed package four folders up, so `import memtally`
and `memtally.pytest_plugin` are the installed ones whatever interpreter
runs, and the hook's folder never shadows them with a second copy."""
import os as _os

__path__ = [_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.dirname(
    _os.path.abspath(__file__)))))]
_init = _os.path.join(__path__[0], '__init__.py')
with open(_init) as _f:
    exec(compile(_f.read(), _init, 'exec'))
del _f, _init
