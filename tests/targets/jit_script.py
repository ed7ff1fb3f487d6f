"""TorchScript: a scripted function calling another (two scripted functions on one interpreter), a loop
and an if; then a torch.jit.trace'd function."""
import torch


@torch.jit.script
def inner(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * 2.0


@torch.jit.script
def outer(x: torch.Tensor, n: int) -> torch.Tensor:
    y = x
    for i in range(n):
        if i % 2 == 0:
            y = inner(y)
        else:
            y = torch.relu(y + 1.0)
    return y


def plain(x):
    return torch.sigmoid(x + 1.0)


traced = torch.jit.trace(plain, torch.ones(4))
x = torch.ones(4)
z = outer(x, 3)
w = traced(x)
print(float(z.sum()), float(w.sum()))
