"""The TUI's widgets, one module per screen area."""
