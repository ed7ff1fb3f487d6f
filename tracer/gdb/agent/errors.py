"""What reading the target, or gdb's view of it, raises: the exceptions the agent catches.

``gdb.error`` (``gdb.MemoryError`` is one): a failed read, an invalid frame, a type gdb does not
have; ``ValueError``: a variable or register gdb does not know, a name that is not UTF-8;
``OverflowError``: a value that does not fit. Anything else is a bug, caught only at the edge of a
gdb callback (the breakpoint's ``stop``, a command).
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

READ_ERRORS = (gdb.error, ValueError, OverflowError)
