"""dlopens a copy of a small shared library from a directory whose name holds a line break, then calls
libz's zlibCompileFlags once (the hit after it, a function nothing else calls: shutil's zlib calls
zlibVersion; no torch: the claim is about the library's path)."""
import _json
import ctypes
import os
import shutil
import sys

odd = os.path.join(sys.argv[1], "line\nbreak")
os.makedirs(odd, exist_ok=True)
copy = shutil.copy(_json.__file__, os.path.join(odd, "libodd.so"))
ctypes.CDLL(copy)
ctypes.CDLL("libz.so.1").zlibCompileFlags()
print("loaded", flush=True)
