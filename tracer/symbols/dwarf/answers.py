"""What the debug information says about one address, in the shapes ``pttrace where``, the recorder
and addr2line's text form need."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InlineStep:
    """A function that the code at the address was inlined into: its name, the call site (the
    file:line addr2line ``-i`` shows with it) and the function's own declaration."""

    function: str | None
    file: str | None
    line: int | None
    decl_file: str | None = None
    decl_line: int | None = None
    mangled: str | None = None  # the function's linkage name, when DWARF gives one


@dataclass
class SourceLine:
    """What the debug information says about one address.

    ``file``/``line`` are the line-table answer (addr2line's); ``function`` is the innermost function
    (the inlined one, if any). ``inlined`` lists, outwards, the functions it was inlined into, each
    with the call site; it is empty when the address is not in inlined code. ``decl_file`` and
    ``decl_line`` are the innermost function's declaration (``DW_AT_decl_*``); ``outer_decl`` gives
    the declaration of the function the code really belongs to (the last of ``inlined``, or this one).
    ``addr2line_lines()`` renders all this exactly as ``addr2line -f -C -i`` prints it.
    """

    file: str | None
    line: int | None
    function: str | None
    discriminator: int = 0
    inlined: list[InlineStep] = field(default_factory=list)
    decl_file: str | None = None
    decl_line: int | None = None
    # What addr2line prints for the innermost function: the ELF symbol's name when DWARF gives the
    # function no linkage name, even for inlined code (``function`` keeps DWARF's name there).
    addr2line_function: str | None = field(default=None, repr=False)
    # The innermost function's linkage (mangled) name: DWARF's, or the ELF symbol's; None when neither
    # names it (what gdb's ``break`` and ``nm`` need for some templates).
    mangled: str | None = None

    @property
    def location(self) -> str:
        return f"{self.file or '??'}:{self.line or '?'}"

    @property
    def outer_decl(self) -> tuple[str | None, int | None]:
        if self.inlined:
            return self.inlined[-1].decl_file, self.inlined[-1].decl_line
        return self.decl_file, self.decl_line

    def addr2line_lines(self) -> list[str]:
        """The answer in addr2line's ``-f -C -i`` text form (two lines per function). addr2line
        repeats the address's discriminator on every call-site line of the chain; so does this."""

        def where(file, line):
            if not line:
                return f"{file or '??'}:?"
            disc = f" (discriminator {self.discriminator})" if self.discriminator else ""
            return f"{file or '??'}:{line}{disc}"

        out = [self.addr2line_function or self.function or "??", where(self.file, self.line)]
        for step in self.inlined:
            out += [step.function or "??", where(step.file, step.line)]
        return out
