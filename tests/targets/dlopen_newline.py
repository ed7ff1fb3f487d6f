"""dlopens a copy of a small shared library from a directory whose name holds a line break, then calls
torch.tensor once."""
import _json
import ctypes
import os
import shutil
import sys

import torch

odd = os.path.join(sys.argv[1], "line\nbreak")
os.makedirs(odd, exist_ok=True)
copy = shutil.copy(_json.__file__, os.path.join(odd, "libodd.so"))
ctypes.CDLL(copy)
torch.tensor([1])
print("loaded", flush=True)
