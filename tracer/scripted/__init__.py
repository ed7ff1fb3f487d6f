"""Scripted and compiled code: inductor's generated kernels (inductor.py), described from the files it wrote."""
