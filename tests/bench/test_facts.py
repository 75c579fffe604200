"""The JVM options a comparison shows: the node's ``-X`` flags, without paths."""

from __future__ import annotations

from esdash.bench.facts import jvm_flags


def test_the_flags_are_the_x_options_without_the_ones_naming_a_path() -> None:
    arguments = [
        "-Des.networkaddress.cache.ttl=60",
        "-XX:+UseG1GC",
        "-Xms512m",
        "-Xmx512m",
        "-XX:HeapDumpPath=/tmp/node-1/logs",
        "-Xlog:gc*,gc+age=trace,safepoint:file=/tmp/node-1/logs/gc.log",
        "-XX:TieredStopAtLevel=1",
    ]
    assert jvm_flags(arguments) == [
        "-XX:+UseG1GC",
        "-Xms512m",
        "-Xmx512m",
        "-XX:TieredStopAtLevel=1",
    ]


def test_a_node_that_reports_no_arguments_has_no_flags() -> None:
    assert jvm_flags(None) == []
    assert jvm_flags("-Xmx1g") == []
