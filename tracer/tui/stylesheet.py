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
    width: 40%;
    min-width: 40;
}

#right {
    width: 1fr;
}

/* Narrow terminals (under 140 columns): the call path and the source take the full width, the
   breakpoints, hits and output share a row at the bottom. Short ones (under 36 rows): panes keep
   only their top border (the title), two rows more for the content of each. */
.-narrow #main {
    layout: vertical;
}

.-narrow #left {
    dock: bottom;
    layout: horizontal;
    width: 100%;
    height: 12;
    min-width: 0;
}

.-narrow #source {
    height: 12;
}

.-narrow #left > .pane {
    height: 100%;
    max-height: 100%;
    width: 1fr;
}

.-narrow #left > #hits {
    width: 2fr;
}

.-narrow #right {
    width: 100%;
    height: 1fr;
}

.-short .pane {
    border: none;
    border-top: round $panel-lighten-2;
}

.-short .pane:focus, .-short .pane:focus-within {
    border: none;
    border-top: round $accent;
}

.-short.-narrow #left {
    height: 7;
}

.-short DataTable {
    scrollbar-size-horizontal: 0;
}

.-short #source {
    height: 7;
}

.-short #output {
    height: 6;
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

#warnings {
    height: 1;
    padding: 0 1;
    background: $panel;
}

#status {
    height: 1;
    padding: 0 1;
    background: $panel;
}

Confirm, AddBreakpoint, HelpScreen, PathsScreen, WarningsScreen {
    align: center middle;
    background: $background 60%;
}

#dialog {
    width: 90;
    max-width: 100%;
    height: auto;
    max-height: 24;
    border: thick $accent;
    background: $surface;
    padding: 1 2;
}

Confirm #dialog {
    width: 64;
    max-width: 100%;
}

HelpScreen #dialog, WarningsScreen #dialog {
    width: 100;
    max-width: 100%;
    max-height: 100%;
}

PathsScreen #dialog {
    width: 100%;
    height: 100%;
    max-height: 100%;
}

#paths {
    height: 1fr;
}

#search, #input, #prompt {
    height: 1;
    border: none;
    padding: 0 1;
}

#keys {
    height: 1;
    padding: 0 1;
    background: $panel;
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
    width: 100%;
    color: $text-muted;
    margin-top: 1;
}
"""
