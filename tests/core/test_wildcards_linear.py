"""Wildcard matching costs O(address words): a hostile 600 KB name against `#.#` must not freeze
the event loop. The big cases run in a subprocess with a deadline, so a quadratic matcher fails
the test (minutes of work) instead of hanging the suite; the bound is for correctness, not speed."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from hermod.broker.core.wildcards import matches

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("pattern, address, expected", [
    ("news.#", "news", True),
    ("news.#", "news.eu.sport", True),
    ("news.>", "news.eu", True),
    ("news.*", "news", False),
    ("news.*", "news.eu", True),
    ("news.*", "news.eu.sport", False),
    ("a.#.d", "a.d", True),
    ("a.#.d", "a.b.c.d", True),
    ("a.#.d", "a.b.c.e", False),
    ("#.#", "a.b", True),
    ("#", "", True),
    ("*.#.*", "a", False),
    ("*.#.*", "a.b", True),
    ("a.b*", "a.bc", False),
    ("a.b*", "a.b*", True),
    ("#.b.#.c", "a.b.x.b.c", True),
])
def test_wildcard_semantics_are_kept(pattern, address, expected):
    assert matches(pattern, address) is expected


def _run(code: str, timeout: float = 30) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_hash_hash_against_a_600_kb_name_completes():
    # 300,000 words: a quadratic matcher does ~10^11 steps here.
    out = _run("""
        from hermod.broker.core.wildcards import matches
        name = ".".join(["a"] * 300_000)
        print(matches("#.#", name), matches("#.#.b", name), matches("a.#.a", name),
              matches("*.#.*.a", name), matches("#.b.#", name + ".b.c"))
    """)
    assert out == "True False True True True"


def test_long_patterns_against_long_names_complete():
    # A pattern as long as a name may be (1,024 bytes) against a 600 KB name.
    out = _run("""
        from hermod.broker.core.wildcards import matches
        name = ".".join(["a"] * 300_000)
        pattern = ".".join(["#", "a"] * 256)
        print(matches(pattern, name), matches(pattern + ".b", name))
    """)
    assert out == "True False"
