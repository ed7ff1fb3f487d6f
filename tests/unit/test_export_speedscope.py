"""``pttrace export --format speedscope``: speedscope's own file format, checked against the schema
speedscope publishes (its npm package's ``file-format-schema.json``, fetched by scripts/setup.sh's
test step) and against the sessions' own hits: one profile per process and thread, every hit counted
once, every sample's frames the hit's path."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.unit.export_support import clone_hit, hit_by_breakpoint, load_sigmoid
from tracer.cli import main
from tracer.export import paths as P
from tracer.export import speedscope
from tracer.session import storage

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / ".cache" / "speedscope" / "file-format-schema.json"
EXAMPLES = sorted((ROOT / "sessions").glob("example-*.jsonl"))


def schema() -> dict:
    assert SCHEMA.is_file(), f"{SCHEMA} is missing: run `python scripts/fetch_speedscope_schema.py` (scripts/test.sh does)"
    return json.loads(SCHEMA.read_text())


def check_against_hits(doc: dict, session) -> None:
    """Every hit is in the profile of its thread, once, with its own visible frames, in recorded order."""
    jsonschema.validate(doc, schema())
    frames = doc["shared"]["frames"]
    by_thread: dict[tuple, list] = {}
    for hit in session.hits:
        by_thread.setdefault((hit.thread.pid, hit.thread.id, hit.thread.lwp), []).append(hit)
    assert len(doc["profiles"]) == len(by_thread)
    for profile, hits in zip(doc["profiles"], by_thread.values()):
        assert len(profile["samples"]) == len(profile["weights"])
        assert profile["endValue"] == sum(profile["weights"]) == len(hits)
        expanded = [s for s, w in zip(profile["samples"], profile["weights"]) for _ in range(w)]
        for sample, hit in zip(expanded, hits):
            names = [frames[i]["name"] for i in sample]
            want = [" ".join(P.frame_label(f, session.info.cwd).split()) for f in P.visible_frames(hit.frames)]
            assert names == want


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_real_example_session_is_a_valid_speedscope_file(path):
    session = storage.load(path)
    doc = json.loads(speedscope.render(session))
    check_against_hits(doc, session)
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"


def test_repeated_hits_of_one_path_are_one_sample_with_their_count():
    s = load_sigmoid()
    sig = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    s.hits += [clone_hit(sig, 100 + i) for i in range(5)]
    doc = speedscope.document(s)
    check_against_hits(doc, s)
    weights = doc["profiles"][0]["weights"]
    assert weights[-1] == 5, weights  # the five clones follow one another


def test_a_python_frame_carries_its_file_and_line():
    s = load_sigmoid()
    doc = speedscope.document(s)
    module = next(f for f in doc["shared"]["frames"] if f["name"].startswith("<module>"))
    assert module["file"] == "scripts/hello-world.py" and isinstance(module["line"], int)


def test_the_command_writes_it_by_format_or_by_suffix(tmp_path, capsys):
    out = tmp_path / "hello.speedscope.json"
    assert main(["export", str(EXAMPLES[0]), "-o", str(out)]) == 0
    jsonschema.validate(json.loads(out.read_text()), schema())
    assert main(["export", str(EXAMPLES[0]), "--format", "speedscope"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), schema())
