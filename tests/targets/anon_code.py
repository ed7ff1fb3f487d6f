"""Calls libz's zlibVersion from machine code written to an anonymous page (as a JIT would): the caller of a
breakpoint there is a frame in no file. Prints ``CODE <address> <length>`` then libz's version."""
import ctypes
import mmap
import struct

zlib = ctypes.CDLL("libz.so.1")
target = ctypes.cast(zlib.zlibVersion, ctypes.c_void_p).value
# x86-64: sub rsp, 8; movabs rax, zlibVersion; call rax; add rsp, 8; ret
code = b"\x48\x83\xec\x08" + b"\x48\xb8" + struct.pack("<Q", target) + b"\xff\xd0" + b"\x48\x83\xc4\x08" + b"\xc3"
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
print(f"CODE {address} {len(code)}", flush=True)
print(ctypes.CFUNCTYPE(ctypes.c_char_p)(address)().decode(), flush=True)
