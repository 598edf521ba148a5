"""Indexes that make wildcard binding cost what it binds, not what the broker already holds.

Binding a wildcard subscription or a divert's wildcard source pairs patterns with concrete
address names. Testing every pattern against every address makes each attach cost O(addresses)
or O(patterns); with 100,000 subscriptions on one topic tree, setting them up took hours. Two
word tries answer the two questions instead (the semantics are exactly `wildcards.matches`:
`#`/`>` zero or more words, `*` one word, partial words such as `a*` literal):

- `AddressTrie`, the concrete addresses, one node a word: which addresses does this new pattern
  match? A literal word is a dict lookup, `*` visits one level's children, `#` the subtree below.
  A pattern with a literal prefix (`news.eu.#`) touches only that branch.
- `PatternTrie`, the wildcard patterns (NATS sublist style): which patterns does this new address
  match? The address's words are read once; the live nodes are the pattern branches still
  matching, so the cost is O(address words x matching branches).

Both expose `visited`, a count of trie nodes touched, so tests can bound the work without timing
it. Memory is one node per distinct prefix: O(total words).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Generic, Hashable, TypeVar

from . import wildcards
from .wildcards import ANY_WORDS, ONE_WORD

V = TypeVar("V", bound=Hashable)
ANY = "#"


def pattern_words(pattern: str) -> list[str]:
    """A pattern's words as the matcher reads them: `>` is `#`, consecutive `#`s are one."""
    words: list[str] = []
    for w in pattern.split("."):
        if w in ANY_WORDS:
            if words and words[-1] == ANY:
                continue
            w = ANY
        words.append(w)
    return words


class _Node:
    __slots__ = ("children", "parent", "word", "name", "values")

    def __init__(self, parent: _Node | None = None, word: str = ""):
        self.children: dict[str, _Node] = {}
        self.parent = parent
        self.word = word
        self.name: str | None = None  # AddressTrie: the address ending here
        self.values: dict = {}  # PatternTrie: value -> registration number

    def empty(self) -> bool:
        return not self.children and self.name is None and not self.values


def _prune(node: _Node) -> None:
    """Drop nodes that no longer lead anywhere, so memory follows what is indexed."""
    while node.parent is not None and node.empty():
        del node.parent.children[node.word]
        node = node.parent


class AddressTrie:
    """Concrete (non-wildcard) address names by word."""

    def __init__(self) -> None:
        self._root = _Node()
        self.visited = 0  # trie nodes touched by `matching` (work, for tests)

    def add(self, name: str) -> None:
        node = self._root
        for w in name.split("."):
            child = node.children.get(w)
            if child is None:
                child = node.children[w] = _Node(node, w)
            node = child
        node.name = name

    def remove(self, name: str) -> None:
        node = self._root
        for w in name.split("."):
            child = node.children.get(w)
            if child is None:
                return
            node = child
        if node.name == name:
            node.name = None
            _prune(node)

    def matching(self, pattern: str) -> list[str]:
        """The indexed addresses `pattern` matches. Literal words and `*` walk down the trie (the
        live nodes are all at one depth, so their subtrees are disjoint); at the first `#` the
        addresses below the live nodes are the candidates: all of them when the `#` ends the
        pattern, else those the matcher accepts. So `news.#` costs what it matches, and a
        hostile `#.a.#.a.#...` costs one matcher call per candidate, never words x nodes."""
        words = pattern_words(pattern)
        live = [self._root]
        for i, w in enumerate(words):
            if w == ANY:
                below = self._names_below(live)
                if i == len(words) - 1:
                    return below
                return [name for name in below if wildcards.matches(pattern, name)]
            nxt: list[_Node] = []
            for node in live:
                if w == ONE_WORD:
                    self.visited += len(node.children)
                    nxt.extend(node.children.values())
                else:
                    self.visited += 1
                    child = node.children.get(w)
                    if child is not None:
                        nxt.append(child)
            if not nxt:
                return []
            live = nxt
        return [node.name for node in live if node.name is not None]

    def _names_below(self, nodes: list[_Node]) -> list[str]:
        names: list[str] = []
        stack = list(nodes)
        while stack:
            node = stack.pop()
            self.visited += 1
            if node.name is not None:
                names.append(node.name)
            stack.extend(node.children.values())
        return names


