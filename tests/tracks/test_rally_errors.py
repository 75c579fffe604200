"""Broken Rally tracks: every problem is a BadInput naming the file, never another exception.

The targeted cases check the file, the line and the fix in the message; the Hypothesis
cases corrupt the fixture track or put wrongly typed values into a plain one and require
that loading either works or fails with a BadInput naming a file of the track.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.tracks.rally import RallyTrack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esdash.errors import BadInput

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rally"
WEBLOGS = FIXTURES / "weblogs"
TEMPLATES = (
    "track.json",
    "index.json",
    "operations/ingest.json",
    "operations/queries.json",
    "challenges/default.json",
    "challenges/common/setup.json",
)


def load_everything(path: Path, cache: Path, **options: Any) -> None:
    """Everything esdash asks of a track, in the order a run asks it."""
    track = RallyTrack()
    opts = {"path": path, **options}
    track.corpus(opts, cache)
    track.query_steps(opts)
    track.index_body(opts)
    track.unsupported_operations(opts)
    track.field_specs(opts)


def error_of(path: Path, cache: Path, **options: Any) -> str:
    with pytest.raises(BadInput) as info:
        load_everything(path, cache, **options)
    return str(info.value)


@pytest.fixture
def weblogs(tmp_path: Path) -> Path:
    return Path(shutil.copytree(WEBLOGS, tmp_path / "weblogs"))


def edit(path: Path, change: Callable[[str], str]) -> None:
    text = path.read_text()
    changed = change(text)
    assert changed != text, "the edit did not apply"
    path.write_text(changed)


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().split("\n"), 1) if needle in line)


# ----------------------------------------------------------------------------- targeted


def test_missing_track_json_and_missing_directory(tmp_path):
    assert f"{tmp_path}/track.json does not exist" in error_of(tmp_path, tmp_path)
    assert f"{tmp_path}/nope does not exist" in error_of(tmp_path / "nope", tmp_path)


def test_a_track_path_too_long_names_the_key(tmp_path):
    assert error_of(tmp_path / ("x" * 5000), tmp_path).startswith(
        "track.path: cannot use it (File name too long)"
    )


def test_a_track_param_nested_too_deeply_names_the_key(weblogs, tmp_path):
    deep = "x=" + "[" * 10_000
    message = error_of(weblogs, tmp_path, track_params=[deep])
    assert message.startswith("track.track_params: the value of 'x' is nested too deeply")


def test_json_error_in_a_collected_file_points_into_that_file(weblogs, tmp_path):
    queries = weblogs / "operations" / "queries.json"
    edit(queries, lambda t: t.replace('"name": "recent",', '"name": "recent"', 1))
    message = error_of(weblogs, tmp_path)
    assert message.startswith(f"{weblogs / 'track.json'}: the track is not valid JSON")
    assert "Expecting ',' delimiter" in message
    assert f"this text is at {queries}:" in message
    assert ">" in message and '"name": "recent"' in message  # the rendered lines, marked


def test_template_syntax_error_names_the_included_file_and_line(weblogs, tmp_path):
    setup = weblogs / "challenges" / "common" / "setup.json"
    edit(setup, lambda t: t.replace("{{ cluster_health | default('green') }}", "{% if %}"))
    message = error_of(weblogs, tmp_path)
    assert message.startswith(f"{setup}:{line_of(setup, '{% if %}')}: the track: Jinja2")


def test_undefined_attribute_in_the_index_body_names_its_line(weblogs, tmp_path):
    body = weblogs / "index.json"
    edit(body, lambda t: t.replace("{{ number_of_shards | default(1) }}", "{{ shards.count }}"))
    message = error_of(weblogs, tmp_path)
    assert message.startswith(f"{body}:{line_of(body, 'shards.count')}: the body of index")
    assert "'shards' is undefined" in message


def test_wrong_type_in_an_operation_names_the_operation_and_its_file(weblogs, tmp_path):
    queries = weblogs / "operations" / "queries.json"
    edit(queries, lambda t: t.replace('"index": "weblogs*",', '"index": 7,', 1))
    message = error_of(weblogs, tmp_path)
    line = line_of(queries, '"name": "status-range"')
    assert message.startswith(f"{queries}:{line}:")
    assert "'index' must be a string, found 7 (integer)" in message


def test_wrong_type_in_a_task(weblogs, tmp_path):
    challenges = weblogs / "challenges" / "default.json"
    edit(challenges, lambda t: t.replace('"time-period": 20', '"time-period": "twenty"', 1))
    message = error_of(weblogs, tmp_path)
    assert "task 'status-range': 'time-period' must be an integer or a number" in message
    assert f"{challenges}:" in message


def test_unknown_challenge(weblogs, tmp_path):
    message = error_of(weblogs, tmp_path, challenge="append-and-qurey")
    assert "no challenge 'append-and-qurey' (did you mean \"append-and-query\"?)" in message


def test_missing_collected_file_and_missing_body(weblogs, tmp_path):
    edit(
        weblogs / "challenges" / "default.json",
        lambda t: t.replace("common/setup.json", "common/set-up.json"),
    )
    message = error_of(weblogs, tmp_path)
    assert f"{weblogs / 'challenges' / 'common' / 'set-up.json'}, which does not exist" in message
    shutil.rmtree(weblogs)
    shutil.copytree(WEBLOGS, weblogs)
    (weblogs / "index.json").unlink()
    assert f"{weblogs / 'index.json'}: the body of index 'weblogs' is missing" in error_of(
        weblogs, tmp_path
    )


def test_a_file_that_collects_itself(weblogs, tmp_path):
    edit(
        weblogs / "operations" / "ingest.json",
        lambda t: '{{ rally.collect(parts="*.json") }},\n' + t,
    )
    assert "collects itself" in error_of(weblogs, tmp_path)


def test_not_utf8(weblogs, tmp_path):
    (weblogs / "operations" / "ingest.json").write_bytes(b"\xff\xfe{}")
    assert "ingest.json: not UTF-8 text" in error_of(weblogs, tmp_path)


def test_no_default_challenge(weblogs, tmp_path):
    edit(weblogs / "challenges" / "default.json", lambda t: t.replace('"default": true,', ""))
    message = error_of(weblogs, tmp_path)
    assert "marks no challenge as default; choose one with track.challenge" in message


def test_a_data_stream_without_documents_is_refused(tmp_path):
    (tmp_path / "track.json").write_text(
        json.dumps({"data-streams": [{"name": "logs"}], "schedule": []})
    )
    assert "no corpus documents go to index 'logs'" in error_of(tmp_path, tmp_path)


# --------------------------------------------------------------------------- hypothesis

#: Text that breaks JSON or Jinja2 in interesting ways when pasted into a template.
SNIPPETS = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        '"',
        "{{",
        "}}",
        "{%",
        "%}",
        "{#",
        "{% if x %}",
        "{% endif %}",
        "{% for i in range(3) %}",
        "{{ x.y.z }}",
        "{{ 1/0 }}",
        "{{ rally.collect(parts='nothing/*.json') }}",
        '{{ rally.collect(parts="track.json") }}',
        "{% include 'missing.json' %}",
        "{{ undefined_macro() }}",
        "{{ 'a' | no_such_filter }}",
        "{{ now | days_ago('x') }}",
        "null",
        "true",
        "NaN",
        '"operation-type": 5,',
        '"name": 1,',
        '"documents": {},',
        "\\u",
        "\x00",
    ]
)


@st.composite
def corruptions(draw: st.DrawFn) -> tuple[str, str, int, str]:
    name = draw(st.sampled_from(TEMPLATES))
    kind = draw(st.sampled_from(["insert", "replace", "truncate", "delete", "bytes"]))
    position = draw(st.integers(min_value=0, max_value=10_000))
    text = draw(st.one_of(SNIPPETS, st.text(max_size=8)))
    return name, kind, position, text


def corrupt(root: Path, name: str, kind: str, position: int, text: str) -> None:
    path = root / name
    content = path.read_text()
    at = position % (len(content) + 1)
    if kind == "insert":
        path.write_text(content[:at] + text + content[at:])
    elif kind == "replace":
        path.write_text(content[:at] + text + content[at + max(1, len(text)) :])
    elif kind == "truncate":
        path.write_text(content[:at])
    elif kind == "delete":
        path.unlink()
    else:
        path.write_bytes(content[:at].encode() + b"\xc3\x28" + content[at:].encode())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corruption=corruptions())
def test_corrupted_fixture_fails_only_with_bad_input_naming_a_track_file(corruption):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(shutil.copytree(WEBLOGS, Path(scratch) / "weblogs")).resolve()
        corrupt(root, *corruption)
        try:
            load_everything(root, Path(scratch) / "cache")
        except BadInput as exc:
            assert str(root) in str(exc), str(exc)


def base_track() -> dict[str, Any]:
    """A plain (template-free) valid track; Hypothesis breaks one value of it."""
    return {
        "version": 2,
        "indices": [{"name": "docs", "body": "index.json"}],
        "corpora": [
            {
                "name": "docs",
                "documents": [{"source-file": "documents.json", "document-count": 2}],
            }
        ],
        "operations": [
            {"name": "ingest", "operation-type": "bulk", "bulk-size": 10},
            {"name": "q", "operation-type": "search", "index": "docs", "body": {"size": 1}},
        ],
        "challenges": [
            {
                "name": "c",
                "default": True,
                "schedule": [
                    {"operation": "ingest", "clients": 2},
                    {"operation": "q", "warmup-time-period": 1, "time-period": 2},
                    {
                        "parallel": {
                            "time-period": 3,
                            "tasks": [
                                {"name": "p1", "operation": "q", "target-throughput": 2},
                                {"name": "p2", "operation": "q", "iterations": 4},
                            ],
                        }
                    },
                    {"operation": {"operation-type": "create-index", "settings": {"a": 1}}},
                ],
            }
        ],
    }


def paths_of(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path in a JSON value."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            found += paths_of(item, (*prefix, number))
    return found


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(-1e3, 1e3) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_wrongly_typed_values_fail_only_with_bad_input_naming_a_track_file(data):
    spec = base_track()
    target = data.draw(st.sampled_from(paths_of(spec)), label="path")
    value = data.draw(JSON_VALUES, label="value")
    broken = copy.deepcopy(spec)
    holder = broken
    for key in target[:-1]:
        holder = holder[key]
    holder[target[-1]] = value
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve()
        (root / "track.json").write_text(json.dumps(broken))
        (root / "index.json").write_text('{"mappings": {"properties": {"a": {"type": "long"}}}}')
        (root / "documents.json").write_text('{"a": 1}\n{"a": 2}\n')
        try:
            load_everything(root, root / "cache")
        except BadInput as exc:
            assert str(root) in str(exc), str(exc)


@settings(max_examples=100, deadline=None)
@given(
    challenge=st.text(max_size=20),
    index=st.text(max_size=10),
    params=st.lists(st.text(max_size=12), max_size=3),
)
def test_any_option_values_fail_only_with_bad_input(challenge, index, params):
    try:
        load_everything(
            WEBLOGS,
            Path(tempfile.gettempdir()) / "esdash-rally-test-cache",
            challenge=challenge,
            index=index,
            track_params=tuple(params),
        )
    except BadInput as exc:
        assert str(exc)


def test_a_corpus_directory_too_long_for_the_file_system_is_one_line(tmp_path: Path) -> None:
    """ENAMETOOLONG from the corpus lookup is a BadInput naming the track, not an OSError."""
    from esdash_plugins.tracks.rally.corpus import locate_documents
    from esdash_plugins.tracks.rally.model import DocumentSet

    doc = DocumentSet("c", "docs.json", 10, None, False)
    with pytest.raises(BadInput, match="longer than the file system allows"):
        locate_documents(doc, [tmp_path / ("x" * 300)], tmp_path / "track.json")
