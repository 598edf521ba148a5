"""Shell completion and the man page come from the CLI's own parser (issue 33, item 2), so a
new command or option shows up in both; the completion runs in a real bash, the page in groff."""
from __future__ import annotations

import subprocess
import sys

from hermod.broker.cli import build_parser
from hermod.broker.cli_docs import commands


def hermod(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def complete(script: str, *words: str) -> list[str]:
    words_text = " ".join(f"'{w}'" for w in words)
    program = f'{script}\nCOMP_WORDS=({words_text}); COMP_CWORD={len(words) - 1}; _hermod; printf "%s\\n" "${{COMPREPLY[@]}}"'
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completion_follows_the_parser():
    script = hermod("completion", "bash")
    assert set(complete(script, "hermod", "")) == set(build_parser()._subparsers._group_actions[0].choices)
    assert complete(script, "hermod", "queue", "st") == ["stat"]
    assert "--password-file" in complete(script, "hermod", "queue", "purge", "--pass")
    assert complete(script, "hermod", "config", "") == ["check"]


def test_the_man_page_names_every_command_and_renders_cleanly():
    page = hermod("manpage")
    assert page.startswith(".TH HERMOD 1")
    for path, parser, _ in commands(build_parser()):
        if path and not any(a.__class__.__name__ == "_SubParsersAction" for a in parser._actions):
            assert f'.SS "hermod {" ".join(path)}"' in page, path
    assert "HERMOD_URL" in page and "EXIT STATUS" in page
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=page, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
