"""memtally's Python start-up hook (doc/python.md).

`memtally run` puts this directory first on PYTHONPATH, so every Python
process it starts, and their children, run this file at start-up (site.py
imports `sitecustomize`).  It

 1. runs the sitecustomize it shadows (Debian's, a venv's, the user's: the
    next one on sys.path, skipping other copies of this hook), as site.py
    would have run it;
 2. unless MEMTALLY_TORCH is 0/false/no/off, puts a finder first on
    sys.meta_path that answers for nothing but waits for `import torch`;
    once torch's package has been executed, memtally_torch.on_torch(torch)
    marks each optimizer step (memtally_torch.py).

Nothing is imported here beyond what start-up has loaded already (this runs
in every Python process: `python3 -c pass` pays for this file only), torch
never by us.  Running it twice does nothing the second time.  A failure
prints one "memtally:" line and the program goes on."""
import os as _os
import sys as _sys

# what start-up did (memtally_torch.state() shows it)
_memtally_state = globals().get('_memtally_state') or {'started': False, 'chained': None,
                                                        'enabled': None}


def _memtally_warn(msg):
    try:
        _sys.stderr.write('memtally: %s\n' % msg)
    except Exception:
        pass


def _memtally_enabled():
    """False when MEMTALLY_TORCH says 0, false, no or off."""
    v = _os.environ.get('MEMTALLY_TORCH', '1').strip().lower()
    return v not in ('0', 'false', 'no', 'off')


def _memtally_chain():
    """Run the sitecustomize this one shadows, the way site.py runs one: an
    ImportError of that name is silent, another exception is printed as
    site.py prints it and start-up goes on; SystemExit and
    KeyboardInterrupt pass."""
    try:
        # the import system's own classes, loaded already: importing
        # importlib.util would load ~15 more modules in every process
        ext = _sys.modules.get('_frozen_importlib_external')
        boot = _sys.modules.get('_frozen_importlib')
        if ext is not None and boot is not None:
            PathFinder, module_from_spec = ext.PathFinder, boot.module_from_spec
        else:
            from importlib.machinery import PathFinder
            from importlib.util import module_from_spec
        real = _os.path.realpath
        skip = {real(_os.path.dirname(_os.path.abspath(__file__)))}
        spec = None
        for _ in range(16):  # each round passes over one copy of this hook
            paths = [p for p in _sys.path if real(p or '.') not in skip]
            spec = PathFinder.find_spec('sitecustomize', paths)
            if spec is None or not spec.origin or not _os.path.isfile(spec.origin):
                return
            d = real(_os.path.dirname(spec.origin))
            if not _os.path.isfile(_os.path.join(d, 'memtally_torch.py')):
                break  # not memtally's
            skip.add(d)
            spec = None
        if spec is None:
            return
        _memtally_state['chained'] = spec.origin
        mod = module_from_spec(spec)
    except Exception as e:
        _memtally_warn('cannot look for the sitecustomize this hook shadows (%s: %s)'
                       % (type(e).__name__, e))
        return
    try:
        try:
            spec.loader.exec_module(mod)
        except ImportError as exc:
            if exc.name != 'sitecustomize':
                raise
    except Exception as err:
        if _sys.flags.verbose:
            _sys.excepthook(*_sys.exc_info())
        else:
            _sys.stderr.write('Error in sitecustomize; set PYTHONVERBOSE for traceback:\n'
                              '%s: %s\n' % (err.__class__.__name__, err))


class _MemtallyTorchFinder(object):
    """Answers for nothing: for `torch` it asks the finders after it and has
    torch's own loader call memtally_torch.on_torch once the package has
    been executed.  The spec, the loader and the module stay torch's."""
    _busy = False

    def find_spec(self, name, path=None, target=None):
        if name != 'torch' or self._busy:
            return None
        self._busy = True
        try:
            spec = None
            for f in _sys.meta_path:
                if f is self or not hasattr(f, 'find_spec'):
                    continue
                spec = f.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self._busy = False
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, 'exec_module'):
            return spec
        finder = self
        real = loader.exec_module

        def exec_module(module):
            try:
                del loader.exec_module  # torch's own again
            except AttributeError:
                pass
            real(module)  # torch's __init__: its errors are the program's
            try:
                _sys.meta_path.remove(finder)
            except ValueError:
                pass
            _memtally_on_torch(module)
        try:
            loader.exec_module = exec_module
        except Exception:
            pass  # a loader that takes no attribute: torch loads unhooked
        return spec


def _memtally_on_torch(torch):
    try:
        import memtally_torch
        memtally_torch.on_torch(torch)
    except Exception as e:
        _memtally_warn('the PyTorch hook failed (%s: %s); steps are not marked'
                       % (type(e).__name__, e))


def _memtally_start():
    if _memtally_state['started']:
        return
    _memtally_state['started'] = True
    _memtally_chain()
    try:
        _memtally_state['enabled'] = _memtally_enabled()
        if not _memtally_state['enabled']:
            return
        torch = _sys.modules.get('torch')
        if torch is not None and hasattr(torch, 'optim'):
            _memtally_on_torch(torch)  # the shadowed sitecustomize imported it
        elif not any(type(f).__name__ == '_MemtallyTorchFinder' for f in _sys.meta_path):
            _sys.meta_path.insert(0, _MemtallyTorchFinder())
    except Exception as e:
        _memtally_warn('the Python start-up hook failed (%s: %s); steps are not marked'
                       % (type(e).__name__, e))


_memtally_start()
