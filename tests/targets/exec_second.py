"""The program exec_into_script.py becomes (and subprocess_python.py's child): libz's zlibVersion, then its
zlibCompileFlags (ctypes, no torch), "SECOND <pid>", exit code 3."""
import ctypes
import os
import sys

libz = ctypes.CDLL("libz.so.1")
libz.zlibVersion()
libz.zlibCompileFlags()
print("SECOND", os.getpid(), flush=True)
sys.exit(3)
