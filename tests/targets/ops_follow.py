"""``--op conv2d --follow`` and ``--op pttrace_demo::scale_add`` in one run: conv2d twice from one line (a
CompositeImplicitAutograd operator whose decomposition --follow records), convolution called directly
(outside conv2d: not its child), then (given its path) the debug extension loaded after start-up and
its TORCH_LIBRARY operators called: scale_add from Python, and scale_add_twice, which calls scale_add."""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(1, 2, 8, 8)
w = torch.randn(3, 2, 3, 3, requires_grad=True)
for _ in range(2):
    y = F.conv2d(x, w)
z = torch.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
if len(sys.argv) > 1:
    torch.ops.load_library(sys.argv[1])
    a = torch.arange(4, dtype=torch.float32)
    torch.ops.pttrace_demo.scale_add(a, a, 2.0)
    torch.ops.pttrace_demo.scale_add_twice(a, a, 1.0)
print("done")
