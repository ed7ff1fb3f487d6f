"""A session's hits as columns: a million hits of a hot breakpoint in ~20 MB, each a ``Hit`` when asked for.

A hit is its number, its time and its *site*: what it shares with the other hits of a hot loop (its
breakpoint, thread and call path, and the rare extras of one hit: a crash's signal, a parallel worker's
launcher). The table keeps three numbers a hit and each distinct site once; ``table[i]`` builds the
``Hit``. What a hit carried that changes from hit to hit (``Varying``: data pointers, a small tensor's
values) is a fourth column, only in a table that has some, and is merged into the hit's values when asked. It is a ``Sequence`` of hits, so code written for a list of them works unchanged; what groups
hits by call path asks for ``site_counts`` instead and does its work once a site, not once a hit.
"""
from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Iterable, Iterator

from tracer.session.model import Frame, FrameValues, Hit, Launch, Thread, Varying


@dataclass(slots=True)
class Site:
    """What the hits of one site share. ``frames`` is shared with every other site of the same stack."""

    breakpoint: str | None
    thread: Thread
    frames: list[Frame]
    truncated: bool = False
    signal: str | None = None
    launched_by: Launch | None = None
    values: tuple[FrameValues, ...] | None = None  # what its frames carried (shared by its hits)

    def hit(self, seq: int, time: float) -> Hit:
        return Hit(seq, self.breakpoint, self.thread, time, self.frames, self.truncated, self.signal,
                   self.launched_by, self.values)


def _launch_key(launch: Launch | None) -> tuple | None:
    if launch is None:
        return None
    t = launch.thread
    thread = (t.id, t.name, t.lwp, t.python_name) if t is not None else None
    return (thread, id(launch.frames), launch.why)


