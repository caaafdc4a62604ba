# CUDA from Python through ctypes (the fake driver in tests): allocate
# 16 MiB blocks until the device is full; the OOM dump and its PyTorch
# pickle must carry this file's lines.
import ctypes
cu = ctypes.CDLL('libcuda.so.1')
cu.cuInit(0)

def grab(n):
    p = ctypes.c_uint64()
    return cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))   # SITE_CUDA

n = 0
while grab(16 << 20) == 0:
    n += 1
print(n)
