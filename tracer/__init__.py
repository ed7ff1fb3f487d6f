"""pttrace: record the call path from Python down to PyTorch's kernels, under gdb."""

__version__ = "0.1.0"
