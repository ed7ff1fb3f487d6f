"""The smallest model worth tracing: a Linear layer, a Sigmoid, an MSE loss and backward().

It touches every layer pttrace shows: the Python binding (``torch.tensor``), the dispatcher,
autograd (forward and backward through the engine) and the CPU kernels.
"""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Sigmoid())
x = torch.tensor([1.0, 2.0, 3.0])
target = torch.tensor([1.0])

y = model(x)
print(y)
loss = torch.nn.functional.mse_loss(y, target)
print(loss)
loss.backward()
