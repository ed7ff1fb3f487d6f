"""``--eval EXPR``: gdb expressions evaluated at every hit in the frame stopped in, on the -g -O0 debug
extension: each hit's own argument, an error recorded as an error while the run goes on, a call into
the target refused with its reason; shown by ``show``, the markdown and JSON exports and the TUI."""
from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_pttrace
from tests.tui.support import run_pilot, wait_until
from tracer.session import storage

pytestmark = [pytest.mark.gdb]

CALLS = 3


@pytest.fixture(scope="module")
def evals_run(debug_ext, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evals")
    code = (f"import os, torch; torch.ops.load_library({str(debug_ext)!r}); a = torch.arange(4, dtype=torch.float32); "
            f"[torch.ops.pttrace_demo.scale_add(a, a, float(i)) for i in range({CALLS})]; print('PID', os.getpid())")
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp), "-b", "pttrace_demo::scale_add_cpu",
                       "--eval", "alpha", "--eval", "no_such_name", "--eval", "(int)getpid()", "-c", code)
    assert proc.returncode == 0, proc.stderr
    [path] = tmp.glob("*.jsonl")
    return proc, path, storage.load(path)


def test_each_hit_has_its_own_values_in_the_frame_it_stopped_in(evals_run):
    proc, _, session = evals_run
    pid = re.search(r"PID (\d+)", proc.stdout).group(1)
    assert sorted(session.evals) == [h.seq for h in session.hits] and len(session.hits) == CALLS
    for n, seq in enumerate(sorted(session.evals)):
        alpha, missing, getpid = session.evals[seq]
        assert (alpha.expr, alpha.text, alpha.error) == ("alpha", str(n), None)  # the kernel's own argument
        assert missing.text is None and "No symbol \"no_such_name\"" in missing.error  # recorded, run went on
        # a call into the target from inside the breakpoint's stop is refused, said as such (it hung a run)
        assert getpid.text is None and getpid.error.startswith("not evaluated: it calls a function")
    assert pid  # the target ran to its end


def test_show_markdown_and_json_carry_them(evals_run):
    _, path, session = evals_run
    shown = run_pttrace("show", str(path)).stdout
    assert "evaluated at each hit (--eval), 3 hits" in shown
    assert "alpha = 2" in shown and 'no_such_name: error: No symbol "no_such_name"' in shown
    md = run_pttrace("export", str(path), "-o", "-").stdout
    assert "## Evaluated at each hit (`--eval`)" in md
    assert re.search(r"^\| #\d+ \| `1` \| error: No symbol", md, re.M), md
    doc = json.loads(run_pttrace("export", str(path), "--format", "json", "-o", "-").stdout)
    got = [[v.get("text", v.get("error")) for v in h["evals"]][0] for h in doc["hits"]]
    assert got == ["0", "1", "2"]


def test_the_tui_shows_the_selected_hits_values(evals_run):
    from tracer.tui.app import make_app
    from tracer.tui.sources import SessionSource

    _, path, _ = evals_run

    async def scenario():
        app = make_app(SessionSource.open(path))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.state.finished and app.call_path.hit is not None
                             and "alpha = " in (app.call_path.border_subtitle or ""), timeout=30)
            seq = app.call_path.hit.seq
            assert f"alpha = {seq - 1}" in app.call_path.border_subtitle
            assert "no_such_name: error:" in app.call_path.border_subtitle

    run_pilot(scenario(), timeout=60)


def test_an_empty_expression_is_bad_input(tmp_path):
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "-b", "initModule", "--eval", " ",
                       "-c", "pass")
    assert proc.returncode == 2 and "is not a gdb expression" in proc.stderr and "Traceback" not in proc.stderr
