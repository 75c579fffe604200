"""The parts of a worker's query step, without a cluster or MPI.

:meth:`Worker.query_step` builds its outcome and its clients' warm-up and measurement from
:meth:`Worker.step_outcome`, :meth:`Worker.client_warm_up` and
:meth:`Worker.client_measurement`; the loads themselves (``loadgen.warm_up`` and
``loadgen.measure``) are replaced by recorders of their arguments, so these tests see what a
client is told to do: which node and order the outcome names, when each client of a ramp-up
started, and each client's share of the step's target throughput.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from esdash.bench import loadgen
from esdash.bench.worker import StepClient, Worker
from esdash.rundir.records import BenchPlan, NodePlan, PlannedQuery, PlannedStep

QUERIES = (
    PlannedQuery(name="a", index="i", body={"query": {"match_all": {}}}),
    PlannedQuery(name="b", index="i", body={"size": 0}),
)


def node(n: int) -> NodePlan:
    return NodePlan(
        rank=n,
        name=f"node-{n}",
        host="h",
        interface="lo",
        address="127.0.0.1",
        http_port=9200 + n,
        transport_port=9300 + n,
        master_eligible=True,
    )


def step(**more: Any) -> PlannedStep:
    fields: dict[str, Any] = {
        "name": "s",
        "queries": QUERIES,
        "warmup": 1.0,
        "duration": 2.0,
        "target_throughput": None,
    }
    return PlannedStep(**{**fields, **more})


def worker(planned: PlannedStep, workers: int = 2) -> Worker:
    plan = BenchPlan(
        index="i",
        index_body={},
        corpus_path="",
        corpus_documents=0,
        corpus_has_actions=False,
        bulk_size=10,
        steps=(planned,),
        interval=1.0,
        seed=1,
        ranks=workers + 1,
    )
    return Worker(plan, 0, workers, (node(0), node(1)), None)


def client(number: int, first: str = "a") -> StepClient:
    prepared = {q.name: loadgen.PreparedQuery.planned(q) for q in QUERIES}
    order = [prepared[first], *(p for name, p in prepared.items() if name != first)]
    # the connection is never used: the loads are replaced
    return StepClient(node(number % 2), object(), order, None, number)


def test_the_outcome_names_the_first_clients_node_and_order_and_every_node() -> None:
    one = Worker.step_outcome(3, step(round=1), [client(1, first="b")])
    assert one == {
        "index": 3,
        "step": "s",
        "round": 1,
        "clients": 1,
        "node": "node-1",
        "order": ["b", "a"],
    }
    two = Worker.step_outcome(0, step(), [client(0), client(1)])
    assert two["nodes"] == ["node-0", "node-1"] and two["node"] == "node-0"
    assert Worker.step_outcome(0, step(), []) == {"index": 0, "step": "s", "round": 0, "clients": 0}


@pytest.mark.parametrize(
    ("clients", "workers", "target", "rate"),
    [(4, 2, 100.0, 25.0), (None, 2, 100.0, 50.0), (None, 4, None, None)],
)
def test_each_client_measures_at_its_share_of_the_target_throughput(
    monkeypatch: pytest.MonkeyPatch,
    clients: int | None,
    workers: int,
    target: float | None,
    rate: float | None,
) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(loadgen, "measure", lambda *args: calls.append(args) or 5)
    planned = step(clients=clients, target_throughput=target, think_time=0.5, iterations=9)
    send = worker(planned, workers).client_measurement(planned, 123.0, recorder=None)
    tick = lambda: None  # noqa: E731
    assert send(client(1), tick) == 5
    (args,) = calls
    assert args[2] == 123.0 and args[4] is tick
    assert args[5] == rate and args[6] == 0.5 and args[8] == 9
    assert [q.name for q in args[1]] == ["a", "b"]


def test_a_ramp_up_notes_when_each_client_started(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(loadgen, "warm_up", lambda *args: calls.append(args) or 7)
    planned = step(clients=4, ramp_up=2.0, warmup_iterations=3)
    moment = time.time() - 10.0  # every client's start is already past: nobody waits
    outcome: dict[str, Any] = {}
    warm = worker(planned).client_warm_up(planned, moment, None, outcome)
    assert warm(client(2), lambda: None) == 7
    assert list(outcome["client_starts"]) == ["2"]
    assert outcome["client_starts"]["2"] >= 10.0
    (args,) = calls
    assert args[2] == moment + 1.0 and args[6] == 3  # until the warm-up's end, 3 iterations


def test_without_a_ramp_up_no_client_starts_are_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loadgen, "warm_up", lambda *args: 1)
    planned = step()
    outcome: dict[str, Any] = {}
    warm = worker(planned).client_warm_up(planned, time.time() - 1.0, None, outcome)
    assert warm(client(0), lambda: None) == 1
    assert outcome == {}
