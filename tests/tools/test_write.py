"""write (§3): create or replace, seen-before-overwrite, atomic, modes, honest results,
crash safety and concurrent writers."""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tools import ToolSettings

# -- creating -----------------------------------------------------------------


def test_create_reports_created_and_bytes(h: Any) -> None:
    res = h.ok(h.write(h.root / "new.py", "print('é')\n"))
    data = "print('é')\n".encode()
    assert (h.root / "new.py").read_bytes() == data
    assert res.content == f"Created {h.root}/new.py ({len(data)} bytes, 1 lines)."
    assert res.details["created"] is True and res.details["changed"] is True
    assert res.details["bytes_written"] == len(data)
    assert res.details["file_state"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_new_files_are_0644_whatever_the_umask(h: Any) -> None:
    old = os.umask(0o077)
    try:
        h.ok(h.write(h.root / "a.txt", "x"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(h.root / "a.txt").st_mode) == 0o644


def test_operator_new_file_mode(h: Any) -> None:
    op = h.with_settings(new_file_mode=0o600)
    op.ok(op.write(h.root / "a.txt", "x"))
    assert stat.S_IMODE(os.stat(h.root / "a.txt").st_mode) == 0o600


def test_empty_content_creates_an_empty_file(h: Any) -> None:
    res = h.ok(h.write(h.root / "empty", ""))
    assert (h.root / "empty").read_bytes() == b"" and res.details["bytes_written"] == 0
    assert "0 bytes" in res.content


def test_missing_parent_directory_is_an_error_by_default(h: Any) -> None:
    res = h.err(h.write(h.root / "a" / "b" / "c.txt", "x"), "parent_not_found")
    assert "does not create directories" in res.content and "mkdir -p" in res.content
    assert not (h.root / "a").exists()


def test_operator_can_allow_parent_directory_creation(h: Any) -> None:
    op = h.with_settings(create_parent_dirs=True)
    op.ok(op.write(h.root / "a" / "b" / "c.txt", "x"))
    assert (h.root / "a" / "b" / "c.txt").read_text() == "x"
    assert stat.S_IMODE(os.stat(h.root / "a" / "b").st_mode) == 0o755


def test_parent_creation_does_not_go_through_a_file(h: Any) -> None:
    (h.root / "a").write_text("file")
    op = h.with_settings(create_parent_dirs=True)
    op.err(op.write(h.root / "a" / "b" / "c.txt", "x"), "not_a_directory")
    assert (h.root / "a").read_text() == "file"


def test_written_file_can_be_edited_without_a_read(h: Any) -> None:
    h.ok(h.write(h.root / "a.txt", "one\n"))
    h.ok(h.edit(h.root / "a.txt", "one", "two"))
    h.ok(h.write(h.root / "a.txt", "three\n"))
    assert (h.root / "a.txt").read_text() == "three\n"


# -- overwriting --------------------------------------------------------------


def test_overwrite_requires_a_read_in_this_session(h: Any) -> None:
    (h.root / "f.txt").write_text("precious\n")
    res = h.err(h.write(h.root / "f.txt", "gone"), "not_read")
    assert "Read it first" in res.content
    assert (h.root / "f.txt").read_text() == "precious\n"
    other = h.fresh_session()
    h.ok(h.read(h.root / "f.txt"))
    other.err(other.write(h.root / "f.txt", "gone"), "not_read")  # another session's read
    res = h.ok(h.write(h.root / "f.txt", "replaced\n"))
    assert res.details["created"] is False
    assert res.content == f"Overwrote {h.root}/f.txt (9 bytes, was 9 bytes)."
    assert res.details["bytes_before"] == 9 and res.details["bytes_written"] == 9
    assert "-precious" in res.details["diff"] and "+replaced" in res.details["diff"]


def test_overwrite_refused_when_the_file_changed_since_the_read(h: Any) -> None:
    (h.root / "f.txt").write_text("v1\n")
    h.ok(h.read(h.root / "f.txt"))
    (h.root / "f.txt").write_text("v2 by the user\n")
    res = h.err(h.write(h.root / "f.txt", "model's\n"), "file_changed")
    assert "Read it again" in res.content
    assert res.details["seen_sha256"] == hashlib.sha256(b"v1\n").hexdigest()
    assert res.details["current_sha256"] == hashlib.sha256(b"v2 by the user\n").hexdigest()
    assert (h.root / "f.txt").read_text() == "v2 by the user\n"
    h.ok(h.read(h.root / "f.txt"))
    h.ok(h.write(h.root / "f.txt", "model's\n"))


def test_same_size_same_mtime_change_is_still_detected(h: Any) -> None:
    (h.root / "f.txt").write_text("aaaa\n")
    h.ok(h.read(h.root / "f.txt"))
    st = os.stat(h.root / "f.txt")
    (h.root / "f.txt").write_text("bbbb\n")
    os.utime(h.root / "f.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    h.err(h.write(h.root / "f.txt", "c\n"), "file_changed")


def test_identical_content_says_nothing_changed(h: Any) -> None:
    (h.root / "f.txt").write_text("same\n")
    h.ok(h.read(h.root / "f.txt"))
    before = os.stat(h.root / "f.txt")
    res = h.ok(h.write(h.root / "f.txt", "same\n"))
    assert res.content.startswith("No change:") and "Nothing was written" in res.content
    assert res.details["changed"] is False and res.details["bytes_written"] == 0
    after = os.stat(h.root / "f.txt")
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o640, 0o4755])
def test_existing_mode_is_preserved(h: Any, mode: int) -> None:
    (h.root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(h.root / "run.sh", mode)
    h.ok(h.read(h.root / "run.sh"))
    h.ok(h.write(h.root / "run.sh", "#!/bin/sh\necho hi\n"))
    assert stat.S_IMODE(os.stat(h.root / "run.sh").st_mode) == mode


def test_existing_owner_is_preserved_when_root(h: Any) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file away")  # pragma: no cover - CI runs as root
    (h.root / "f.txt").write_text("x\n")
    os.chown(h.root / "f.txt", 1234, 2345)
    h.ok(h.read(h.root / "f.txt"))
    h.ok(h.write(h.root / "f.txt", "y\n"))
    st = os.stat(h.root / "f.txt")
    assert (st.st_uid, st.st_gid) == (1234, 2345)


def test_read_only_file_is_refused_even_for_root(h: Any) -> None:
    (h.root / "ro.txt").write_text("locked\n")
    os.chmod(h.root / "ro.txt", 0o444)
    h.ok(h.read(h.root / "ro.txt"))
    res = h.err(h.write(h.root / "ro.txt", "x"), "read_only_file")
    assert "mode 0444" in res.content and "chmod" in res.content
    h.err(h.edit(h.root / "ro.txt", "locked", "open"), "read_only_file")
    assert (h.root / "ro.txt").read_text() == "locked\n"


def test_directory_and_fifo_targets_are_refused(h: Any) -> None:
    (h.root / "d").mkdir()
    h.err(h.write(h.root / "d", "x"), "is_directory")
    os.mkfifo(h.root / "p")
    h.err(h.write(h.root / "p", "x"), "not_a_regular_file")
    assert stat.S_ISFIFO(os.stat(h.root / "p").st_mode)


def test_content_over_the_size_limit_is_refused(h: Any) -> None:
    small = h.with_settings(edit_max_file_bytes=10)
    small.err(small.write(h.root / "big.txt", "x" * 11), "too_large")
    assert not (h.root / "big.txt").exists()


# -- encodings of an existing file are kept -----------------------------------


def test_crlf_file_stays_crlf(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"a\r\nb\r\n")
    h.ok(h.read(h.root / "f.txt"))
    res = h.ok(h.write(h.root / "f.txt", "x\ny\nz\n"))
    assert (h.root / "f.txt").read_bytes() == b"x\r\ny\r\nz\r\n"
    assert res.details["crlf_converted"] is True and "CRLF" in res.content


def test_lf_content_equal_to_a_crlf_file_after_conversion_is_no_change(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"a\r\nb\r\n")
    h.ok(h.read(h.root / "f.txt"))
    res = h.ok(h.write(h.root / "f.txt", "a\nb\n"))
    assert res.details["changed"] is False and res.content.startswith("No change")


def test_crlf_content_into_crlf_file_is_not_doubled(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"a\r\n")
    h.ok(h.read(h.root / "f.txt"))
    h.ok(h.write(h.root / "f.txt", "x\r\ny\n"))
    assert (h.root / "f.txt").read_bytes() == b"x\r\ny\r\n"


def test_lf_file_keeps_what_was_given(h: Any) -> None:
    (h.root / "f.txt").write_bytes(b"a\n")
    h.ok(h.read(h.root / "f.txt"))
    h.ok(h.write(h.root / "f.txt", "x\r\ny\n"))
    assert (h.root / "f.txt").read_bytes() == b"x\r\ny\n"


def test_bom_and_latin1_are_kept(h: Any) -> None:
    (h.root / "bom.txt").write_bytes(codecs.BOM_UTF8 + b"old\n")
    (h.root / "l1.txt").write_bytes("café\n".encode("latin-1"))
    h.ok(h.read(h.root / "bom.txt"))
    h.ok(h.read(h.root / "l1.txt"))
    h.ok(h.write(h.root / "bom.txt", "new ü\n"))
    res = h.ok(h.write(h.root / "l1.txt", "crème\n"))
    assert (h.root / "bom.txt").read_bytes() == codecs.BOM_UTF8 + "new ü\n".encode()
    assert (h.root / "l1.txt").read_bytes() == "crème\n".encode("latin-1")
    assert "kept encoding latin-1" in res.content


def test_character_the_encoding_cannot_hold_is_refused(h: Any) -> None:
    (h.root / "l1.txt").write_bytes("café\n".encode("latin-1"))
    h.ok(h.read(h.root / "l1.txt"))
    res = h.err(h.write(h.root / "l1.txt", "snowman ☃\n"), "encoding_error")
    assert "latin-1" in res.content and "was not changed" in res.content
    assert (h.root / "l1.txt").read_bytes() == "café\n".encode("latin-1")


def test_utf16_file_stays_utf16(h: Any) -> None:
    (h.root / "w.txt").write_bytes("old\r\n".encode("utf-16"))
    h.ok(h.read(h.root / "w.txt"))
    h.ok(h.write(h.root / "w.txt", "nëw\n"))
    assert (h.root / "w.txt").read_bytes() == "nëw\r\n".encode("utf-16")


# -- atomicity ----------------------------------------------------------------


def test_write_goes_through_a_synced_temp_file_renamed_in_the_same_directory(
    h: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (h.root / "sub").mkdir()
    (h.root / "sub" / "f.txt").write_text("old\n")
    h.ok(h.read(h.root / "sub" / "f.txt"))
    ino = os.stat(h.root / "sub" / "f.txt").st_ino
    events: list[tuple[str, Any]] = []
    real_rename, real_fsync = os.rename, os.fsync

    def rename(src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
        events.append(("rename", (src, dst, os.readlink(f"/proc/self/fd/{src_dir_fd}"),
                                  os.readlink(f"/proc/self/fd/{dst_dir_fd}"))))
        assert (h.root / "sub" / src).read_text() == "new\n"  # complete before the switch
        assert (h.root / "sub" / "f.txt").read_text() == "old\n"
        real_rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "fsync", fsync)
    h.ok(h.write(h.root / "sub" / "f.txt", "new\n"))
    monkeypatch.undo()
    kinds = [e[0] for e in events]
    assert kinds == ["fsync", "rename", "fsync"]
    tmp_synced = events[0][1]
    src, dst, src_dir, dst_dir = events[1][1]
    assert src_dir == dst_dir == f"{h.root}/sub" and dst == "f.txt"
    assert tmp_synced == f"{h.root}/sub/{src}" and src.endswith(".tmp")
    assert events[2][1] == f"{h.root}/sub"  # the directory entry is made durable too
    assert os.stat(h.root / "sub" / "f.txt").st_ino != ino
    assert sorted(os.listdir(h.root / "sub")) == ["f.txt"]


def test_regression_crash_between_temp_write_and_rename_leaves_original(
    h: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = b"line 1\nline 2\r\n\xff binary-ish tail"
    (h.root / "f.txt").write_bytes(original)
    h.ok(h.read(h.root / "f.txt"))

    def broken_rename(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "rename", broken_rename)
    res = h.err(h.write(h.root / "f.txt", "new content\n"), "io_error")
    assert "original file is untouched" in res.content
    res = h.err(h.edit(h.root / "f.txt", "line 1", "LINE 1"), "io_error")
    assert (h.root / "f.txt").read_bytes() == original
    assert os.listdir(h.root) == ["f.txt"]  # the temp file was cleaned up
    assert h.ledger.seen_hash(f"{h.root}/f.txt") == hashlib.sha256(original).hexdigest()


def test_interrupt_between_temp_write_and_rename_leaves_original(
    h: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (h.root / "f.txt").write_text("original\n")
    h.ok(h.read(h.root / "f.txt"))

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        h.call("write", {"path": str(h.root / "f.txt"), "content": "new\n"})
    assert (h.root / "f.txt").read_text() == "original\n"
    assert os.listdir(h.root) == ["f.txt"]


def test_disk_full_while_writing_leaves_original(h: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (h.root / "f.txt").write_text("original\n")
    h.ok(h.read(h.root / "f.txt"))
    real_write = os.write
    calls = []

    def full(fd: int, data: Any) -> int:
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data)[:3])  # a short write first

    monkeypatch.setattr(os, "write", full)
    res = h.err(h.write(h.root / "f.txt", "a much longer new content\n"), "disk_full")
    monkeypatch.undo()
    assert res.error.retryable is False
    assert (h.root / "f.txt").read_text() == "original\n" and os.listdir(h.root) == ["f.txt"]


_KILL_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from tools import MemoryLedger, ToolContext, Workspace, native_tools, run_tool
    root, target, content = sys.argv[1], sys.argv[2], sys.argv[3]
    ledger = MemoryLedger()
    ctx = ToolContext(workspace=Workspace(root), ledger=ledger)
    tools = native_tools()
    read = run_tool(tools["read"], {"path": target}, ctx)
    assert read.ok, read.content
    ledger.observe(read)

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)  # the power goes out: temp written, not renamed

    os.rename = die
    tool = sys.argv[4]
    if tool == "write":
        res = run_tool(tools["write"], {"path": target, "content": content}, ctx)
    else:
        res = run_tool(tools["edit"], {"path": target, "old_string": "MIDDLE", "new_string": content},
                       ctx)
    print("survived", res)
    """
)


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_sigkill_between_temp_write_and_rename_leaves_original(h: Any, tool: str) -> None:
    noise = bytes(b % 255 + 1 for b in os.urandom(2000))  # no NUL: text with stray bytes
    original = b"head\r\n" + noise.replace(b"MIDDLE", b"x") + b"\nMIDDLE\ntail\n"
    target = h.root / "f.bin.txt"
    target.write_bytes(original)
    proc = subprocess.run([sys.executable, "-c", _KILL_CHILD, str(h.root), str(target),
                           "replacement " * 1000, tool], check=False, capture_output=True, text=True,
                           timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert "survived" not in proc.stdout
    assert target.read_bytes() == original
    strays = [n for n in os.listdir(h.root) if n != target.name]
    assert len(strays) == 1 and strays[0].endswith(".tmp")  # the complete, unrenamed temp file
    assert b"replacement" in (h.root / strays[0]).read_bytes()
    # The workspace is still usable: the stray temp file does not block the next write.
    h.ok(h.read(target))
    h.ok(h.write(target, "after the crash\n"))
    assert target.read_text() == "after the crash\n"


# -- concurrent writers --------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from tools import MemoryLedger, ToolContext, Workspace, native_tools, run_tool
    root, target, go, letter = sys.argv[1:5]
    ledger = MemoryLedger()
    ctx = ToolContext(workspace=Workspace(root), ledger=ledger)
    tools = native_tools()
    if sys.argv[5] != "create":
        ledger.observe(run_tool(tools["read"], {"path": target}, ctx))
    open(go + "." + letter, "w").close()  # ready: read done
    while not os.path.exists(go):
        time.sleep(0.001)
    if sys.argv[5] in ("write", "create"):
        content = (letter * 1023 + "\\n") * 1024  # 1 MiB, so writes take a while
        res = run_tool(tools["write"], {"path": target, "content": content}, ctx)
    else:
        res = run_tool(tools["edit"], {"path": target, "old_string": "MARK",
                                       "new_string": letter * 4096, "replace_all": True}, ctx)
    print(res.error.code if res.error else "ok")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["write", "edit", "create"])
def test_regression_concurrent_writers_were_all_told_ok_while_one_change_survived(
    h: Any, tmp_path: Path, tool: str
) -> None:
    """Several processes, each having read the file (or, for create, finding it absent),
    replace it at once: exactly one complete version is left, never a mix, and every
    other writer is told.  Before the directory lock, writers whose check ran before the
    winner's rename also reported ok (or created over a file they had never seen)."""
    target = h.root / "shared.txt"
    original = {"write": "original\n", "edit": ("x" * 1000 + "MARK\n") * 500, "create": ""}[tool]
    if tool != "create":
        target.write_text(original)
    go = tmp_path / "go"
    letters = "ABCDEF"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(h.root), str(target), str(go), c,
                               tool],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in letters]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"go.{c}").exists() for c in letters):  # every writer has read
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    outcomes = []
    for p in procs:
        out, errs = p.communicate(timeout=120)
        assert p.returncode == 0, errs
        outcomes.append(out.strip())
    data = target.read_text()
    if tool in ("write", "create"):
        versions = {(c * 1023 + "\n") * 1024 for c in letters}
    else:
        versions = {original.replace("MARK", c * 4096) for c in letters}
    assert data in versions, "a mix of writers' content"
    winner = letters.index(data[0] if tool != "edit" else data[1000])
    # Exactly one writer succeeded, and it is the one whose content is there: no other
    # writer was told "ok" while its change vanished.
    losing = "not_read" if tool == "create" else "file_changed"
    assert outcomes == [("ok" if i == winner else losing) for i in range(len(letters))]
    assert os.listdir(h.root) == ["shared.txt"]


