"""Runs another Python program as its child (subprocess: a pid of its own, an exec): exec_second.py, which
calls into libz and exits 3. Never calls libz itself; prints "CHILD <exit code>" once the child ended."""
import subprocess
import sys
from pathlib import Path

code = subprocess.run([sys.executable, str(Path(__file__).with_name("exec_second.py"))]).returncode
print("CHILD", code, flush=True)
