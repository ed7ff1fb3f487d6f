"""Two element-wise ops big enough for intra-op parallelism on two threads, each from a line of its own;
ATen's own loops (exp runs in MKL's kernels, without unwind tables to read a launcher's stack through)."""
import torch
torch.set_num_threads(2)
a = torch.randn(1000, 1000)
b = a.sigmoid()
c = a.neg()