def test_settings_model_refuses_unknown_keys() -> None:
    with pytest.raises(ValueError):
        ToolSettings.model_validate({"create_parents": True})
    with pytest.raises(ValueError):
        ToolSettings.model_validate({"new_file_mode": 0o10000})


def test_writer_waiting_on_the_lock_is_told_busy_after_the_wait(
    h: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    import tools._mutate

    monkeypatch.setattr(tools._mutate, "_LOCK_WAIT_S", 0.05)
    fd = os.open(h.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        res = h.err(h.write(h.root / "f.txt", "x"), "busy")
        assert res.error.retryable and "Retry" in res.content
    finally:
        os.close(fd)
    assert not (h.root / "f.txt").exists()
    h.ok(h.write(h.root / "f.txt", "x"))


def test_target_is_looked_at_again_once_the_lock_is_held(
    h: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file created while we waited for the lock is an existing file, not ours to clobber."""
    import fcntl
    import threading

    real_flock = fcntl.flock
    waiting = threading.Event()

    def flock(fd: int, op: int) -> None:
        try:
            real_flock(fd, op)
        except BlockingIOError:
            waiting.set()
            raise

    fd = os.open(h.root, os.O_RDONLY | os.O_DIRECTORY)
    real_flock(fd, fcntl.LOCK_EX)
    monkeypatch.setattr(fcntl, "flock", flock)
    results: list[Any] = []
    t = threading.Thread(target=lambda: results.append(h.write(h.root / "f.txt", "mine\n")))
    t.start()
    assert waiting.wait(30)  # the writer found no file and is now waiting for the lock
    (h.root / "f.txt").write_text("someone else's\n")
    os.close(fd)  # releases the lock
    t.join()
    h.err(results[0], "not_read")
    assert (h.root / "f.txt").read_text() == "someone else's\n"


def test_preview_is_the_diff_against_what_is_on_disk(h: Any) -> None:
    (h.root / "f.txt").write_text("one\ntwo\nthree\n")
    h.ok(h.read(h.root / "f.txt"))
    args = {"path": str(h.root / "f.txt"), "content": "one\n2\nthree\n"}
    preview = h.tools["write"].preview_of(args, h.ctx)
    assert preview is not None and "-two\n+2\n" in preview and "+one" not in preview
    assert (h.root / "f.txt").read_text() == "one\ntwo\nthree\n"
    new = h.tools["write"].preview_of({"path": str(h.root / "n.txt"), "content": "x\n"}, h.ctx)
    assert new is not None and "+x" in new
    assert h.tools["write"].preview_of({"path": "relative.txt", "content": "x"}, h.ctx) is None
