"""memtally's Python start-up hook (doc/python.md).

`memtally run` puts this directory first on PYTHONPATH, so every Python
process it starts, and their children, run this file at start-up (site.py
imports `sitecustomize`).  It

 1. runs the sitecustomize it shadows (Debian's, a venv's, the user's: the
    next one on sys.path, skipping other copies of this hook), as site.py
    would have run it;
 2. from Python 3.10 on (older ones, Python 2 included, get step 1 only),
    unless MEMTALLY_TORCH is 0/false/no/off, puts a finder first on
    sys.meta_path that answers for nothing but waits for `import torch`;
    once torch's package has been executed, _memtally/steps.py's
    on_torch(torch) marks each optimizer step.

The hook's own modules are the package _memtally beside this file, loaded
by their path (_memtally_load), never by a name a module of the program's
could take.  Nothing is imported here beyond what start-up has loaded
already (this runs in every Python process: `python3 -c pass` pays for
this file only), torch never by us.  Running it twice does nothing the
second time.  A failure is one warning, said as the shim says its own (a
record in the file; the program's stderr gets none under `memtally run`)
and the program goes on; no exception of the hook's reaches the program.  This file stays
readable by Python 2 (which runs only step 1)."""
import os as _os
import sys as _sys

# what start-up did (_memtally/steps.py's state() shows it)
_memtally_state = globals().get('_memtally_state') or {'started': False, 'chained': None,
                                                        'enabled': None}


def _memtally_warn(msg):
    """A warning said as the shim says its own (memtally_warn: a record in
    the file, `memtally run` prints it at the end; stderr gets at most the
    process's first, none under MEMTALLY_QUIET=1); without the shim, one
    stderr line unless MEMTALLY_QUIET=1.  ctypes only on this failure path."""
    try:
        import ctypes
        f = ctypes.CDLL(None).memtally_warn
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
        if f(msg.encode('utf-8', 'replace')) == 0:
            return
    except Exception:
        pass
    try:
        if _os.environ.get('MEMTALLY_QUIET', '0').strip().lower() not in ('1', 'true', 'yes', 'on'):
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
    if _sys.version_info[0] < 3:
        _memtally_chain2()
        return
    try:
        # the import system's own classes, loaded already: importing
        # importlib.util would load ~15 more modules in every process
        ext = _sys.modules.get('_frozen_importlib_external')
        boot = _sys.modules.get('_frozen_importlib')
        if ext is None or boot is None or not hasattr(boot, 'module_from_spec'):
            return  # Python 3.0-3.4: left alone
        PathFinder, module_from_spec = ext.PathFinder, boot.module_from_spec
        spec = None
        skip = _memtally_skip()
        for _ in range(16):  # each round passes over one copy of this hook
            paths = [p for p in _sys.path if _os.path.abspath(p or '.') not in skip]
            spec = PathFinder.find_spec('sitecustomize', paths)
            if spec is None or not spec.origin or not _os.path.isfile(spec.origin):
                return
            if not _memtally_copy(spec.origin, skip):
                break  # not memtally's
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
        _memtally_site_error(err)


def _memtally_skip():
    # paths as strings (no realpath: a stat per component): a copy of the
    # hook reached another way is still known by its _memtally folder
    return set([_os.path.abspath(_os.path.dirname(_os.path.abspath(__file__)))])


def _memtally_copy(origin, skip):
    """Whether the sitecustomize at origin is a copy of this hook (added to
    skip)."""
    d = _os.path.abspath(_os.path.dirname(origin))
    if not (_os.path.isfile(_os.path.join(d, '_memtally', 'steps.py')) or
            _os.path.isfile(_os.path.join(d, 'memtally_torch.py'))):  # an older memtally's
        return False
    skip.add(d)
    return True


def _memtally_site_error(err):
    if _sys.version_info[0] < 3:
        _sys.stderr.write("'import sitecustomize' failed; use -v for traceback\n")
    elif _sys.flags.verbose:
        _sys.excepthook(*_sys.exc_info())
    else:
        _sys.stderr.write('Error in sitecustomize; set PYTHONVERBOSE for traceback:\n'
                          '%s: %s\n' % (err.__class__.__name__, err))


def _memtally_chain2():
    """Python 2: the shadowed sitecustomize (a source file) through imp, as
    site.py runs it; silent when there is none."""
    try:
        import imp
        skip = _memtally_skip()
        origin = None
        for _ in range(16):
            paths = [p for p in _sys.path if _os.path.abspath(p or '.') not in skip]
            try:
                f, origin, desc = imp.find_module('sitecustomize', paths)
            except ImportError:
                return
            if f is not None:
                f.close()
            if desc[2] != imp.PY_SOURCE:
                return
            if not _memtally_copy(origin, skip):
                break
            origin = None
        if origin is None:
            return
        _memtally_state['chained'] = origin
    except Exception:
        return
    try:
        imp.load_source('_memtally_shadowed_sitecustomize', origin)
    except ImportError:
        pass  # site.py 2.7 is silent about an ImportError there
    except Exception as err:
        _memtally_site_error(err)


