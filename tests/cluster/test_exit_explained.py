"""A node that a signal ended says which signal, whatever form its exit code takes."""

from __future__ import annotations

from esdash.cluster.rank import _killed_by


def test_signal_exit_codes_name_the_signal() -> None:
    assert _killed_by(137) == "killed by SIGKILL"  # a shell's 128 + 9
    assert _killed_by(-9) == "killed by SIGKILL"  # Popen's negative return code
    assert _killed_by(143) == "killed by SIGTERM"
    assert _killed_by(1) is None and _killed_by(0) is None and _killed_by(None) is None
    assert _killed_by(255) is None  # not a signal
