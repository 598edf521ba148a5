"""Writing the converted configuration as TOML (the standard library reads TOML but does not
write it). A document is a dict: a dict value is a table, a list of dicts an array of tables,
and a `"#"` key holds comment lines printed under the table's header."""
from __future__ import annotations

import json

COMMENT = "#"


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        # A JSON string with ensure_ascii=False uses only escapes TOML's basic strings have.
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def _is_tables(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _emit(out: list[str], path: str, table: dict, array: bool) -> None:
    out.append("")
    out.append(f"[[{path}]]" if array else f"[{path}]")
    for line in table.get(COMMENT, ()):
        out.append(f"# {line}")
    for key, v in table.items():
        if key != COMMENT and not isinstance(v, dict) and not _is_tables(v):
            out.append(f"{key} = {_value(v)}")
    for key, v in table.items():
        if key == COMMENT:
            continue
        if isinstance(v, dict):
            _emit(out, f"{path}.{key}", v, False)
        elif _is_tables(v):
            for item in v:
                _emit(out, f"{path}.{key}", item, True)


def dumps(doc: dict, header: list[str]) -> str:
    out = [f"# {line}" for line in header]
    for key, v in doc.items():
        if isinstance(v, dict):
            _emit(out, key, v, False)
        elif _is_tables(v):
            for item in v:
                _emit(out, key, item, True)
        elif key != COMMENT:
            raise TypeError(f"top-level {key} must be a table")
    return "\n".join(out) + "\n"
