# Daemon threads calling malloc/free in a loop with the GIL released while
# the interpreter shuts down under them.
import ctypes, threading, time
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def spin():
    while True:
        libc.free(libc.malloc(1000))
        bytearray(3000)

for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(0.02)