def _memtally_load(name):
    """_memtally/<name>.py beside this file, loaded by its path under the
    key "_memtally.<name>": never through a sys.path lookup, so a
    memtally.py, memtally_torch.py or memtally_cuda.py in the program's
    folder or in site-packages is never imported.  Only the import
    system's own functions, loaded at start-up, are used."""
    key = '_memtally.' + name
    mod = _sys.modules.get(key)
    if mod is not None:
        return mod
    ext = _sys.modules['_frozen_importlib_external']
    boot = _sys.modules['_frozen_importlib']
    here = _os.path.dirname(_os.path.abspath(__file__))
    spec = ext.spec_from_file_location(key, _os.path.join(here, '_memtally', name + '.py'))
    mod = boot.module_from_spec(spec)
    _sys.modules[key] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        _sys.modules.pop(key, None)
        raise
    return mod


class _MemtallyTorchFinder(object):
    """Answers for nothing: for `torch` it asks the finders after it and
    learns when torch's package has been executed, then calls
    _memtally/steps.py's on_torch.  The spec, the loader and the module stay
    torch's.  It learns it from the spec: the import system sets
    spec._initializing to True before executing the module and to False
    once it is done (importlib._bootstrap._load_unlocked, 3.10 to 3.13), so
    the spec's class becomes, for that time, a subclass of its own whose
    _initializing is a property; the setter puts the class back.  No frame
    of this hook is then below torch's __init__ (recorded stacks of
    torch's import name the program's `import torch`).  Where the class
    cannot be changed, torch's loader's exec_module is wrapped instead."""
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
        try:
            if not _memtally_watch_spec(spec, self):
                _memtally_wrap_loader(spec, loader, self)
        except Exception as e:
            if not _memtally_ours(e):
                raise
            # torch loads unhooked
        return spec

    def done(self, module):
        try:
            _sys.meta_path.remove(self)
        except ValueError:
            pass
        _memtally_on_torch(module)


def _memtally_watch_spec(spec, finder):
    """spec's class, until torch is executed: one whose _initializing is a
    property.  False when the class cannot be changed."""
    base = type(spec)
    if '_initializing' in getattr(spec, '__dict__', {}):
        return False

    def get(self):
        return self.__dict__.get('_memtally_initializing', False)

    def set_(self, value):
        self.__dict__['_memtally_initializing'] = value
        if value:
            return
        # torch's __init__ has run (or raised): the spec is torch's again
        try:
            self.__class__ = base
            del self.__dict__['_memtally_initializing']
            self._initializing = False
        except Exception as e:
            if not _memtally_ours(e):
                raise
        mod = _sys.modules.get(self.name)
        if mod is not None and getattr(mod, '__spec__', None) is self:
            finder.done(mod)  # imported; on an exception torch is not in sys.modules
    cls = type(base.__name__, (base,), {'_initializing': property(get, set_),
                                        '__module__': base.__module__})
    try:
        spec.__class__ = cls
    except TypeError:
        return False
    return True


def _memtally_wrap_loader(spec, loader, finder):
    real = loader.exec_module

    def exec_module(module):
        try:
            del loader.exec_module  # torch's own again
        except AttributeError:
            pass
        real(module)  # torch's __init__: its errors are the program's
        finder.done(module)
    try:
        loader.exec_module = exec_module
    except Exception as e:
        if not _memtally_ours(e):
            raise
        # a loader that takes no attribute: torch loads unhooked


def _memtally_ours(e):
    """_memtally/steps.py's ours(e): whether e is the hook's own failure
    (reported, dropped) or must propagate unchanged (doc/python.md
    "Exceptions": never a BaseException that is not an Exception, nor an
    exception of the program's code: a signal handler's, ...).  steps.py
    is loaded on this failure path only."""
    try:
        return _memtally_load('steps').ours(e)
    except Exception:
        return isinstance(e, Exception)


def _memtally_on_torch(torch):
    """_memtally/steps.py's on_torch.  What it raises of its own is a
    warning; anything else propagates unchanged (_memtally_ours)."""
    try:
        _memtally_load('steps').on_torch(torch)
    except Exception as e:
        if not _memtally_ours(e):
            raise
        _memtally_warn('the PyTorch hook failed (%s: %s); steps are not marked'
                       % (type(e).__name__, e))


def _memtally_start():
    if _memtally_state['started']:
        return
    _memtally_state['started'] = True
    _memtally_chain()
    if _sys.version_info < (3, 10):
        return  # older Pythons are left alone: no finder, nothing imported
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
        if not _memtally_ours(e):
            raise
        _memtally_warn('the Python start-up hook failed (%s: %s); steps are not marked'
                       % (type(e).__name__, e))


_memtally_start()
