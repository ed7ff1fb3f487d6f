"""Calls libz's zlibVersion once (ctypes) and ends with exit code 0: a breakpoint's one hit for a test whose
claim is about pttrace and its terminal, not torch (importing torch took 2.5 s of CPU at load 8)."""
import ctypes

ctypes.CDLL("libz.so.1").zlibVersion()
print("called", flush=True)
