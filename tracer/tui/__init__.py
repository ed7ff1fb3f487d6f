"""The Textual TUI: ``pttrace run``/``attach`` on a terminal, and ``pttrace view``.

The only package that imports Textual. ``app.make_app(source)`` builds the app around an event
source (``sources.LiveSource`` over the recorder, ``sources.SessionSource`` over a saved file).
"""
