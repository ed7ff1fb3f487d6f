"""Fixtures for the TUI tests; the helpers live in ``tests/tui/support.py``."""
from __future__ import annotations

import pytest

from tests.tui.support import FIXTURE, ROOT, fake_from
from tracer.session import storage


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    # The fixture's frames name files relative to the recording's cwd (this repository).
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def fixture_session():
    return storage.load(FIXTURE)


@pytest.fixture
def fake_source(fixture_session):
    return fake_from(fixture_session)
