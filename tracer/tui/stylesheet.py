"""The TUI's layout and colours (Textual CSS), kept in Python so that every install carries it.

Left column: breakpoints over hits over the target's output. Right: the call path over the source.
"""

APP_CSS = """
Screen {
    layout: vertical;
}

#main {
    height: 1fr;
}

#left {
    width: 36%;
    min-width: 40;
}

#right {
    width: 1fr;
}

.pane {
    border: round $panel-lighten-2;
    border-title-color: $text-muted;
    background: $surface;
}

.pane:focus, .pane:focus-within {
    border: round $accent;
    border-title-color: $text;
    border-title-style: bold;
}

#breakpoints {
    height: auto;
    max-height: 12;
    min-height: 4;
}

#hits {
    height: 1fr;
}

#output {
    height: 9;
}

#callpath {
    height: 1fr;
}

#source {
    height: 17;
    padding: 0 1;
    overflow: hidden hidden;
    text-wrap: nowrap;
    text-overflow: ellipsis;
}

#status {
    height: 1;
    padding: 0 1;
    background: $panel;
}

ConfirmQuit, AddBreakpoint {
    align: center middle;
    background: $background 60%;
}

#dialog {
    width: 90;
    height: auto;
    max-height: 24;
    border: thick $accent;
    background: $surface;
    padding: 1 2;
}

ConfirmQuit #dialog {
    width: 64;
}

#question {
    width: 100%;
    margin-bottom: 1;
}

#buttons {
    height: auto;
    align: center middle;
}

#buttons Button {
    margin: 0 2;
}

#suggestions {
    height: auto;
    max-height: 12;
    margin-top: 1;
}

#hint {
    color: $text-muted;
    margin-top: 1;
}
"""
