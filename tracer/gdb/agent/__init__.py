"""The recorder that runs *inside* gdb: pttrace imports it into gdb's Python
(``python import tracer.gdb.agent``), which defines its gdb commands (``commands.py``).

Recording in gdb's own Python is ~4x cheaper per hit than ``commands; bt; continue`` and far cheaper
than an MI round trip per hit (DESIGN.md section 2). Each hit is appended to the session file the
moment it happens, so nothing recorded is lost if gdb or the target dies.

It imports nothing but the standard library, gdb and pttrace's own gdb-free modules (``tracer.session.records``,
``tracer.dispatch.classify``, ``tracer.pyruntime``, ``tracer.dispatch.keyset_abi``, ``tracer.dispatch.native_functions``). Every
read of the target's memory is untrusted: a frame that cannot be read is recorded with what is known,
never guessed.

  state.py          settings and counters (STATE) and every cache with its one ``invalidate`` (CACHES)
  session.py        the agent's writes to the session file (records encoded by tracer/session/records.py)
  native.py         native frames: names, libraries, offsets
  python_frames.py  CPython's frames through tracer.pyruntime's reader; pycode.py: their records
  stack.py          the call path of a hit: gdb's unwind and its reuse caches; reuse.py: whole-stack reuse
  keyset.py         the DispatchKeySet a dispatcher hop was called with
  arguments.py      every argument of the frame stopped in (and DWARF frames'); argvalues.py: values by type
  tls.py            the stopped thread's local dispatch key sets (libc10's thread_local)
  hits.py           recording one hit; breakpoints.py: the breakpoints and what a hit does
  commands.py       the pttrace-* gdb commands; unwinders.py: gdb's unwinder search, skipped when empty
  cfi_unwind.py     frames of the libraries gdb has as unwind tables only, unwound from their .eh_frame_hdr
  log.py            the agent's log file; errors.py: the exceptions reading the target raises
  compiled.py       the Python frame dynamo ran a compiled graph in place of ("graph N")
  regs.py           frame #0's registers at a stop in one ptrace read (gdb's frame only when needed)
  bulk.py           what a hot hit read last time, checked again in one system call (kept values, frames)
  memcache.py       gdb's whole-memory cache while the libraries load (spawn.py sets it), taken away at the first hit
"""
try:
    import gdb  # type: ignore[import-not-found]  # noqa: F401
except ImportError:  # outside gdb: the unit tests of the gdb-free modules (pycode, reuse, keyset)
    pass
else:
    from tracer.gdb.agent import commands, unwinders

    unwinders.install()
    commands.install()
