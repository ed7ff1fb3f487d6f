"""The value readers as the gdb agent calls them: a layout installed once per process, a dict per value.

The recorder establishes the layout (``layout.establish``: outside gdb, it runs a probe) and hands the
agent its JSON; the agent calls ``install(json)`` and then ``agent_tensor``/``agent_value`` at each hit.
Until a layout is installed, every value says why it is not read. Standard library only.
"""
from __future__ import annotations

from .describe import describe
from .layout import TorchLayout
from .memory import Unreadable
from .tensor import read_tensor

_STATE: dict = {"layout": None, "symbolize": None, "why": "no torch layout was given to the agent"}


def install(layout: TorchLayout | str | None, symbolize=None, why: str | None = None) -> None:
    """Use this layout (or its JSON) from now on; None with ``why``: values are unreadable for that reason."""
    if isinstance(layout, str):
        layout = TorchLayout.from_json(layout)
    _STATE.update(layout=layout, symbolize=symbolize, why=why or _STATE["why"])


def installed() -> TorchLayout | None:
    return _STATE["layout"]


def _reader(mem):
    return mem.read if hasattr(mem, "read") else mem


def agent_tensor(address: int, mem) -> dict:
    """The ``at::Tensor`` at ``address`` as a dict (``TensorValue.to_dict``, or ``kind: unreadable``).
    ``mem``: ``read(address, length) -> bytes``, or an object with such a ``read``."""
    layout = _STATE["layout"]
    if layout is None:
        return Unreadable(_STATE["why"], "at::Tensor", address).to_dict()
    return read_tensor(_reader(mem), layout, address, _STATE["symbolize"]).to_dict()


def agent_value(type_name: str, value, mem) -> dict:
    """``describe`` for the agent: the parameter of ``type_name`` passed as ``value``, as a dict."""
    layout = _STATE["layout"]
    if layout is None:
        return Unreadable(_STATE["why"], type_name).to_dict()
    return describe(_reader(mem), layout, type_name, value, _STATE["symbolize"]).to_dict()


def agent_tensor_text(address: int, mem) -> str:
    """The ``at::Tensor`` at ``address`` in one line (``TensorValue.text``), or why it cannot be read: the
    gdb prompt's ``tensor`` command."""
    layout = _STATE["layout"]
    if layout is None:
        return Unreadable(_STATE["why"], "at::Tensor", address).text()
    return read_tensor(_reader(mem), layout, address, _STATE["symbolize"]).text()
