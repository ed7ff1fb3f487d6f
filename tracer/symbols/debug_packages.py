"""What to do about a library (or executable) whose frames have no name: its separate debug file, and, on
Debian, whether apt knows a package that holds it. Asked once per such library of a session, at the session
tailer, never at a hit: ``dpkg-query -S`` and ``apt-cache show`` take 0.4 s and 1 s here (apt's lists are lz4),
so an answer is kept in the cache directory, keyed by the file's build-id and the dates of dpkg's and apt's
databases (an install or an ``apt-get update`` asks again).

Debian names a debug package ``PKG-dbgsym`` (the debian-debug archive) or, for some sources, ``PKG-dbg`` /
``SOURCE-dbg`` (python3.11's is ``python3.11-dbg``); apt's ``Build-Ids`` field lists the build-ids whose debug
files a package holds. Only a package whose list names this file's build-id is said to hold its symbols.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from tracer import elfparts
from tracer.settings import cache_dir, write_cache_file

_DPKG_STATUS = "/var/lib/dpkg/status"
_APT_LISTS = "/var/lib/apt/lists"
_TIMEOUT = 20  # seconds: a locked or broken apt answers nothing, and the advice says less


@dataclass(frozen=True)
class DebugAdvice:
    path: str
    build_id: str | None
    package: str | None = None  # the Debian package that installed the file
    version: str | None = None  # its installed version
    holder: str | None = None  # an apt package whose Build-Ids name this build-id: "name=version"
    other: str | None = None  # an apt debug package of the same source, for another version: "name=version"
    looked_for: tuple[str, ...] = ()  # the debug packages asked of apt

    def what_to_do(self, interpreter: bool) -> str:
        """The sentence after "…have no name": concrete steps, each one checked here."""
        steps = []
        if self.holder:
            steps.append(f"`apt-get install {self.holder}` installs its debug symbols (its Build-Ids name this "
                         f"file's build-id {self.build_id})")
        elif self.other and self.package and self.version:
            name, version = self.other.split("=", 1)
            steps.append(f"apt has {self.other}, whose debug files are for its source's packages at {version}: "
                         f"this file's build-id {self.build_id} (of {self.package.split(':')[0]} {self.version}) is "
                         f"not among them; `apt-get install {self.package}={version} {name}={version}` brings both "
                         f"to {version}")
        elif self.package and self.looked_for:
            steps.append(f"apt here knows no debug package for {self.package.split(':')[0]} {self.version} (looked for "
                         f"{', '.join(self.looked_for)})")
        if self.build_id:
            steps.append(f"a debug file of build-id {self.build_id} in DIR/.build-id/{self.build_id[:2]}/"
                         f"{self.build_id[2:]}.debug is read with `--debug-dir DIR`")
        else:
            steps.append("it has no build-id: its debug file is looked for by its .gnu_debuglink name (if it has "
                         "one) beside it, in its .debug/ and under each `--debug-dir DIR`")
        if interpreter:
            steps.append("or `--python` an interpreter built from source with debug info (pyenv's builds keep "
                         "their DWARF)")
        return "; ".join(steps)


def debug_advice(path: str) -> DebugAdvice:
    """What is known here of the debug symbols of the ELF file ``path`` (never raises)."""
    real = os.path.realpath(path)
    build_id = elfparts.file_build_id(real)
    stamp = _stamp()
    cached = cache_dir() / "debug-advice" / f"{build_id or 'none'}-{stamp}.json"
    if build_id and stamp:
        try:
            data = json.loads(cached.read_text())
            if data.get("path") == path:
                return DebugAdvice(**{**data, "looked_for": tuple(data.get("looked_for") or ())})
        except (OSError, ValueError, TypeError):
            pass
    advice = _ask_debian(path, real, build_id)
    if build_id and stamp:
        write_cache_file(cached, json.dumps(asdict(advice)), "advice-")
    return advice


def _stamp() -> str:
    try:
        lists = max((e.stat().st_mtime_ns for e in os.scandir(_APT_LISTS) if e.is_file()), default=0)
        return f"{os.stat(_DPKG_STATUS).st_mtime_ns:x}-{lists:x}"
    except OSError:
        return ""


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT,
                              env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _ask_debian(path: str, real: str, build_id: str | None) -> DebugAdvice:
    if not shutil.which("dpkg-query"):
        return DebugAdvice(path, build_id)
    # merged /usr: a file of /lib may be registered under /usr/lib, or the other way round
    names = [p for f in (path, real) for p in (f, f[4:] if f.startswith("/usr/") else "/usr" + f)]
    package = None
    for line in _run(["dpkg-query", "-S", *dict.fromkeys(names)]).splitlines():
        if ": " in line and not line.startswith(("dpkg-query", "diversion by ")):
            package = line.split(": ", 1)[0].split(",")[0].strip()
            break
    if package is None:
        return DebugAdvice(path, build_id)
    facts = _run(["dpkg-query", "-W", "-f", "${Version}\t${source:Package}\n", package]).split("\n")[0].split("\t")
    version = facts[0] or None
    source = facts[1] if len(facts) > 1 and facts[1] else package.split(":")[0]
    name = package.split(":")[0]
    looked = tuple(dict.fromkeys([f"{name}-dbgsym", f"{name}-dbg", f"{source}-dbg"]))
    holder = other = None
    if shutil.which("apt-cache"):
        offered, versions = [], set()  # the debug packages apt has; the versions of the file's own package
        for stanza in _run(["apt-cache", "show", name, *looked]).split("\n\n"):
            fields = _fields(stanza)
            if fields.get("Package") == name and "Version" in fields:
                versions.add(fields["Version"])
            elif fields.get("Package") in looked and "Version" in fields:
                offered.append(fields)
        for fields in offered:
            pair = f"{fields['Package']}={fields['Version']}"
            if build_id and build_id in fields.get("Build-Ids", "").split():
                holder = holder or pair
            elif (fields.get("Source", fields["Package"]).split()[0] == source and fields.get("Build-Ids")
                  and fields["Version"] in versions):  # that version of the file's package is there to install
                other = other or pair
    return DebugAdvice(path, build_id, package, version, holder, None if holder else other, looked)


def _fields(stanza: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in stanza.splitlines():
        if line[:1] not in (" ", "\t") and ":" in line:
            key, value = line.split(":", 1)
            out[key] = value.strip()
    return out
