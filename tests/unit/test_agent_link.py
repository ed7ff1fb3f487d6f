"""The agent's answers as typed values: an unreadable status is an AgentError, never an empty answer
(so that --max-hits cannot be missed). A stand-in for gdb answers as gdb's MI would (pure logic)."""
from __future__ import annotations

import pytest

from tracer.gdb.mi import GdbCommandError, MiResult
from tracer.recorder.agent_link import AgentError, AgentLink


class Answers:
    """Answers console commands with the given text, or raises what gdb's connection would."""

    def __init__(self, console: list[str] | None = None, error: Exception | None = None):
        self.console_text = console or []
        self.error = error

    def console(self, command, timeout=30.0, check=True):
        if self.error:
            raise self.error
        return MiResult(1, "done", {}, list(self.console_text))


def test_status_is_read_into_its_fields():
    link = AgentLink(Answers(['{"hits": 7, "mode": "record", "need_libs": ["/l/a.so"], "stop": false, '
                              '"write_error": null, "stack_reuse": {"enabled": true}}\n']))
    status = link.status()
    assert status.hits == 7 and status.need_libs == ("/l/a.so",) and not status.stop and status.write_error is None


@pytest.mark.parametrize("answer", [[], ["not json\n"], ['{"mode": "record"}\n'], ['[1, 2]\n']])
def test_an_unreadable_status_is_an_error_not_nothing(answer):
    with pytest.raises(AgentError):
        AgentLink(Answers(answer)).status()


def test_a_timeout_is_an_agent_error():
    with pytest.raises(AgentError, match="pttrace-status"):
        AgentLink(Answers(error=GdbCommandError("gdb did not answer `-interpreter-exec` within 10 s."))).status()
