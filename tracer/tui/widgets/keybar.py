"""The footer: the keys that act now, as many as the width holds, the most needed first."""
from __future__ import annotations

import ast

from rich.text import Text
from textual.widgets import Static

from tracer.tui.keys import FOOTER_MAX_RANK, KEYS, Key


def split_action(action: str) -> tuple[str, tuple]:
    """``control('step')`` -> ("control", ("step",))."""
    name, _, rest = action.partition("(")
    if not rest:
        return name, ()
    params = ast.literal_eval(f"({rest[:-1]},)") if rest[:-1].strip() else ()
    return name, tuple(params)


class KeyBar(Static):
    """Keys whose action is possible now are bright, those only waiting (gdb busy) dim; keys of
    actions impossible here (control keys of a recorded session) are left out."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.redraw())
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def _pane_keys(self) -> list[tuple[Key, bool | None]]:
        """The focused pane's own keys (the breakpoints pane's x and space), first in line."""
        focused = self.screen.focused
        out: list[tuple[Key, bool | None]] = []
        if focused is None:
            return out
        for binding in getattr(focused, "BINDINGS", []):
            if not getattr(binding, "show", False):
                continue
            name, params = split_action(binding.action)
            state = focused.check_action(name, params)
            if state is not False:
                keys = binding.key.split(",")
                shown = next((k for k in keys if len(k) == 1), keys[0])  # "x" rather than "delete"
                out.append((Key(binding.key, shown, binding.description, binding.action, "", 1), state))
        return out

    def _state(self, key: Key) -> bool | None:
        name, params = split_action(key.action)
        return self.app.check_action(name, params)

    def redraw(self) -> None:
        width = self.size.width or 80
        candidates = self._pane_keys()
        for key in KEYS:
            if key.rank > FOOTER_MAX_RANK or not key.bind:
                continue
            state = self._state(key)
            if state is False:
                continue
            candidates.append((key, state))
        # Drop the highest ranks until the rest fits, keeping the table's order on screen.
        chosen = list(candidates)
        while chosen and _width(chosen) > width:
            worst = max(range(len(chosen)), key=lambda i: (chosen[i][0].rank, i))
            chosen.pop(worst)
        t = Text(no_wrap=True, overflow="ellipsis")
        for key, state in chosen:
            if t:
                t.append("  ")
            t.append(key.shown, style="bold" if state else "grey42")
            t.append(" " + key.label, style="" if state else "grey42")
        self.update(t)


def _width(chosen: list) -> int:
    return sum(len(k.shown) + 1 + len(k.label) for k, _ in chosen) + 2 * max(0, len(chosen) - 1)
