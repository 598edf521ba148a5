"""Reading a broker's XML file safely: no DTD, no entities, a size limit, line numbers kept.

Expat (the parser under `xml.etree`) is driven directly so that a `<!DOCTYPE` is refused
before any entity can be declared (a billion-laughs file or an external entity never expands),
and so that every element keeps the line it starts on for the one-line notes. Namespaces are
resolved and dropped from the names: Artemis (`urn:activemq:core`), ActiveMQ Classic
(`http://activemq.apache.org/schema/core`) and Spring (`.../schema/beans`) elements are then
found by their local names, with the namespace kept for the root check.
"""
from __future__ import annotations

import os
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

MAX_BYTES = 16 * 1024 * 1024  # real broker configurations are tens of KiB


class ImportFailed(Exception):
    """The file as a whole cannot be read: one line, exit 2."""


@dataclass(eq=False)
class Node:
    tag: str                   # local name
    namespace: str
    attrib: dict[str, str]     # local attribute names
    line: int
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def child(self, tag: str) -> Node | None:
        return next((c for c in self.children if c.tag == tag), None)

    def all(self, tag: str) -> list[Node]:
        return [c for c in self.children if c.tag == tag]

    def child_text(self, tag: str) -> str | None:
        c = self.child(tag)
        return c.text.strip() if c is not None else None

    def label(self) -> str:
        """How a note names the element: `<divert name="x">`."""
        for key in ("name", "match", "physicalName", "queue", "topic", "username", "type", "uri"):
            if key in self.attrib:
                return f'<{self.tag} {key}="{self.attrib[key]}">'
        return f"<{self.tag}>"


class _Refused(Exception):
    pass


def parse_file(path: Path) -> Node:
    """The root element of `path`, or ImportFailed naming the file and what is wrong."""
    try:
        size = os.stat(path).st_size
        if size > MAX_BYTES:
            raise ImportFailed(f"{path}: {size} bytes is more than a broker configuration "
                               f"({MAX_BYTES // (1024 * 1024)} MiB at most); not read")
        data = path.read_bytes()
    except OSError as e:
        raise ImportFailed(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:  # grew since stat
        raise ImportFailed(f"{path}: more than {MAX_BYTES // (1024 * 1024)} MiB; not read")
    return parse_bytes(data, str(path))


def parse_bytes(data: bytes, name: str) -> Node:
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    stack: list[Node] = []
    texts: list[list[str]] = []
    root: list[Node] = []

    def refuse(*_args):
        raise _Refused("has a DTD (<!DOCTYPE>); DTDs and entities are refused")

    def start(qname: str, attrs: dict):
        ns, _, local = qname.rpartition(" ")
        node = Node(local, ns, {k.rpartition(" ")[2]: v for k, v in attrs.items()},
                    parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(node)
        else:
            root.append(node)
        stack.append(node)
        texts.append([])

    def end(_qname: str):
        node = stack.pop()
        node.text = "".join(texts.pop())

    def chars(data: str):
        if texts:
            texts[-1].append(data)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(data, True)
    except _Refused as e:
        raise ImportFailed(f"{name}: {e}") from None
    except xml.parsers.expat.ExpatError as e:
        raise ImportFailed(f"{name}: not well-formed XML: {xml.parsers.expat.ErrorString(e.code)} "
                           f"at line {e.lineno}, column {e.offset}") from None
    if not root:
        raise ImportFailed(f"{name}: no root element")
    return root[0]
