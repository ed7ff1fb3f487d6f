"""A loop whose small tensors are new at each iteration, with other values: ``torch.sigmoid`` of each, after
writing what the target itself sees (its values and data pointer) to an oracle.
``python values_loop.py ORACLE.json N``."""
import json
import sys

import torch

seen = []
for i in range(int(sys.argv[2])):
    x = torch.arange(3, dtype=torch.float32) * (i + 1) + 0.5
    seen.append({"values": x.tolist(), "data_ptr": x.data_ptr()})
    torch.sigmoid(x)
with open(sys.argv[1], "w") as fh:
    json.dump(seen, fh)
