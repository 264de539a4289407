"""Slash commands: their list, the key table, and what each command does.

:data:`COMMANDS` and :data:`KEYS` are shown by ``/help`` and docs/tui.md
(whose key table a test checks against :data:`KEYS`, so the two cannot
drift apart); :class:`SlashCommands` runs a command line typed in the
message box, through the app's link and notes.
"""

from __future__ import annotations

import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tui._export import export_markdown
from tui._link import MODES
from tui._report import DoctorEntry
from tui._screens import SessionPicker

if TYPE_CHECKING:
    from appliance.doctor import Report
    from tui._app import AbhedApp

__all__ = ["COMMANDS", "KEYS", "SlashCommands", "complete_command", "help_text"]

COMMANDS: dict[str, str] = {
    "/help": "keys and commands",
    "/mode": "show or set the mode: /mode plan|ask|auto (the operator's policy still binds)",
    "/resume": "pick an earlier session to continue",
    "/new": "start a new session in this workspace",
    "/compact": "compact the conversation now (between runs)",
    "/undo": "undo the newest run's file changes (again: the run before); /undo N: every run "
             "after run N; --skip/--overwrite PATH for a file it refused",
    "/redo": "put back what the last /undo undid",
    "/todo": "show the todo list and the plan",
    "/export": "write the conversation as Markdown: /export [FILE]",
    "/sandbox": "where bash runs: the sandbox backend of this session",
    "/doctor": "what this installation is and what needs a fix (as `abhed doctor`)",
    "/copy": "copy the last answer to the clipboard",
    "/quit": "quit",
}

KEYS: list[tuple[str, str]] = [
    ("Enter", "send; while the agent works: steer (reaches the model before its next step); "
              "while it starts: sent once it is ready"),
    ("Tab", "while the agent works: queue the message for after the turn; else complete / or @"),
    ("Shift+Tab", "to the approval card when one waits, else to the conversation's tool cards; "
                  "again (or Tab) back to the message"),
    ("Ctrl+J", "new line in the message"),
    ("Up / Down", "on the first / last line: earlier / later prompts (kept per workspace); Up on "
                  "an empty input first takes back the last queued message"),
    ("Esc", "interrupt the running turn (the model stream and a running command); never quits"),
    ("Ctrl+C", "clear the input, or interrupt; twice on an empty, idle screen quits"),
    ("Ctrl+D", "quit"),
    ("PgUp / PgDn", "scroll the conversation a screen (also while an approval is open)"),
    ("Home / End", "with nothing typed: the top of the conversation / the newest output "
                   "(following it again)"),
    ("Ctrl+Home / Ctrl+End", "the first message / the newest output, whatever is typed"),
    ("Ctrl+O", "expand or collapse the selected tool card, else the last one"),
    ("Ctrl+Y", "copy the last answer"),
    ("Ctrl+T", "show or hide the side panel (todo and plan)"),
    ("y / a / n / r", "on the approval card: allow once / allow always / deny / deny with a "
                      "reason"),
    ("Up / Down, o", "on the conversation's cards: pick a card, expand or collapse it"),
]

UNAVAILABLE: dict[str, str] = {}


def complete_command(text: str) -> list[str]:
    """Commands starting with ``text`` (which starts with /)."""
    word = text.split(" ", 1)[0]
    return [c for c in COMMANDS if c.startswith(word)] if " " not in text else []


def help_text() -> str:
    width = max(len(k) for k, _ in KEYS)
    lines = ["Keys:"] + [f"  {k:<{width}}  {v}" for k, v in KEYS]
    lines += ["", "Commands:"] + [f"  {c:<9} {h}" for c, h in COMMANDS.items()]
    return "\n".join(lines)


