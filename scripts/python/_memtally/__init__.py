"""_memtally -- the modules of memtally's Python start-up hook
(sitecustomize.py, in the folder above; doc/python.md): steps.py marks
PyTorch's optimizer steps, cuda.py reads its CUDA caching allocator.

The hook loads each by its file's path under the name "_memtally.<name>",
never through a sys.path lookup, so a module of the program's called
memtally, memtally_torch or memtally_cuda is never touched.  The user's
API is memtally.py, beside this folder.  Importing this package loads
nothing."""
