"""mm_client.kafka.pool: clients lent one user at a time, dropped when their use failed."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from mm_client.kafka.pool import ClientPool, pool_key

pytestmark = pytest.mark.unit


class Client:
    made = 0

    def __init__(self, conf: dict[str, Any]) -> None:
        Client.made += 1
        self.conf = conf
        self.closed = False
        self.resets = 0

    def close(self) -> None:
        self.closed = True


def test_an_idle_client_is_lent_again_for_the_same_configuration_only() -> None:
    pool = ClientPool()
    with pool.lease("p", {"a": 1}, Client) as first:
        assert first.fresh
    with pool.lease("p", {"a": 1}, Client) as again:
        assert not again.fresh and again.client is first.client
    with pool.lease("p", {"a": 2}, Client) as other:
        assert other.fresh and other.client is not first.client
    with pool.lease("c", {"a": 1}, Client) as kind:
        assert kind.fresh  # another kind of client, same settings
    assert (pool.created, pool.reused, pool.idle()) == (3, 1, 3)


def test_a_client_in_use_is_not_lent_twice() -> None:
    pool = ClientPool()
    with pool.lease("p", {}, Client) as one, pool.lease("p", {}, Client) as two:
        assert one.client is not two.client
    assert pool.idle() == 2


def test_a_client_whose_use_raised_is_closed_not_returned() -> None:
    pool = ClientPool()
    with pytest.raises(RuntimeError), pool.lease("p", {}, Client) as lease:
        raise RuntimeError("fenced")
    assert lease.client.closed and pool.idle() == 0 and pool.dropped == 1
    with pool.lease("p", {}, Client) as dropped:
        dropped.drop()
    assert dropped.client.closed and pool.idle() == 0


def test_reset_runs_on_return_and_a_failing_reset_drops_the_client() -> None:
    pool = ClientPool()

    def reset(c: Client) -> None:
        c.resets += 1

    with pool.lease("c", {}, Client, reset=reset) as lease:
        pass
    assert lease.client.resets == 1 and pool.idle() == 1

    def broken(c: Client) -> None:
        raise OSError("cannot unassign")

    with pool.lease("c", {}, Client, reset=broken) as lease:
        pass
    assert lease.client.closed and pool.idle() == 0


def test_the_pool_is_bounded_oldest_idle_closed_first() -> None:
    pool = ClientPool(max_clients=2)
    leases = []
    for i in range(3):
        with pool.lease("p", {"i": i}, Client) as lease:
            leases.append(lease)
    assert [lease.client.closed for lease in leases] == [True, False, False]
    pool.clear()
    assert all(lease.client.closed for lease in leases) and pool.idle() == 0


def test_keys_compare_settings_as_text_and_callbacks_by_identity() -> None:
    def cb() -> None:
        pass

    assert pool_key("p", {"a": 1, "b": "x"}) == pool_key("p", {"b": "x", "a": "1"})
    assert pool_key("p", {"f": cb}) == pool_key("p", {"f": cb})
    assert pool_key("p", {"f": cb}) != pool_key("p", {"f": lambda: None})


def test_threads_never_share_a_client() -> None:
    pool = ClientPool()
    in_use: set[int] = set()
    clash = threading.Event()
    lock = threading.Lock()

    def work() -> None:
        for _ in range(200):
            with pool.lease("p", {}, Client) as lease:
                with lock:
                    if id(lease.client) in in_use:
                        clash.set()
                    in_use.add(id(lease.client))
                with lock:
                    in_use.discard(id(lease.client))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not clash.is_set() and pool.idle() <= 8