class SlashCommands:
    """What ``/name arg`` does in one app; :meth:`run` is the one entry."""

    def __init__(self, app: AbhedApp) -> None:
        self.app = app

    def run(self, line: str) -> None:
        app = self.app
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        app.transcript.follow_end()  # a command's answer shows where one looks
        if name not in COMMANDS:
            app.note(f"no command {name!r}; commands: {', '.join(COMMANDS)}", error=True)
        elif name in UNAVAILABLE:
            app.note(UNAVAILABLE[name])
        elif name == "/help":
            app.note(help_text())
        elif name == "/quit":
            app.exit(0)
        elif name == "/mode":
            self.mode(arg)
        elif name == "/new":
            if app.running:
                app.note("a run is in progress; press Esc to interrupt it first", error=True)
                return
            app.restart(session_id=None)
        elif name == "/resume":
            self.resume(arg)
        elif name == "/export":
            self.export(arg)
        elif name == "/sandbox":
            self.sandbox()
        elif name == "/doctor":
            self.doctor()
        elif name == "/compact":
            self.compact()
        elif name in ("/undo", "/redo"):
            self.undo(arg, redo=name == "/redo")
        elif name == "/todo":
            if not app.view.panel_items:
                app.note("no todo list or plan yet: the agent records them with its todo and "
                         "plan tools, and the side panel (Ctrl+T) shows them live")
            else:
                app.note("\n\n".join(app.view.panel_items.values()))
        elif name == "/copy":
            app.action_copy_last()

    def doctor(self) -> None:
        """/doctor: ``appliance.doctor.examine``'s report (``abhed doctor``'s), on a thread:
        it may wait on the model server and read the whole event log."""
        app = self.app
        app.note("doctor: looking at the settings, the model, the sandbox and the event log ...")
        config_path = app.options.get("config_path")

        def work() -> None:
            from appliance.doctor import examine

            try:
                report = examine(config_path)
            except Exception as exc:  # examine reports its checks' failures; this is its own
                app.call_from_thread(app.note, f"doctor failed: {type(exc).__name__}: {exc}",
                                     error=True)
                return
            app.call_from_thread(self._doctored, report)

        threading.Thread(target=work, name="abhed-tui-doctor", daemon=True).start()

    def _doctored(self, report: Report) -> None:
        """Show the report (``abhed doctor``'s findings, a row each); red when something needs a fix."""
        self.app.transcript.add(DoctorEntry(report))

    def compact(self) -> None:
        app = self.app
        if app.link is None:
            return

        def done(problem: str) -> None:
            app.call_from_thread(self.compacted, problem)

        problem = app.link.compact(done)
        if problem:
            app.note(problem, error=True)

    def compacted(self, problem: str) -> None:
        app = self.app
        if problem:
            app.note(problem)
        if app.queue and not app.running:  # sent while compacting: it goes now
            app.submit(app.queue.pop(0))
            app.show_queue()

    def undo(self, arg: str, *, redo: bool = False) -> None:
        """/undo [N] [--skip PATH] [--overwrite PATH] and /redo [--skip/--overwrite PATH]."""
        app = self.app
        if app.link is None:
            return
        name = "/redo" if redo else "/undo"
        usage = (f"{name} takes " + ("" if redo else "nothing (the newest run not undone yet) "
                                     "or a run number N (every run after run N; 0: all), and ")
                 + "--skip PATH or --overwrite PATH for a file it refused")
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            app.note(f"{usage}; {exc}", error=True)
            return
        after: int | None = None
        skip: list[str] = []
        overwrite: list[str] = []
        while words:
            word = words.pop(0)
            if word in ("--skip", "--overwrite") and words:
                (skip if word == "--skip" else overwrite).append(words.pop(0))
            elif not redo and after is None and word.isdigit():
                after = int(word)
            else:
                app.note(f"{usage}, not {word!r}", error=True)
                return
        problem = app.link.undo(after, redo=redo, overwrite=tuple(overwrite), skip=tuple(skip))
        if problem:
            app.note(problem, error=True)

    def mode(self, arg: str) -> None:
        app = self.app
        current = app.info.mode if app.info else str(app.options.get("mode") or "?")
        if not arg:
            app.note(f"mode: {current}. /mode plan|ask|auto changes it (the operator's policy "
                     "still decides what runs)")
            return
        if arg not in MODES:
            app.note(f"/mode takes plan, ask or auto, not {arg!r}", error=True)
            return
        problem = app.link.set_mode(arg) if app.link is not None else "the agent is not running"
        if problem:
            app.note(problem, error=True)
            return
        app.options["mode"] = arg
        if app.link is not None and app.link.info is not None:
            app.info = app.link.info
        app.note(f"mode: {arg}")
        app.show_status()

    def resume(self, arg: str) -> None:
        """/resume: pick one of this workspace's sessions; /resume ID: that one, if it is here.

        A session of another workspace is never started here (it would only fail,
        and Ctrl+R would fail again): the note says how to open it where it belongs.
        """
        app = self.app
        if app.running:
            app.note("a run is in progress; press Esc to interrupt it first", error=True)
            return
        if app.link is None:
            return
        current = app.info.session_id if app.info else None
        if arg == current and arg:
            app.note(f"session {arg} is the one open")
            return
        sessions = app.link.sessions()
        if sessions is None:
            app.note("the event log is not open, so there are no sessions to resume: the agent "
                     "did not start (the error above says why)", error=True)
            return
        if arg:
            if any(s["id"] == arg for s in sessions):
                app.restart(session_id=arg)
                return
            elsewhere = [s for s in app.link.sessions(every_workspace=True) or []
                         if s["id"] == arg]
            if elsewhere:
                app.note(f"session {arg} belongs to workspace {elsewhere[0]['workspace']}, not "
                         f"this one; open it there: abhed tui -w {elsewhere[0]['workspace']} "
                         f"--session {arg}", error=True)
            else:
                app.note(f"no session {arg!r} in the event log; /resume lists this workspace's "
                         "sessions", error=True)
            return
        others = len(app.link.sessions(every_workspace=True) or []) - len(sessions)
        if not sessions:
            app.note("no recorded sessions in this workspace yet"
                     + (f" ({others} in other workspaces: `abhed tui -w DIR` opens a workspace, "
                        "then /resume lists its sessions)" if others else ""))
            return

        def picked(session_id: str | None) -> None:
            if session_id and session_id != current:
                app.restart(session_id=session_id)
            elif session_id:
                app.note(f"session {session_id} is the one open")

        app.push_screen(SessionPicker(sessions, current=current, others=others), picked)

    def export(self, arg: str) -> None:
        app = self.app
        sid = app.info.session_id if app.info else "session"
        target = Path(arg).expanduser() if arg else app.workspace / f"abhed-{sid}.md"
        if not target.is_absolute():
            target = app.workspace / target
        try:
            n = export_markdown(app.transcript.entries, target, title=f"Abhed session {sid}")
        except OSError as exc:
            app.note(f"export failed: {exc}", error=True)
            return
        app.note(f"exported {n:,} messages to {target}")

    def sandbox(self) -> None:
        app = self.app
        info = app.info
        if info is None:
            app.note("the agent has not started, so there is no sandbox yet")
            return
        if info.sandbox == "host":
            app.note("sandbox: host. UNSANDBOXED: the operator chose to run bash commands "
                     "directly on this machine, as you.", error=True)
            return
        app.note(f"sandbox: {info.sandbox} (`abhed sandbox check` compares the backends)")
        for notice in info.notices:
            if notice.kind.startswith("sandbox"):
                app.note(("note: " if notice.degraded_only else "") + notice.message,
                         error=not notice.degraded_only)
