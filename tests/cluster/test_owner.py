"""Elasticsearch never runs as root: nodes run as a per-cluster account or a named user."""

from __future__ import annotations

import os

import pytest

from esdash.cluster.users import per_cluster, resolve_owner
from esdash.errors import BadInput

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the rule only applies to root")


@needs_root
def test_root_without_run_as_gets_a_per_cluster_account() -> None:
    """Unset (or "per-cluster"): an account made for the run; before it exists, pre-flight
    checks assume what "others" may do (the rights of nobody), never root's."""
    for run_as in (None, "per-cluster"):
        stand_in = resolve_owner(run_as)
        assert per_cluster(run_as)
        assert stand_in.uid != 0 and stand_in.name == "a per-cluster account"


@needs_root
def test_the_refusal_names_the_session_file(tmp_path) -> None:
    session = tmp_path / "s.toml"
    with pytest.raises(BadInput, match=f"^{session}: cluster.run_as = 'no-such-user-esdash'"):
        resolve_owner("no-such-user-esdash", session_file=session)


@needs_root
def test_unknown_and_root_users_are_refused() -> None:
    with pytest.raises(BadInput, match="no such user"):
        resolve_owner("no-such-user-esdash")
    with pytest.raises(BadInput, match="uid 0"):
        resolve_owner("root")


@needs_root
@pytest.mark.es
def test_the_unprivileged_user_resolves(es_user: str) -> None:
    owner = resolve_owner(es_user)
    assert owner.name == es_user and owner.uid != 0
