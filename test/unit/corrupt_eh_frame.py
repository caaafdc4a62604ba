"""corrupt_eh_frame.py LIB — points every FDE's CIE pointer in LIB's
.eh_frame 2 GiB back (outside any mapping of it), in place, for
test_cfi's corrupt_unwind_info.  ELF64 little-endian only."""
import struct, sys

path = sys.argv[1]
data = bytearray(open(path, 'rb').read())
shoff, = struct.unpack_from('<Q', data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3a)
def section(i):
    name, typ, flags, addr, off, size = struct.unpack_from('<IIQQQQ', data, shoff + i * shentsize)
    return name, off, size
_, stroff, _ = section(shstrndx)
def name_of(n):
    end = data.index(b'\0', stroff + n)
    return data[stroff + n:end].decode()
secs = {name_of(section(i)[0]): section(i) for i in range(shnum)}
_, off, size = secs['.eh_frame']
p, fdes = off, 0
while p + 8 <= off + size:
    length, = struct.unpack_from('<I', data, p)
    if length == 0:
        break
    cie_ptr, = struct.unpack_from('<I', data, p + 4)
    if cie_ptr != 0:  # an FDE
        struct.pack_into('<I', data, p + 4, 0x7ffffff0)
        fdes += 1
    p += 4 + length
open(path, 'wb').write(data)
print('corrupt_eh_frame: %d FDEs of %s point outside it' % (fdes, path))
if not fdes:
    sys.exit(1)
