"""Prompt history: Up and Down recall what was sent before, per workspace, across runs.

Kept where the session's other per-user state lives, ``ABHED_HOME/state``
(``tui-history/<workspace digest>.jsonl``, one JSON line per prompt), the
folder made ``0700`` and the file ``0600``: prompts can hold anything a
person typed, so only that person may read them.  At most :data:`KEEP`
prompts are kept (older ones are dropped when the file is rewritten); a
prompt over :data:`MAX_CHARS` (a big paste) is sent but not kept.  A
history that cannot be read or written never stops the TUI: it is said
once and the TUI goes on without it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["KEEP", "MAX_CHARS", "PromptHistory"]

KEEP = 500
MAX_CHARS = 64 * 1024
_MAX_FILE_BYTES = 8 * 1024 * 1024


def history_path(workspace: Path, home: Path) -> Path:
    digest = hashlib.sha256(str(workspace).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return home / "state" / "tui-history" / f"{digest}.jsonl"


class PromptHistory:
    """The prompts sent in one workspace, oldest first, and a cursor for Up/Down."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.items: list[str] = []
        self.problem = ""  # why the history is not kept, said once by the app
        self._pos = 0  # len(items): the draft being typed
        self._draft = ""
        if path is not None:
            self._load(path)
        self._pos = len(self.items)

    @classmethod
    def for_workspace(cls, workspace: Path) -> PromptHistory:
        from appliance import abhed_home

        return cls(history_path(workspace, abhed_home()))

    def _load(self, path: Path) -> None:
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > _MAX_FILE_BYTES:
                    f.seek(size - _MAX_FILE_BYTES)
                raw = f.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            self.problem = f"prompt history not read ({exc}); Up and Down recall this run's only"
            return
        for line in raw.split(b"\n"):
            try:
                text = json.loads(line)["text"]
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line: skipped, the rest stands
            if isinstance(text, str):
                self.items.append(text)
        self.items = self.items[-KEEP:]

    def add(self, text: str) -> None:
        """Remember a sent prompt (not a repeat of the last one); written at once."""
        self._pos = len(self.items)
        self._draft = ""
        if not text.strip() or len(text) > MAX_CHARS or (self.items and self.items[-1] == text):
            self._pos = len(self.items)
            return
        self.items.append(text)
        self._pos = len(self.items)
        if self.path is None or self.problem:
            return
        try:
            self._append(self.path, text)
        except OSError as exc:
            self.problem = f"prompt history not saved ({exc}); it is kept for this run only"

    def _append(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path.parent, 0o700)
        line = json.dumps({"text": text}, ensure_ascii=False).encode("utf-8", "surrogateescape")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, line + b"\n")
            grown = os.fstat(fd).st_size > _MAX_FILE_BYTES // 2
        finally:
            os.close(fd)
        if grown or len(self.items) > 2 * KEEP:
            self._rewrite(path)

    def _rewrite(self, path: Path) -> None:
        self.items = self.items[-KEEP:]
        self._pos = len(self.items)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            for text in self.items:
                f.write(json.dumps({"text": text}, ensure_ascii=False)
                        .encode("utf-8", "surrogateescape") + b"\n")
        os.replace(tmp, path)

    def step(self, direction: int, current: str) -> str | None:
        """The prompt before (-1) or after (+1) the one shown, or None at either end.

        ``current`` is what the box holds now: kept as the draft when leaving it,
        given back when stepping past the newest prompt.
        """
        if self._pos == len(self.items):
            self._draft = current
        target = self._pos + direction
        if target < 0 or target > len(self.items):
            return None
        self._pos = target
        return self._draft if target == len(self.items) else self.items[target]
