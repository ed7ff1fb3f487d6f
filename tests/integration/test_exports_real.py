"""The markdown and JSON of a real recording (hello-world.py on the release wheel), checked structurally
against what pttrace did not write: torch's own commit (``torch.version.git_version``), the files the wheel
ships (each link's line read in the file it names), the script's own lines, and the session file the
recorder wrote (every hit, every frame, nothing lost on the way to JSON or markdown)."""
from __future__ import annotations

import json
import linecache
import re
from pathlib import Path

import pytest

from tests.conftest import PYTHON, run_pttrace
from tests.support import run_child

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

LINK = re.compile(r"\[`([^`]+):(\d+)`\]\((https://github\.com/pytorch/pytorch/blob/([0-9a-f]{40})/([^)#]+)#L(\d+))\)")
ROW = re.compile(r"^\| (\d+) \| (\w+) \| `([^`]*)` \| ([^|]*) \| ([^|]*) \| (.*) \|$")
# Where the wheel keeps the files the repository keeps elsewhere (the rest keep their repository path).
WHEEL_TO_REPO = [("torchgen/packaged/ATen/", "aten/src/ATen/"), ("torchgen/packaged/autograd/", "tools/autograd/"),
                 ("torch/include/ATen/", "aten/src/ATen/"), ("torch/include/c10/", "c10/"),
                 ("torch/include/torch/csrc/", "torch/csrc/")]


@pytest.fixture(scope="module")
def torch_facts() -> dict:
    """The test venv's torch, asked directly: its commit and where it is installed."""
    code = ("import json, os, torch; print(json.dumps({'commit': torch.version.git_version, "
            "'site': os.path.dirname(os.path.dirname(torch.__file__))}))")
    out = run_child([PYTHON, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def exported(hello_recording, tmp_path_factory) -> tuple[str, dict]:
    _, session = hello_recording
    out = tmp_path_factory.mktemp("export") / "notes.md"
    proc = run_pttrace("export", str(session.path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    proc = run_pttrace("export", str(session.path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return out.read_text(), json.loads(proc.stdout)


def _stack(data: dict, hit: dict) -> list[dict]:
    return [data["frames"][i] for i in data["stacks"][hit["stack"]]]


def test_the_json_holds_every_hit_and_frame_the_recorder_wrote(hello_recording, exported):
    _, session = hello_recording
    _, data = exported
    assert data["schema"] == 2 and data["session"]["id"] == session.info.id
    # every hit, in order, each naming a stack whose every index names a frame
    assert [h["seq"] for h in data["hits"]] == [h.seq for h in session.hits] == list(range(1, len(session.hits) + 1))
    assert all(0 <= i < len(data["frames"]) for stack in data["stacks"] for i in stack)
    for hit, recorded in zip(data["hits"], session.hits):
        assert hit["breakpoint"] == recorded.breakpoint and hit["thread"]["lwp"] == recorded.thread.lwp
        ours = [(f["kind"], f["function"], f["file"], f["line"], f["layer"], f["dispatch_key"])
                for f in _stack(data, hit)]
        assert ours == [(f.kind, f.function, f.file, f.line, f.layer, f.dispatch_key) for f in recorded.frames]
    # each breakpoint's count is the number of its hits
    counts = {b["spec"]: b["hits"] for b in data["breakpoints"]}
    assert counts == {spec: sum(h["breakpoint"] == spec for h in data["hits"]) for spec in counts}
    # every Python frame's source is the line its file has there (the file, not pttrace, says so)
    # (frozen modules, "<frozen importlib._bootstrap>", have no file to read)
    python = [f for f in data["frames"] if f["kind"] == "python" and not f["file"].startswith("<")]
    assert len(python) >= 10
    for f in python:
        path = Path(session.info.cwd) / f["file"]  # (an absolute file stays itself)
        assert f["source"] == linecache.getline(str(path), f["line"]).strip(), (f["file"], f["line"])


def _sections(md: str) -> list[str]:
    """Each '### Path N' section, up to the next heading of any level."""
    return re.findall(r"^### Path \d+: .*?(?=^#{2,3} |\Z)", md, re.M | re.S)


def test_every_path_of_the_markdown_is_its_hits_frames(exported):
    md, data = exported
    by_seq = {h["seq"]: h for h in data["hits"]}
    sections = _sections(md)
    assert sections
    shown = 0  # the hits the sections say they hold: together, every hit
    for section in sections:
        m = re.search(r"^breakpoint `([^`]+)` · .* · hit #(\d+) · (\d+) frames folded$", section, re.M)
        assert m, section[:300]
        hit = by_seq[int(m.group(2))]
        assert hit["breakpoint"] == m.group(1)
        shown += int(re.search(r"\((\d+) hits?\)", section.splitlines()[0]).group(1))
        stack = _stack(data, hit)
        table = section.split("| # | layer |", 1)[1].split("\n\n", 1)[0]
        rows = [ROW.match(line) for line in table.splitlines()[2:]]
        assert all(rows), table
        # every frame is a row or folded, the rows numbered in order, outermost first
        assert len(rows) + int(m.group(3)) == len(stack)
        assert [int(r.group(1)) for r in rows] == list(range(1, len(rows) + 1))
        names = [(f["short"] if f["kind"] == "native" else f["function"], f) for f in stack]
        position = 0
        for row in rows:
            while position < len(names) and names[position][0] != row.group(3):
                position += 1
            assert position < len(names), f"row {row.group(1)} {row.group(3)} is not a frame of hit {hit['seq']}"
            frame = names[position][1]
            # each hop's layer and dispatch key are the frame's
            assert row.group(2) == frame["layer"], row.group(0)
            assert row.group(4).strip() == (frame["dispatch_key"] or ""), row.group(0)
            position += 1
        assert rows[-1].group(3) == names[-1][0]  # the innermost frame, the one the breakpoint is on
    assert shown == len(data["hits"])


def test_every_link_is_at_torchs_commit_and_its_line_is_in_the_file_it_names(exported, torch_facts):
    md, _ = exported
    links = LINK.findall(md)
    assert len(links) > 50
    site = Path(torch_facts["site"])
    for text_path, text_line, url, commit, repo_path, url_line in set(links):
        assert commit == torch_facts["commit"], url
        assert text_line == url_line, url
        # the link names the repository's path of the file the wheel holds
        local = site / text_path
        if not local.is_file():  # the script itself, shown relative to the working directory
            continue
        expected = next((repo + text_path[len(wheel):] for wheel, repo in WHEEL_TO_REPO if text_path.startswith(wheel)),
                        text_path)
        assert repo_path == expected, url
        line = linecache.getline(str(local), int(url_line))
        assert line.strip(), f"{url}: line {url_line} of {local} is empty or past its end"
        if local.suffix == ".yaml":
            assert line.startswith(("- func: ", "- name: ")), (url, line)


def test_the_sigmoid_kernel_links_to_its_entry_in_the_packaged_yaml(exported, torch_facts):
    md, _ = exported
    yaml = Path(torch_facts["site"]) / "torchgen" / "packaged" / "ATen" / "native" / "native_functions.yaml"
    entry = yaml.read_text().splitlines().index("- func: sigmoid(Tensor self) -> Tensor") + 1
    row = next(line for line in md.splitlines() if "| `at::wrapper_CPU_sigmoid` |" in line)
    assert f"[`torchgen/packaged/ATen/native/native_functions.yaml:{entry}`](https://github.com/pytorch/pytorch/blob/" \
           f"{torch_facts['commit']}/aten/src/ATen/native/native_functions.yaml#L{entry})" in row
