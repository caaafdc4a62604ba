"""Sample tests for the pytest plugin (test_wheel runs them with
`pytest --memtally`): each test's name says whether it should pass
(_ok) or fail (_over, _leaks), and the line a failure must name carries
a "# names:" comment.  Each _ok test runs after an _over one, so a peak
not started again per test would fail it."""
import ctypes
import pytest

kept = []


@pytest.mark.memtally_limit(peak="8 MB")
def test_host_over():
    x = [bytearray(1000) for _ in range(30000)]  # names: host
    del x


@pytest.mark.memtally_limit(peak="24 MB")
def test_host_ok():
    x = [bytearray(1000) for _ in range(4000)]  # ~4 MB
    assert len(x) == 4000


@pytest.mark.memtally_leaks(max_per_call="16 KB", warmups=2)
def test_leak_leaks():
    kept.append(bytearray(100000))  # names: leak


@pytest.mark.memtally_leaks(max_per_call="16 KB", warmups=2)
def test_leak_ok():
    x = [bytearray(1000) for _ in range(1000)]
    del x


def _cuda():
    lib = ctypes.CDLL('libcuda.so.1')
    assert lib.cuInit(0) == 0
    return lib


def _device_bytes(n):
    lib = _cuda()
    ptr = ctypes.c_uint64()
    assert lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(n)) == 0
    assert lib.cuMemFree_v2(ptr) == 0


@pytest.mark.memtally_limit(cuda="64 MB")
def test_cuda_over():
    _device_bytes(200 << 20)  # names: cuda


@pytest.mark.memtally_limit(cuda="64 MB")
def test_cuda_ok():
    _device_bytes(32 << 20)


def test_unmarked():
    x = bytearray(3 << 20)
    del x
