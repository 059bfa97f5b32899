#!/usr/bin/env python3
"""Uses libnccl-lamport.so the way vLLM's and SGLang's pynccl use NCCL (VLLM_NCCL_SO_PATH /
SGLANG_NCCL_SO_PATH): ctypes.CDLL(path), restype/argtypes, then ncclGetVersion,
ncclGetErrorString and ncclGetUniqueId. Checks the answers against the real libnccl.so.2 in the
same process. No GPU needed.

  ctypes_shim_check.py /abs/libnccl-lamport.so   load our object by path
  ctypes_shim_check.py --by-name                 ctypes.CDLL("libnccl.so.2"), run under LD_AUDIT:
                                                 must give our object all the same

Exits 0 and prints "ctypes_shim_check: PASS" when every check holds.
"""
import ctypes
import os
import sys

NCCL_UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES in nccl.h
NCCL_INVALID_USAGE = 5


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * NCCL_UNIQUE_ID_BYTES)]


def declare(lib):
    """The prototypes pynccl declares for these three functions."""
    lib.ncclGetVersion.restype = ctypes.c_int
    lib.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetErrorString.argtypes = [ctypes.c_int]
    lib.ncclGetUniqueId.restype = ctypes.c_int
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
    return lib


def version(lib):
    code = ctypes.c_int(0)
    result = lib.ncclGetVersion(ctypes.byref(code))
    if result != 0:
        raise RuntimeError(f"ncclGetVersion returned {result}")
    return code.value


class DlPhdrInfo(ctypes.Structure):
    """The leading fields of struct dl_phdr_info (link.h)."""
    _fields_ = [("dlpi_addr", ctypes.c_void_p), ("dlpi_name", ctypes.c_char_p)]


def real_nccl_path(ours_path):
    """Name of the libnccl.so.2 loaded in this process that is not our object (the plugin loaded
    it), as the loader knows it: dlopen of that exact name returns the loaded object before any
    LD_AUDIT module is asked, which a path from /proc/self/maps (symlinks resolved) would not."""
    ours = os.path.realpath(ours_path)
    names = []
    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DlPhdrInfo), ctypes.c_size_t, ctypes.c_void_p)

    def collect(info, size, data):
        names.append((info.contents.dlpi_name or b"").decode())
        return 0

    ctypes.CDLL(None).dl_iterate_phdr(callback_type(collect), None)
    for name in names:
        if os.path.basename(name) == "libnccl.so.2" and os.path.realpath(name) != ours:
            return name
    return None


def main():
    failures = []
    by_name = sys.argv[1:] == ["--by-name"]
    ours = declare(ctypes.CDLL("libnccl.so.2" if by_name else sys.argv[1]))
    if not hasattr(ours, "ncclLamportIsActive"):
        failures.append("the library is not libnccl-lamport.so (no ncclLamportIsActive)")
    our_version = version(ours)
    our_text = ours.ncclGetErrorString(NCCL_INVALID_USAGE)
    uid = NcclUniqueId()
    if ours.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        failures.append("ncclGetUniqueId through our object failed")
    elif not any(uid.internal):
        failures.append("ncclGetUniqueId left the id all zero")

    ours_file = None
    # The object ctypes got: its path, from the loader (dladdr through libc).
    if hasattr(ours, "ncclLamportIsActive"):
        info = (ctypes.c_void_p * 4)()
        libc = ctypes.CDLL(None)
        if libc.dladdr(ctypes.cast(ours.ncclLamportIsActive, ctypes.c_void_p), info):
            ours_file = ctypes.cast(info[0], ctypes.c_char_p).value.decode()
    real_path = real_nccl_path(ours_file or sys.argv[1])
    if real_path is None:
        failures.append("no real libnccl.so.2 loaded besides our object")
    else:
        real = declare(ctypes.CDLL(real_path))
        if hasattr(real, "ncclLamportIsActive"):
            failures.append(f"{real_path} is our object, not NCCL")
        if version(real) != our_version:
            failures.append(f"ncclGetVersion: ours {our_version}, real {version(real)}")
        if real.ncclGetErrorString(NCCL_INVALID_USAGE) != our_text:
            failures.append(f"ncclGetErrorString: {our_text!r} vs {real.ncclGetErrorString(NCCL_INVALID_USAGE)!r}")
    print(f"object: {ours_file}; real NCCL: {real_path}; version {our_version}; error text {our_text!r}")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        return 1
    print("ctypes_shim_check: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
