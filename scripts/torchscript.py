"""TorchScript, as the study notes meet it: a scripted function that calls another, in a loop with an
if, run by TorchScript's interpreter (GraphExecutorImplBase::run -> InterpreterStateImpl::runImpl).
pttrace shows, at each kernel the interpreter reaches, the scripted function, line and graph node it was
executing, and the graph itself (what gdb's `call graph->dump()` prints), read from memory."""
import torch


@torch.jit.script
def gate(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * 2.0


@torch.jit.script
def model(x: torch.Tensor, steps: int) -> torch.Tensor:
    y = x
    for i in range(steps):
        if i % 2 == 0:
            y = gate(y)
        else:
            y = torch.relu(y - 1.0)
    return y


x = torch.tensor([-1.0, 0.0, 1.0])
print(model(x, 3))
