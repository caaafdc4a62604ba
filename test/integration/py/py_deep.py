# Native chains under Python through ctypes: deep_alloc(12) is thirteen
# frames of recursion, deep_alloc(1) two, each below ctypes' own frames;
# a stack must still reach the interpreter's eval loop and end there.
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.deep_alloc.restype = ctypes.c_void_p
lib.deep_alloc.argtypes = [ctypes.c_int]
keep = [lib.deep_alloc(12) for _ in range(3)]
keep += [lib.deep_alloc(1) for _ in range(40)]
keep += [lib.deep_alloc(12)]
