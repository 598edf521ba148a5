"""A producer link's sends of one reactor turn that go through the store, as ONE journal unit.

Why: a unit per durable send cost the reactor a journal unit, two completion closures and a
completion call per message, and the writer a unit per message; the sends a link's transfers
bring in one turn now share them (Q1D, 50k x 1 KiB, ~190 sends a unit). Interleaved A/B, 4
repetitions each, medians, load 2.5-4.2 (other helpers' benchmarks): SQLite FULL, reactor thread
18.6 -> 17.6 us per message, broker CPU 3.05 -> 2.89 s per 100k, 17.1k -> 18.4k msg/s;
PostgreSQL, reactor 17.6 -> 16.0 us, store writer 7.0 -> 5.8 us, broker CPU 2.44 -> 2.20 s per
100k, 18.5k -> 24.0k msg/s.

Each send is a part of the unit: its operations (`AddMessage` and an `AddReference` per durable
queue; none for a non-durable send that waits behind durable ones, see `Commit._submit`),
its refs, the bytes it holds, and the owner's token for it (the producer's delivery). A part
joins the journal's unit only while that unit is the last one submitted in the turn
(`open_unit` / `add_part`, `ports.UnitsOfParts`, an extension of `ports.Journal`): whatever else is submitted in
between (an acknowledgement, a queue deleted, another link's sends) starts a new unit, so the
store sees every operation in submission order, as before. A journal without the extension
(a test double) gets a unit per send.

Once the unit is stored, each send's refs go onto their queues in order (`Commit.place`:
a queue deleted meanwhile refuses that send alone) and the owner's `settle(tokens, outcomes)` is
called once: `outcomes` None when every send is stored and placed, else one outcome per token
(None or the error its send failed with: the unit failed as a whole, e.g. the store unavailable
past `fail_after_s`, or one part's own fault, which the journal finds by applying the parts
one by one). Each send still counts as a unit of the journal budget (`Commit.sent`/`stored`,
the `hermod_journal_depth` gauge: sends), so producers get credit as sends commit, exactly as
before. The burst is a way into the commit path (`core/commit.py`), not a copy of it: it
counts, places and gives back through it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .ports import UnitsOfParts

if TYPE_CHECKING:
    from .commit import Commit
    from .postoffice import PostOffice
    from .queue import Ref

Settle = Callable[[list, "list[BaseException | None] | None"], None]


class Burst:
    """Where one owner's (a producer link's) parts go: the unit of parts it is filling."""

    __slots__ = ("_commit", "_settle", "_unit", "_add_part")

    def __init__(self, postoffice: PostOffice, settle: Settle) -> None:
        self._commit = postoffice.commit
        self._settle = settle
        self._unit: _PartsUnit | None = None
        journal = postoffice.journal
        self._add_part = journal.add_part if isinstance(journal, UnitsOfParts) else None  # None: a unit per send

    def add(self, ops: list, refs: list[Ref], held: int, token: Any) -> None:
        """One send: into the unit being filled, or a new one when the journal closed it.
        Per send, the part's own bookkeeping inline: Q1D 50k x 1 KiB on SQLite, reactor
        16.2 -> 15.0 us per message, broker CPU 2.74 -> 2.52 s per 100k (medians of 3,
        interleaved, load 2.4-2.6: noisy, the direction held in every pair)."""
        self._commit.sent(held)  # first, as `Commit._submit`: a journal may complete at once
        unit = self._unit
        if unit is not None and unit.handle is not None and self._add_part(unit.handle, ops):  # type: ignore[misc]
            unit.tokens.append(token)
            unit.refs.append(refs)
            unit.held += held
        else:
            self._unit = _PartsUnit(self._commit, self._settle, ops, refs, held, token)


class _PartsUnit:
    """One journal unit of parts and what its completion needs: each part's refs and token;
    `handle`, the journal's unit while more parts may join it."""

    __slots__ = ("_commit", "_settle", "handle", "tokens", "refs", "held")

    def __init__(self, commit: Commit, settle: Settle, ops: list, refs: list[Ref], held: int,
                 token: Any) -> None:
        self._commit = commit
        self._settle = settle
        self.tokens = [token]
        self.refs = [refs]
        self.held = held
        journal = commit.po.journal
        if isinstance(journal, UnitsOfParts):
            self.handle = journal.open_unit(list(ops), self.committed)
        else:
            self.handle = None
            journal.submit(ops, self.committed)

    def committed(self, outcome: BaseException | list[BaseException | None] | None) -> None:
        """On the reactor: the unit is stored (None), failed as a whole (an error), or part by
        part (a list, one outcome per part)."""
        # The journal's unit refers to this one (its completion) and this one to it: no cycle
        # left behind for the collector, which the broker runs seldom (cli.py: messages are
        # short-lived, cycles are rare). With the cycle, RSS grew ~15 MiB per 100k sends.
        self.handle = None
        commit = self._commit
        tokens, parts = self.tokens, self.refs
        # Nor its sends: the owner's `Burst` keeps this unit until its next send, and a link
        # that went quiet must not keep its last burst's messages alive once consumed.
        self.tokens, self.refs = [], []
        count = len(tokens)
        commit.stored(self.held, count)
        place = commit.place
        outcomes: list[BaseException | None] | None = None
        if outcome is None:
            for i, refs in enumerate(parts):
                # `Commit.place` of the usual send, inline (one ref, kept in memory): Q1D 50k x 1 KiB,
                # reactor thread 16.0 -> 15.6 us per message on SQLite, 15.6 -> 15.2 on
                # PostgreSQL (medians of 3, interleaved, load 1.5-2.5).
                if len(refs) == 1:
                    r = refs[0]
                    q = r.queue
                    if not q.deleted and not r.paged:
                        q.pending -= 1
                        q.enqueue(r)
                        continue
                failed = place(refs)
                if failed is not None:
                    if outcomes is None:
                        outcomes = [None] * count
                    outcomes[i] = failed
        else:
            each = outcome if isinstance(outcome, list) else None
            outcomes = []
            for i, refs in enumerate(parts):
                error = each[i] if each is not None else outcome
                if error is None:
                    error = place(refs)
                else:
                    commit.not_placed(refs)
                outcomes.append(error)  # type: ignore[arg-type]
        self._settle(tokens, outcomes)


__all__ = ["Burst"]
