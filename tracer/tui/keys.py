"""Every key of the main screen in one table: the app's bindings, the footer and the help come from it.

``rank`` orders the footer: when the terminal is too narrow for every key, the highest ranks are left
out first (``?`` lists them all, with a sentence each).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key names, comma-separated
    shown: str  # how the footer and the help write it
    label: str  # the footer's word
    action: str  # the app's action, with its parameters
    help: str  # the help's sentence
    rank: int = 9  # footer: 0 stays longest
    bind: bool = True  # False: bound elsewhere (a pane, a system binding); listed in the help only
    group: str = "view"


KEYS = [
    Key("q", "q", "quit", "quit_app", "quit: asks before it kills a launched target; an attached one is "
        "detached from and goes on", 0, group="run"),
    Key("ctrl+c", "^c", "interrupt", "help_quit", "interrupt the running target, as in gdb (quit stays on q)",
        bind=False, group="run"),
    Key("c", "c", "cont", "resume", "continue the stopped target", 1, group="run"),
    Key("s", "s", "step", "control('step')", "step into calls to the next source line (gdb's step)", 1,
        group="run"),
    Key("n", "n", "next", "control('next')", "step over calls to the next source line (gdb's next)", 1,
        group="run"),
    Key("f", "f", "finish", "control('finish')", "run until the innermost frame returns (gdb's finish)", 1,
        group="run"),
    Key("i", "i", "intr", "interrupt", "interrupt the running target (also ^c)", 2, group="run"),
    Key("greater_than_sign", ">", "input", "type_input", "type a line for the launched target's standard input "
        "(enter sends it, esc closes); the status line says when the target waits for one", 8, group="run"),
    Key("colon", ":", "gdb", "gdb_prompt", "a gdb prompt at a stop: the line runs in gdb in the thread and frame "
        "selected in the call path, its answer in the output pane (tab completes, ↑↓ history, esc closes)", 9,
        group="run"),
    Key("m", "m", "mode", "toggle_mode", "switch between record mode (each hit is recorded, the target "
        "goes on) and stop mode (the target stops at each hit)", 3, group="run"),
    Key("b", "b", "break", "add_breakpoint", "add a breakpoint: names complete from the target's own "
        "libraries; enter takes the highlighted one", 2, group="breakpoints"),
    Key("x,delete", "x", "remove", "remove_breakpoint", "remove the selected breakpoint (breakpoints pane)",
        bind=False, group="breakpoints"),
    Key("space", "space", "on/off", "toggle_breakpoint", "turn the selected breakpoint off or on "
        "(breakpoints pane)", bind=False, group="breakpoints"),
    Key("slash", "/", "search", "search", "filter the hits and mark the frames that contain a text "
        "(esc clears)", 1),
    Key("p", "p", "paths", "paths", "the distinct call paths with how many hits took each; enter shows one",
        4),
    Key("t", "t", "threads", "threads", "at a stop: the thread list (name, state, innermost frame); enter picks the "
        "thread to look at and step", 9, group="run"),
    Key("y", "y", "copy", "copy_frame", "copy the selected frame's name and file:line to the clipboard (OSC 52: "
        "the terminal's clipboard, over ssh too)", 9),
    Key("u", "u", "unfold", "unfold", "show every frame of the call path: start-up and interpreter "
        "frames too (u again folds them)", 5),
    Key("d", "d", "names", "full_names", "full demangled C++ names instead of short ones (d again)", 6),
    Key("z", "z", "zoom", "zoom", "maximize the focused pane (z or esc restores)", 4),
    Key("e", "e", "export", "export", "write the session as markdown notes beside its file (asks "
        "before it overwrites)", 7),
    Key("w", "w", "warnings", "warnings", "every warning of the session, whole (the line above the status shows "
        "the newest and says so; w or esc closes)", 9),
    Key("G", "G", "newest", "newest_hit", "select the newest hit", 8, bind=True),
    Key("enter", "enter", "open", "", "call path: open the fold on (or just above) the row", bind=False),
    Key("home,end", "home end", "first/last", "", "first or last row of a table", bind=False),
    Key("1", "1", "breakpoints", "focus('breakpoints')", "focus the breakpoints pane", 10, group="panes"),
    Key("2", "2", "hits", "focus('hits')", "focus the hits pane", 10, group="panes"),
    Key("3", "3", "call path", "focus('callpath')", "focus the call path pane", 10, group="panes"),
    Key("4", "4", "output", "focus('output')", "focus the target's output pane", 10, group="panes"),
    Key("5", "5", "source", "focus('source')", "focus the source pane", 10, group="panes"),
    Key("question_mark", "?", "help", "help", "this help (? or esc closes it)", 0),
]

FOOTER_MAX_RANK = 8  # keys ranked above this are in the help only
