"""Message ids with several writers on one store (docs/scale-out.md, section 2): blocks from one
counter never overlap, whoever asks and however concurrently, and never go below an id the store
already names (a store first used by a single broker)."""
from __future__ import annotations

import threading

import pytest

from hermod import store
from hermod.store.ownership import allocate_ids
from store_testing import queue, send, setup_ops, submit_and_wait

WRITERS = 3
BLOCKS_EACH = 40
BLOCK = 100


def test_concurrent_writers_get_disjoint_blocks(scale_db, engines):
    _, _, url = scale_db
    blocks: list[range] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def writer() -> None:
        engine = engines(url)
        try:
            for _ in range(BLOCKS_EACH):
                with engine.begin() as connection:
                    block = allocate_ids(connection, BLOCK)
                with guard:
                    blocks.append(block)
        except BaseException as error:  # reported below, with the test's failure
            errors.append(error)

    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(blocks) == WRITERS * BLOCKS_EACH
    ids = [i for block in blocks for i in block]
    assert len(ids) == len(set(ids)) == WRITERS * BLOCKS_EACH * BLOCK
    assert min(ids) == 1 and all(len(block) == BLOCK for block in blocks)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_blocks_start_above_the_ids_already_stored(dialect, scale_db, engines, tmp_path):
    url = scale_db[2] if dialect == "postgresql" else f"sqlite:///{tmp_path / 'hermod.db'}"
    journal = store.open_journal(url, None)  # a single broker wrote messages up to id 500
    try:
        assert submit_and_wait(journal, setup_ops(queue("orders"))) is None
        assert submit_and_wait(journal, send(500, "orders")) is None
    finally:
        journal.close()
    engine = engines(url)
    with engine.begin() as connection:
        first = allocate_ids(connection, 10)
    with engine.begin() as connection:
        second = allocate_ids(connection, 10)
    assert (first, second) == (range(501, 511), range(511, 521))


def test_a_rolled_back_block_is_never_handed_out_twice_with_a_later_one(scale_db, engines):
    engine = engines(scale_db[2])
    with pytest.raises(RuntimeError):
        with engine.begin() as connection:
            allocate_ids(connection, 10)
            raise RuntimeError("the commit that carried the block failed")
    with engine.begin() as connection:
        again = allocate_ids(connection, 10)
    with engine.begin() as connection:
        after = allocate_ids(connection, 10)
    assert again == range(1, 11) and after == range(11, 21)


def test_an_empty_block_is_refused(scale_db, engines):
    with engines(scale_db[2]).begin() as connection, pytest.raises(ValueError):
        allocate_ids(connection, 0)
