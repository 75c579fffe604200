"""Query files in the authors' step format: valid files load, broken ones get a located error."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esdash.errors import BadInput
from esdash.plugin.steps import (
    QUERY_KEYS,
    STEP_KEYS,
    load_steps,
    parse_steps,
)
from esdash.plugin_api import QueryStep
from esdash.session import SessionError, parse_session

AUTHORS_EXAMPLE = """[
  {
    "search_queries": [ {"body": { "query": {"match_all": {}}, "size": 1000 }} ],
    "warmup_time_secs": 30,
    "execution_time_secs": 120,
    "sleep_between_requests_secs": 0.25
  },
  {
    "search_queries": [
      {"body": {"query": {"range": {"total_amount": {"gte": 5, "lt": 15}}}, "size": 1000}},
      {"body": {"query": {"match_all": {}}, "size": 1000}}
    ]
  }
]
"""


def test_the_authors_example_loads(tmp_path):
    path = tmp_path / "q.json"
    path.write_text(AUTHORS_EXAMPLE)
    first, second = load_steps(path)
    assert first.name == "step0" and [q.name for q in first.queries] == ["q0"]
    assert first.queries[0].body == {"query": {"match_all": {}}, "size": 1000}
    assert (first.warmup, first.duration, first.think_time) == (30.0, 120.0, 0.25)
    assert first.target_throughput is None
    assert second.name == "step1" and [q.name for q in second.queries] == ["q0", "q1"]
    # Absent values: the session's defaults; no think time.
    assert (second.warmup, second.duration, second.think_time) == (None, None, 0.0)
    assert all(q.index is None and q.requires == () for q in second.queries)


def test_names_and_index_are_optional_keys():
    (step,) = parse_steps(
        '[{"name": "mixed", "search_queries": ['
        '{"name": "range", "index": "other", "body": {"size": 0}}, {"body": {}}]}]'
    )
    assert step.name == "mixed"
    assert [(q.name, q.index) for q in step.queries] == [("range", "other"), ("q1", None)]


def test_a_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "q.json"
    path.write_bytes(b"\xef\xbb\xbf" + AUTHORS_EXAMPLE.encode())
    assert len(load_steps(path)) == 2


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("", r"line 1: the file is empty"),
        ("  \n", r"line 1: the file is empty"),
        ('[\n  {"search_queries": []},\n]', r"line 3, column 1: invalid JSON.*no comments"),
        ("// steps\n[]", r"line 1, column 1: invalid JSON.*no comments, trailing commas"),
        ("[]", r"line 1, top level: the file has no steps"),
        ('{"search_queries": [{"body": {}}]}', r"top level: expected an array.*wrap it in \[ \]"),
        ("[1]", r"line 1, \[0\]: expected a step object, found the number 1"),
        ("[{}]", r'\[0\]: missing key "search_queries"'),
        ('[{"search_queries": []}]', r"\[0\].search_queries: expected a non-empty array"),
        ('[{"search_queries": {"body": {}}}]', r"search_queries: expected a non-empty array"),
        ('[{"search_queries": ["match_all"]}]', r"search_queries\[0\]: expected a query object"),
        ('[{"search_queries": [{}]}]', r'search_queries\[0\]: missing key "body"'),
        ('[{"search_queries": [{"body": "q"}]}]', r"\.body: expected the _search request body"),
        (
            '[{"search_queries": [{"bdy": {}}]}]',
            r'search_queries\[0\].bdy: unknown key "bdy" \(did you mean "body"\?\)',
        ),
        (
            '[{"search_queries": [{"body": {}}],\n "warmup_secs": 5}]',
            r'line 2, \[0\].warmup_secs: unknown key "warmup_secs" '
            r'\(did you mean "warmup_time_secs"\?\)',
        ),
        (
            '[{"search_queries": [{"body": {}}], "execution_time_secs": 0}]',
            r"execution_time_secs: expected a number of seconds, greater than 0",
        ),
        (
            '[{"search_queries": [{"body": {}}], "warmup_time_secs": "60"}]',
            r'warmup_time_secs: .*found the string "60"',
        ),
        (
            '[{"search_queries": [{"body": {}}], "sleep_between_requests_secs": -1}]',
            r"sleep_between_requests_secs: expected a number of seconds, 0 or more",
        ),
        (
            '[{"search_queries": [{"body": {}}], "warmup_time_secs": true}]',
            r"found the boolean true",
        ),
        ('[{"search_queries": [{"body": {}}], "name": ""}]', r"\[0\].name: expected a name"),
        (
            '[{"search_queries": [{"body": {}}], "name": "a"},\n'
            ' {"search_queries": [{"body": {}}], "name": "a"}]',
            r"line 2, \[1\].name: step name 'a' is already used by step 0",
        ),
        (
            '[{"search_queries": [{"body": {}, "name": "q1"}, {"body": {}}]}]',
            r"search_queries\[1\]: query name 'q1' is already used by query 0",
        ),
        ('[{"search_queries": [{"body": {}, "index": 3}]}]', r"\.index: expected an index name"),
        ('[{"search_queries": [{"body": {"size": NaN}}]}]', r"line 1: NaN is not JSON"),
        ('[{"search_queries": [{"body": {},\n"body": {}}]}]', r'line 2: duplicate key "body"'),
    ],
)
def test_broken_files_name_line_path_and_fix(text, pattern):
    with pytest.raises(BadInput, match=pattern) as caught:
        parse_steps(text, "queries.json")
    message = str(caught.value)
    assert message.startswith("query file queries.json, line ")
    assert ";" in message, "every message ends with the fix"


def test_unreadable_files(tmp_path):
    with pytest.raises(BadInput, match="no such file; check benchmark.queries"):
        load_steps(tmp_path / "missing.json")
    with pytest.raises(BadInput, match="is a directory"):
        load_steps(tmp_path)
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'[\n{"search_queries": [{"body": {"q": "M\xfcller"}}]}]')
    with pytest.raises(BadInput, match=r"latin1.json, line 2: not UTF-8 \(byte 0xfc\)"):
        load_steps(latin)


def test_the_step_keeps_think_time_and_target_throughput_apart():
    with pytest.raises(ValueError, match="not both"):
        QueryStep("s", (), think_time=0.1, target_throughput=5.0)
    with pytest.raises(ValueError, match=">= 0"):
        QueryStep("s", (), think_time=-1)


# --------------------------------------------------------------------- the session

SESSION = {
    "name": "t",
    "cluster": {"nodes": 1, "heap": "512m", "interconnect": "loopback"},
    "track": {"name": "mri", "documents": 10},
}


def test_benchmark_queries_replace_the_tracks_steps(tmp_path):
    (tmp_path / "q.json").write_text(AUTHORS_EXAMPLE)
    data = {**SESSION, "benchmark": {"queries": "q.json"}}
    session = parse_session(data, tmp_path / "s.toml")
    assert session.benchmark.queries == (tmp_path / "q.json").resolve()
    from esdash.plugin.manager import get_plugins

    track = get_plugins().track("mri")
    assert [s.name for s in session.query_steps(track)] == ["step0", "step1"]
    plain = parse_session(SESSION, tmp_path / "s.toml")
    assert plain.benchmark.queries is None
    assert [s.name for s in plain.query_steps(track)][0] == "body_part"


def test_a_broken_query_file_is_a_session_problem(tmp_path):
    (tmp_path / "q.json").write_text('[{"search_queries": [{"bdy": {}}]}]')
    data = {**SESSION, "benchmark": {"queries": "q.json"}}
    with pytest.raises(SessionError, match=r"benchmark.queries: query file .*q.json, line 1"):
        parse_session(data, tmp_path / "s.toml")
    with pytest.raises(SessionError, match=r"benchmark.queries: .*no such file"):
        parse_session({**SESSION, "benchmark": {"queries": "nope.json"}}, tmp_path / "s.toml")


# ---------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
SECONDS = st.one_of(st.integers(0, 600), st.floats(0, 600, allow_nan=False))
BODIES = st.dictionaries(st.sampled_from(["query", "size", "aggs", "sort"]), JSON, max_size=3)


@st.composite
def valid_files(draw):
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        step: dict = {
            "search_queries": [{"body": b} for b in draw(st.lists(BODIES, min_size=1, max_size=3))]
        }
        for key in ("warmup_time_secs", "sleep_between_requests_secs"):
            if draw(st.booleans()):
                step[key] = draw(SECONDS)
        if draw(st.booleans()):
            step["execution_time_secs"] = draw(st.integers(1, 600))
        steps.append(step)
    return steps


@settings(max_examples=150, deadline=2000)
@given(valid_files(), st.sampled_from([None, 2]))
def test_valid_files_load_faithfully(steps, indent):
    loaded = parse_steps(json.dumps(steps, indent=indent))
    assert [s.name for s in loaded] == [f"step{k}" for k in range(len(steps))]
    for step, raw in zip(loaded, steps, strict=True):
        assert [q.body for q in step.queries] == [q["body"] for q in raw["search_queries"]]
        assert step.warmup == raw.get("warmup_time_secs")
        assert step.duration == raw.get("execution_time_secs")
        assert step.think_time == raw.get("sleep_between_requests_secs", 0.0)


MUTATIONS = st.sampled_from(
    [
        "drop_body",
        "drop_search_queries",
        "empty_search_queries",
        "unknown_step_key",
        "unknown_query_key",
        "bad_seconds",
        "body_not_object",
        "query_not_object",
        "step_not_object",
    ]
)
NOT_SECONDS = st.one_of(
    st.text(max_size=5), st.booleans(), st.none(), st.integers(-100, -1), st.lists(st.integers())
)
UNKNOWN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12).filter(
    lambda k: k not in STEP_KEYS + QUERY_KEYS
)


@settings(max_examples=200, deadline=2000)
@given(valid_files(), MUTATIONS, st.integers(0, 100), NOT_SECONDS, UNKNOWN, st.data())
def test_every_mutation_is_reported_with_its_location(steps, mutation, at, bad, unknown, data):
    k = at % len(steps)
    step = steps[k]
    i = at % len(step["search_queries"])
    query = step["search_queries"][i]
    if mutation == "drop_body":
        del query["body"]
        path = rf"\[{k}\]\.search_queries\[{i}\]: missing key \"body\""
    elif mutation == "drop_search_queries":
        del step["search_queries"]
        path = rf"\[{k}\]: missing key \"search_queries\""
    elif mutation == "empty_search_queries":
        step["search_queries"] = []
        path = rf"\[{k}\]\.search_queries: expected a non-empty array"
    elif mutation == "unknown_step_key":
        step[f"x_{unknown}"] = 1
        path = rf"\[{k}\]\.x_{unknown}: unknown key"
    elif mutation == "unknown_query_key":
        query[f"x_{unknown}"] = {}
        path = rf"\[{k}\]\.search_queries\[{i}\]\.x_{unknown}: unknown key"
    elif mutation == "bad_seconds":
        key = data.draw(st.sampled_from(STEP_KEYS[2:]))
        step[key] = bad
        path = rf"\[{k}\]\.{key}: expected a number of seconds"
    elif mutation == "body_not_object":
        query["body"] = data.draw(st.one_of(st.text(), st.integers(), st.lists(st.none())))
        path = rf"\[{k}\]\.search_queries\[{i}\]\.body: expected the _search request body"
    elif mutation == "query_not_object":
        step["search_queries"][i] = bad
        path = rf"\[{k}\]\.search_queries\[{i}\]: expected a query object"
    else:
        steps[k] = bad
        path = rf"\[{k}\]: expected a step object"
    text = json.dumps(steps, indent=2)
    with pytest.raises(BadInput) as caught:
        parse_steps(text, "f.json")
    message = str(caught.value)
    assert re.search(path, message), (path, message)
    line = int(re.match(r"query file f\.json, line (\d+), ", message).group(1))
    assert 1 <= line <= text.count("\n") + 1
    if mutation in ("unknown_step_key", "unknown_query_key"):
        assert f'"x_{unknown}":' in text.splitlines()[line - 1]


@settings(max_examples=300, deadline=2000)
@given(JSON)
def test_any_json_document_loads_or_gets_a_located_error(value):
    try:
        steps = parse_steps(json.dumps(value), "f.json")
    except BadInput as exc:
        assert re.match(r"query file f\.json, line \d+", str(exc)), str(exc)
    else:
        assert steps and all(isinstance(s, QueryStep) for s in steps)


@settings(max_examples=300, deadline=2000)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_never_raise_anything_but_bad_input(raw):
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "q.json"
        path.write_bytes(raw)
        try:
            load_steps(path)
        except BadInput as exc:
            assert str(exc).startswith(f"query file {path}"), str(exc)
