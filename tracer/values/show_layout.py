"""``python -m tracer.values.show_layout [PYTHON]``: print the established layout (a debugging aid).

Apart from ``layout.py`` because it finds torch's libraries through ``tracer.symbols`` (pyelftools), which
the gdb agent, importing ``layout.py``, must not reach.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

from tracer.values.layout import LayoutUnknown, establish


def main(argv: list[str] | None = None) -> int:
    """Print the layout of PYTHON's torch (default: this interpreter's)."""
    args = sys.argv[1:] if argv is None else argv
    python = args[0] if args else sys.executable
    from tracer import settings
    from tracer.symbols import torch_libraries

    try:
        layout = establish(python, torch_libraries(python), settings.cache_dir())
    except LayoutUnknown as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(asdict(layout), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