class PatternTrie(Generic[V]):
    """Values (queues, diverts) registered under patterns; `matching(address)` returns those
    whose pattern matches, in registration order."""

    def __init__(self) -> None:
        self._root = _Node()
        self._numbers = itertools.count()
        self.visited = 0  # trie nodes touched by `matching` (work, for tests)

    def add(self, pattern: str, value: V) -> None:
        node = self._root
        for w in pattern_words(pattern):
            child = node.children.get(w)
            if child is None:
                child = node.children[w] = _Node(node, w)
            node = child
        node.values.setdefault(value, next(self._numbers))

    def remove(self, pattern: str, value: V) -> None:
        node = self._root
        for w in pattern_words(pattern):
            child = node.children.get(w)
            if child is None:
                return
            node = child
        if node.values.pop(value, None) is not None:
            _prune(node)

    def _closure(self, nodes: dict[int, _Node]) -> dict[int, _Node]:
        # `#` may match no word: a live node's `#` child is live too (no `#` follows a `#`).
        for node in list(nodes.values()):
            hash_child = node.children.get(ANY)
            if hash_child is not None:
                nodes[id(hash_child)] = hash_child
        return nodes

    def matching(self, address: str) -> list[V]:
        live = self._closure({id(self._root): self._root})
        for w in address.split("."):
            nxt: dict[int, _Node] = {}
            for node in live.values():
                self.visited += 1
                if node.word == ANY and node is not self._root:
                    nxt[id(node)] = node  # a `#` eats this word and stays
                for key in (w, ONE_WORD):
                    child = node.children.get(key)
                    if child is not None:
                        nxt[id(child)] = child
            if not nxt:
                return []
            live = self._closure(nxt)
        found: list[tuple[int, V]] = []
        for node in live.values():
            found.extend((n, v) for v, n in node.values.items())
        found.sort(key=lambda pair: pair[0])
        return [v for _, v in found]


class BindingIndex:
    """Artemis `WildcardAddressManager` in two tries: the concrete addresses by word, and the
    bindings that follow a pattern (a wildcard address's multicast queues, diverts by their
    source, exact or not). Each such binding is bound to every matching address when either
    comes; a send never looks here."""

    def __init__(self, admits: Callable[[Any, str], bool] | None = None) -> None:
        self.addresses = AddressTrie()
        self.patterns: PatternTrie = PatternTrie()
        # Whether a binding goes to a matching address (None: always). The post office's
        # answer: a wildcard subscription only where its owner may consume. Asked at bind
        # time only, so a send stays a lookup.
        self.admits = admits

    def _admitted(self, binding, name: str) -> bool:
        return self.admits is None or self.admits(binding, name)

    def address_created(self, address) -> None:
        """A new concrete address gets the bindings whose pattern matches it."""
        self.addresses.add(address.name)
        for binding in self.patterns.matching(address.name):
            if self._admitted(binding, address.name):
                address.bindings.add(binding)

    def would_bind(self, name: str) -> list:
        """The bindings `address_created` would give a new address `name` (nothing changes: a
        dry run's answer, `bindings.RoutingContext.target`)."""
        return [b for b in self.patterns.matching(name) if self._admitted(b, name)]

    def address_removed(self, name: str) -> None:
        self.addresses.remove(name)

    def bind(self, pattern: str, binding, addresses: dict) -> None:
        """Bind to the concrete `addresses` the pattern matches, now and later."""
        self.patterns.add(pattern, binding)
        for name in self.addresses.matching(pattern):
            if self._admitted(binding, name):
                addresses[name].bindings.add(binding)

    def rebind(self, pattern: str, binding, addresses: dict) -> None:
        """Decide again, for each address the pattern matches, whether the binding goes there
        (what `admits` answers changed: a reload); bound where admitted, unbound elsewhere."""
        for name in self.addresses.matching(pattern):
            if self._admitted(binding, name):
                addresses[name].bindings.add(binding)
            else:
                addresses[name].bindings.remove(binding)

    def unbind(self, pattern: str, binding, addresses: dict) -> None:
        self.patterns.remove(pattern, binding)
        for name in self.addresses.matching(pattern):
            addresses[name].bindings.remove(binding)
