"""Acting on the answer of a yes/no screen (the confirmation dialog, the plan's launch).

Textual hands a dismissed screen's result to the callback given to ``push_screen``: True,
False, or None when the screen went away without an answer.  Every question the dashboard
asks acts on a yes alone and does nothing otherwise; :func:`on_yes` says so once, so each
caller names only what a yes does.
"""

from __future__ import annotations

from collections.abc import Callable


def on_yes(then: Callable[[], object]) -> Callable[[bool | None], None]:
    """A ``push_screen`` callback that calls ``then()`` on a yes, and nothing else."""

    def answered(yes: bool | None) -> None:
        if yes:
            then()

    return answered
