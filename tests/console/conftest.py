"""Fixtures for the console tests: one headless Chromium for the module (starting it costs a
second), a broker per test with its HTTP listener, and the HTTP helpers of tests/http."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "http"))  # http_helpers

from webdriver import Browser  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.quit()
