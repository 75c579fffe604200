"""The ``esdash_leakage`` hook through the plugin manager: answers, refusals and warnings.

Throw-away plugins handed to ``load_plugins(extra=...)``, as in ``test_plugins.py``; the ABE
plugin's own analysis is tested in ``tests/encryption``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.leakage import report

from esdash.plugin.manager import PluginSet, load_plugins
from esdash.plugin_api import ClientCodec, Corpus, hookimpl
from esdash.rundir.layout import RunDir
from esdash.rundir.records import Leakage


class OurCodec(ClientCodec):
    label = "ours"


class OtherCodec(ClientCodec):
    label = "someone else's"


class Answering:
    """Reports for its own codec only, and records what it was given."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    @hookimpl
    def esdash_leakage(self, session, run_dir, track, corpus, codec):
        self.calls.append(
            {"session": session, "run_dir": run_dir, "track": track, "corpus": corpus}
        )
        return report() if isinstance(codec, OurCodec) else None


class CodecOnly:
    """Takes only the argument it uses, as any observer may."""

    @hookimpl
    def esdash_leakage(self, codec):
        return None


class Raising:
    @hookimpl
    def esdash_leakage(self, codec):
        raise RuntimeError("the analysis broke")


class Malformed:
    @hookimpl
    def esdash_leakage(self, codec):
        data = report()
        data["fields"][0]["attacks"][1]["within_1pct"] = "97 %"
        return data


@pytest.fixture(autouse=True)
def _no_disabled_plugins(monkeypatch):
    monkeypatch.delenv("ESDASH_DISABLE_PLUGINS", raising=False)


def ask(plugins: PluginSet, codec: ClientCodec, tmp_path: Path) -> Leakage | None:
    corpus = Corpus(tmp_path / "corpus.ndjson", documents=10)
    return plugins.leakage("session", tmp_path, "track", corpus, codec)  # type: ignore[arg-type]


def test_the_plugin_whose_codec_it_is_answers_with_the_typed_record(tmp_path, capsys) -> None:
    answering = Answering()
    plugins = load_plugins(extra=[("answering", answering), ("codec-only", CodecOnly())])
    record = ask(plugins, OurCodec(), tmp_path)
    assert isinstance(record, Leakage) and record.fields[0].field == "PatientAge"
    (call,) = answering.calls
    assert call["session"] == "session" and call["run_dir"] == tmp_path
    assert call["track"] == "track" and call["corpus"].documents == 10
    assert ask(plugins, OtherCodec(), tmp_path) is None  # nobody's codec: no report
    assert capsys.readouterr().err == ""


def test_a_raising_plugin_is_a_warning_naming_it_and_the_others_still_answer(
    tmp_path, capsys
) -> None:
    # pluggy calls the plugin registered last first: the raising one goes before
    plugins = load_plugins(extra=[("answering", Answering()), ("raising", Raising())])
    record = ask(plugins, OurCodec(), tmp_path)
    assert record is not None and record.documents == 2000
    err = capsys.readouterr().err
    assert err == (
        "esdash: warning: plugin 'raising': esdash_leakage failed: "
        "RuntimeError: the analysis broke\n"
    )


def test_a_report_off_the_schema_is_a_warning_naming_the_plugin_and_the_json_path(
    tmp_path, capsys
) -> None:
    plugins = load_plugins(extra=[("malformed", Malformed())])
    assert ask(plugins, OurCodec(), tmp_path) is None
    err = capsys.readouterr().err
    assert err.startswith("esdash: warning: plugin 'malformed': esdash_leakage returned a ")
    assert "not a valid leakage.json" in err
    assert "$.fields[0].attacks[1].within_1pct" in err and err.count("\n") == 1


# -------------------------------------------------------------- what esdash run does with it


def test_the_run_writes_the_report_and_says_what_it_does(tmp_path, capsys, monkeypatch) -> None:
    import io

    from esdash.run import leakage

    plugins = load_plugins(extra=[("answering", Answering())])
    monkeypatch.setattr(leakage, "get_plugins", lambda: plugins)
    run = RunDir(tmp_path)
    out = io.StringIO()
    corpus = Corpus(tmp_path / "corpus.ndjson", documents=2000)
    written = leakage.record_leakage(run, "session", "track", corpus, OurCodec(), out)  # type: ignore[arg-type]
    assert written == run.leakage_file and run.read_leakage() is not None
    assert out.getvalue() == (
        "leakage analysis begins (a corpus of 2,000 documents; the mode's plugin samples it)\n"
        f"leakage: {run.leakage_file}\n"
    )
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("failure", ["plugin", "nobody", "disk"])
def test_a_failing_analysis_is_one_warning_and_never_raises(
    tmp_path, capsys, monkeypatch, failure
) -> None:
    import io

    from esdash.run import leakage

    extra = {"plugin": [("raising", Raising())], "nobody": [], "disk": [("a", Answering())]}
    plugins = load_plugins(extra=extra[failure])
    monkeypatch.setattr(leakage, "get_plugins", lambda: plugins)
    run = RunDir(tmp_path / "gone" if failure == "disk" else tmp_path)  # no such directory
    out = io.StringIO()
    session = type("S", (), {"encryption": type("E", (), {"name": "ours"})()})()
    corpus = Corpus(tmp_path / "corpus.ndjson")
    assert leakage.record_leakage(run, session, "track", corpus, OurCodec(), out) is None  # type: ignore[arg-type]
    assert out.getvalue() == (
        "leakage analysis begins (the corpus; the mode's plugin samples it)\n"
    )
    assert not run.leakage_file.exists()
    err = capsys.readouterr().err
    assert err.startswith("esdash: warning: ")
    said = {
        "plugin": "plugin 'raising': esdash_leakage failed: RuntimeError: the analysis broke",
        "nobody": "no leakage report: no plugin answered for encryption mode ours",
        "disk": "leakage analysis failed: FileNotFoundError",
    }
    assert said[failure] in err
