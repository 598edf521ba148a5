"""`hermod config check FILE` (issue 33, item 2): validates without starting and names every
bad key, then what a start would refuse; exit 0 with `FILE: ok`, else one line per problem and
exit 2. Nothing listens, nothing is written."""
from __future__ import annotations

import subprocess
import sys


def check(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", "config", "check", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=path.parent)


def test_every_bad_key_is_named(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[server]\nport = "x"\nportt = 3\n[[address]]\nname = "a"\n  [[address.queue]]\n'
                    '  name = "q"\n  routing = "sideways"\n[[address_settings]]\nmatch = "#"\n'
                    'address_full_policy = "explode"\n[bogus]\n')
    r = check(path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 5, r.stderr
    for key in ("server.port:", "server.portt: unknown key", "address[0].queue[0].routing",
                "address_settings[0].address_full_policy", "bogus: unknown key"):
        assert sum(key in line for line in lines) == 1, (key, lines)
    assert all("bad.toml" in line for line in lines)
    assert r.stdout == ""


def test_what_only_a_start_finds_is_named(tmp_path):
    path = tmp_path / "ring.toml"
    path.write_text('[[divert]]\nname = "d1"\naddress = "x"\nforwarding_address = "y"\n'
                    '[[divert]]\nname = "d2"\naddress = "y"\nforwarding_address = "x"\n'
                    '[security]\naudit_log = "no-such-dir/audit.log"\n')
    r = check(path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert any("cycle" in line and "d1" in line and "d2" in line for line in lines), lines
    assert any("security.audit_log" in line for line in lines), lines
    assert not (tmp_path / "hermod-data").exists()


def test_a_good_file_is_ok_and_creates_nothing(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text('[server]\nport = 5672\n[[address]]\nname = "orders"\n  [[address.queue]]\n  name = "orders"\n'
                    '[[divert]]\nname = "d"\naddress = "orders"\nforwarding_address = "audit"\nfilter = "a > 1"\n')
    r = check(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{path}: ok"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.toml"]