class HitTable(Sequence[Hit]):
    """The hits of a session in the order they were recorded (by ``seq`` once ``sort`` ran)."""

    def __init__(self, hits: Iterable[Hit] = ()) -> None:
        self.seqs = array("q")
        self.times = array("d")
        self.rows = array("i")  # each hit's index in ``sites``
        self.sites: list[Site] = []
        self._site_index: dict[tuple, int] = {}
        self.vary: array | None = None  # per hit: 1 + its index in ``varyings``, 0 for none; None: no hit has any
        self.varyings: list[Varying] = []
        self._varying_index: dict[int, int] = {}  # id(Varying) -> its index
        self._merged: dict[int, tuple[FrameValues, ...]] = {}  # index in varyings -> its merge (the latest few)
        self.extend(hits)

    # --- building ------------------------------------------------------------------------------
    def site(self, breakpoint: str | None, thread: Thread, frames: list[Frame], truncated: bool = False,
             signal: str | None = None, launched_by: Launch | None = None,
             values: tuple[FrameValues, ...] | None = None) -> int:
        """The index of this site, added if new. Threads, frame lists and values are told apart by
        identity (the loader shares one object between the hits that have the same), the rest by value."""
        key = (breakpoint, id(thread), id(frames), truncated, signal, _launch_key(launched_by),
               id(values) if values else None)
        index = self._site_index.get(key)
        if index is None:
            index = self._site_index[key] = len(self.sites)
            self.sites.append(Site(breakpoint, thread, frames, truncated, signal, launched_by, values or None))
        return index

    def add(self, seq: int, time: float, site: int, varying: Varying | None = None) -> None:
        self.seqs.append(seq)
        self.times.append(time)
        self.rows.append(site)
        if varying is not None:
            index = self._varying_index.get(id(varying))
            if index is None:
                index = self._varying_index[id(varying)] = len(self.varyings)
                self.varyings.append(varying)
            if self.vary is None:
                self.vary = array("i", bytes(4 * (len(self.rows) - 1)))
            self.vary.append(index + 1)
        elif self.vary is not None:
            self.vary.append(0)

    def append(self, hit: Hit) -> int:
        """Add a hit; returns its site's index."""
        varying = hit.varying
        site = self.site(hit.breakpoint, hit.thread, hit.frames, hit.truncated, hit.signal, hit.launched_by,
                         varying.shared if varying is not None else hit.values)
        self.add(hit.seq, hit.time, site, varying)
        return site

    def extend(self, hits: Iterable[Hit]) -> None:
        for hit in hits:
            self.append(hit)

    def __iadd__(self, hits: Iterable[Hit]) -> "HitTable":
        self.extend(hits)
        return self

    def sort(self) -> None:
        """In ``seq`` order (hits are written in that order; only a file edited by hand is not)."""
        seqs = self.seqs
        listed = seqs.tolist()
        if listed == sorted(listed):  # C speed, unlike a comparison of neighbours in Python
            return
        order = sorted(range(len(seqs)), key=seqs.__getitem__)
        self.seqs = array("q", (seqs[i] for i in order))
        self.times = array("d", (self.times[i] for i in order))
        self.rows = array("i", (self.rows[i] for i in order))
        if self.vary is not None:
            self.vary = array("i", (self.vary[i] for i in order))

    # --- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        hit = self.sites[self.rows[index]].hit(self.seqs[index], self.times[index])
        if self.vary is not None and self.vary[index]:
            self._own_values(hit, self.vary[index] - 1)
        return hit

    def __iter__(self) -> Iterator[Hit]:
        if self.vary is not None:
            for i in range(len(self)):
                yield self[i]
            return
        sites = self.sites
        for seq, time, row in zip(self.seqs, self.times, self.rows):
            yield sites[row].hit(seq, time)

    _MERGED_KEPT = 1024  # merges kept: a view asks for the same few hits again and again

    def _own_values(self, hit: Hit, index: int) -> None:
        """The hit's values with what changes from hit to hit put back (``Varying.merged``), and its
        ``varying`` kept, so that a table it is appended to stores it apart again."""
        merged = self._merged.get(index)
        varying = self.varyings[index]
        if merged is None:
            if len(self._merged) >= self._MERGED_KEPT:
                self._merged.clear()
            merged = self._merged[index] = varying.merged()
        hit.values, hit.varying = merged, varying

    def varying_of(self, index: int) -> int | None:
        """The index in ``varyings`` of hit ``index``'s own values, None if it has none."""
        return self.vary[index] - 1 if self.vary is not None and self.vary[index] else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (HitTable, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<HitTable of {len(self):,} hits at {len(self.sites):,} sites>"

    def site_counts(self) -> dict[int, int]:
        """How many hits each site has, the sites in the order of their first hit."""
        return dict(Counter(self.rows))

    def first_rows(self, sites: Iterable[int]) -> dict[int, int]:
        """The row of the first hit of each of ``sites`` (that has one)."""
        want = set(sites)
        out: dict[int, int] = {}
        for i, row in enumerate(self.rows):
            if row in want and row not in out:
                out[row] = i
                if len(out) == len(want):
                    break
        return out

    def frame_lists(self) -> list[list[Frame]]:
        """Each distinct list of frames once: the sites' stacks and their launchers'."""
        out: dict[int, list[Frame]] = {}
        for site in self.sites:
            out.setdefault(id(site.frames), site.frames)
            if site.launched_by is not None:
                out.setdefault(id(site.launched_by.frames), site.launched_by.frames)
        return list(out.values())

    def where(self, keep_site) -> "HitTable":
        """The hits whose site passes ``keep_site(site)``, sharing this table's sites."""
        out = HitTable()
        out.sites, out._site_index = list(self.sites), dict(self._site_index)
        out.varyings, out._varying_index = list(self.varyings), dict(self._varying_index)
        keep = {i for i, s in enumerate(self.sites) if keep_site(s)}
        if len(keep) == len(self.sites):
            out.seqs, out.times, out.rows = array("q", self.seqs), array("d", self.times), array("i", self.rows)
            out.vary = array("i", self.vary) if self.vary is not None else None
            return out
        if self.vary is not None:
            out.vary = array("i")
        for i, (seq, time, row) in enumerate(zip(self.seqs, self.times, self.rows)):
            if row in keep:
                out.seqs.append(seq)
                out.times.append(time)
                out.rows.append(row)
                if out.vary is not None and self.vary is not None:
                    out.vary.append(self.vary[i])
        return out


class SiteHits(Sequence):
    """The hits of a table that are at some of its sites (one call path's), in table order, read on demand."""

    def __init__(self, table: HitTable, sites: set[int], count: int) -> None:
        self.table = table
        self.site_ids = sites
        self._count = count

    def __len__(self) -> int:
        return self._count

    def _rows(self) -> Iterator[int]:
        sites = self.site_ids
        for i, row in enumerate(self.table.rows):
            if row in sites:
                yield i

    def __iter__(self) -> Iterator[Hit]:
        table = self.table
        for i in self._rows():
            yield table[i]

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            out = []
            for n, i in enumerate(self._rows()):
                if n >= stop:
                    break
                if n >= start and (n - start) % step == 0:
                    out.append(self.table[i])
            return out
        if index < 0:
            index += self._count
        for n, i in enumerate(self._rows()):
            if n == index:
                return self.table[i]
        raise IndexError(index)
