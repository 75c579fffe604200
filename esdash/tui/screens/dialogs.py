"""Modal dialogs: contextual help (F1 / ?) and a yes/no confirmation."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Label, Markdown, Static

GENERAL_HELP = """\
**Everywhere**: `F1` / `?` this help, `ctrl+p` command palette (every action, themes),
`ctrl+s` save a screenshot (SVG) of the current view, `q` quit.
Quitting the dashboard never stops a run or a Slurm job: they run detached from it.
"""


def _keys_table(screen: Screen[object]) -> Table:
    """The keys of ``screen`` and of the app, every one of them (those the footer hides
    too: ``[``/``]``, ``h``, ``w``...), each with every key that does it.  A table's own
    cursor keys (arrows, page up/down) are the terminal's usual ones and are left out."""
    table = Table(box=None, show_header=True, header_style="bold", padding=(0, 2, 0, 0))
    table.add_column("key")
    table.add_column("action")
    seen: set[str] = set()
    for binding in Binding.make_bindings([*screen.BINDINGS, *screen.app.BINDINGS]):
        if not binding.description or binding.description in seen:
            continue
        seen.add(binding.description)
        keys = [
            screen.app.get_key_display(Binding(key, binding.action))
            for key in binding.key.split(",")
        ]
        table.add_row(Text(" ".join(keys), style="bold"), Text(binding.description))
    return table


def help_title(screen: Screen[object]) -> str:
    """The screen's own title (``HELP_TITLE``), never a class name such as LiveScreen."""
    return str(getattr(screen, "HELP_TITLE", "") or "esdash")


class HelpScreen(ModalScreen[None]):
    """What the screen below shows and which keys it takes."""

    BINDINGS = [
        Binding("escape,q,f1,question_mark", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 90%;
        max-width: 100;
        height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen Markdown {
        margin: 0;
    }
    """

    def __init__(self, screen: Screen[object]) -> None:
        super().__init__()
        self.below = screen

    def compose(self) -> ComposeResult:
        help_text = getattr(self.below, "HELP", "") or ""
        with VerticalScroll(id="help"):
            yield Markdown(f"# {help_title(self.below)}\n\n{help_text}\n\n{GENERAL_HELP}")
            yield Static(Text("Keys of this screen", style="bold underline"))
            yield Static(_keys_table(self.below), id="help-keys")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).border_title = "Help · escape closes"

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A question that needs a yes; `y` / `n` / escape."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]
    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > Vertical {
        width: 70;
        max-width: 95%;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    ConfirmScreen Horizontal {
        height: auto;
        align: center middle;
        margin-top: 1;
    }
    ConfirmScreen Button {
        margin: 0 2;
    }
    """

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.title_text, style="bold"))
            yield Static(self.message)
            with Horizontal():
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
