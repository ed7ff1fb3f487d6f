"""Renderers of a loaded session: markdown, the JSON contract, folded stacks, and distinct call paths."""

FORMATS = ("markdown", "json", "folded", "speedscope")


def render(session, fmt: str = "markdown", all_frames: bool = False, finder=None, trust=None) -> str:
    """``session`` in ``fmt``. Modules are imported on demand to keep the CLI's start-up light.
    ``finder`` (a ``tracer.sources.SourceFinder``) gives frames without DWARF their sources;
    ``trust`` (``local_files.SourceTrust``) says which native sources named by frames may be quoted."""
    if fmt == "markdown":
        from tracer.export import markdown

        return markdown.render(session, all_frames=all_frames, finder=finder, trust=trust)
    if fmt == "json":
        from tracer.export import json as json_export

        return json_export.render(session, finder=finder)
    if fmt == "folded":
        from tracer.export import folded

        return folded.render(session, all_frames=all_frames)
    if fmt == "speedscope":
        from tracer.export import speedscope

        return speedscope.render(session, all_frames=all_frames)
    raise ValueError(f"unknown export format {fmt!r}")


def write(session, out, fmt: str = "markdown", all_frames: bool = False, finder=None, trust=None) -> None:
    """``render`` into the text file ``out``; JSON as it is made, a batch of hits at a time (a million
    hits are a hundred MB of it)."""
    if fmt == "json":
        from tracer.export import json as json_export

        json_export.write(session, out, finder=finder)
        return
    out.write(render(session, fmt, all_frames=all_frames, finder=finder, trust=trust))
