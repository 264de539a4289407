"""The small mechanisms every package shares: regular files, digests, process groups, paths."""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pytest

import bundle
from bundle import BundleError
from foundation import (
    FileMissing,
    FileRefused,
    NotRegularFile,
    digest_file,
    is_within,
    open_regular,
    open_regular_fd,
    read_regular,
    reraised_as,
    terminate_group,
    under,
    usable_cpus,
)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


@dataclass(frozen=True)
class Reader:
    """One package's face of the regular-file rule: its two calls and what each refusal
    raises.  ``bundle`` keeps foundation's rule and words but speaks its own root."""

    open: Callable[..., BinaryIO]
    read: Callable[..., bytes]
    not_regular: type[Exception]  # a FIFO, a device, a directory
    missing: type[Exception]
    too_large: type[Exception]


READERS = [
    pytest.param(Reader(open_regular, read_regular, NotRegularFile, FileMissing, FileRefused),
                 id="foundation"),
    pytest.param(Reader(bundle.open_regular, bundle.read_regular, BundleError, BundleError,
                        BundleError), id="bundle"),
]


@pytest.mark.parametrize("reader", READERS)
def test_open_regular_refuses_a_fifo_a_device_a_directory_and_nothing(
        reader: Reader, fifo: Path, tmp_path: Path) -> None:
    with pytest.raises(reader.not_regular, match="named pipe") as info:
        reader.open(fifo, "bundle")
    if isinstance(info.value, NotRegularFile):  # bundle's error carries the words alone
        assert info.value.kind == "a named pipe (FIFO)"
    for device in ("/dev/null", "/dev/zero"):
        with pytest.raises(reader.not_regular, match="character device"):
            reader.open(Path(device))
    with pytest.raises(reader.not_regular, match="directory"):
        reader.open(tmp_path)
    with pytest.raises(reader.missing, match=f"^bundle {tmp_path}/absent: no such file$"):
        reader.open(tmp_path / "absent", "bundle")
    with pytest.raises(reader.missing, match="no such file"):
        reader.open(tmp_path / "absent")


@pytest.mark.parametrize("reader", READERS)
def test_read_regular_caps_the_size_and_the_descriptor_blocks_again(reader: Reader,
                                                                    tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert reader.read(f, 100) == b"x" * 100
    with pytest.raises(reader.too_large, match="larger than 99 bytes"):
        reader.read(f, 99)
    with reader.open(f) as fh:  # O_NONBLOCK was cleared: an ordinary blocking file object
        assert not fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK


def test_open_regular_fd_beneath_a_directory_refuses_a_final_symlink(tmp_path: Path,
                                                                     fifo: Path) -> None:
    (tmp_path / "real").write_text("r")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = open_regular_fd("real", dir_fd=dir_fd, follow_symlinks=False)
        assert os.read(fd, 5) == b"r"
        os.close(fd)
        with pytest.raises(OSError):  # ELOOP: the caller words it
            open_regular_fd("link", dir_fd=dir_fd, follow_symlinks=False)
        with pytest.raises(NotRegularFile):  # checked on the descriptor, not before opening
            open_regular_fd("pipe", dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.close(dir_fd)


def test_digest_file_streams_size_and_progress(tmp_path: Path) -> None:
    f = tmp_path / "f"
    data = os.urandom(3 * (1 << 20) + 7)
    f.write_bytes(data)
    seen: list[int] = []
    d = digest_file(f, progress=seen.append)
    assert (d.sha256, d.size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert seen == [1 << 20] * 3 + [7]
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    assert digest_file(empty).sha256 == hashlib.sha256(b"").hexdigest()
    with pytest.raises(FileNotFoundError):
        digest_file(tmp_path / "absent")


def test_digest_file_refuses_a_fifo_at_once_as_an_oserror(fifo: Path) -> None:
    # A FIFO planted where a weight file or a written file was: refused, never read forever;
    # an OSError too, so every caller that handles a failed open handles it.
    with pytest.raises(NotRegularFile) as info:
        digest_file(fifo)
    assert isinstance(info.value, OSError) and info.value.kind == "a named pipe (FIFO)"


def _spawn(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                            stdout=subprocess.PIPE)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_terminate_group_ends_the_leader_and_what_it_left_behind() -> None:
    # The leader starts a grandchild that ignores SIGTERM, prints its pid, then waits.
    proc = _spawn(
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time\\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\nprint(1, flush=True)\\ntime.sleep(60)'],"
        " stdout=subprocess.PIPE)\n"
        "c.stdout.readline()\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(60)\n")
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    code = terminate_group(proc, grace_s=2.0)
    proc.stdout.close()
    assert code == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)  # it is not our child: init reaps it after the SIGKILL
    assert not _alive(grandchild)


def test_terminate_group_with_no_grace_kills_at_once_and_an_exited_child_is_fine() -> None:
    proc = _spawn("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                  "print(1, flush=True)\ntime.sleep(60)")
    assert proc.stdout is not None and proc.stdout.readline()
    t0 = time.monotonic()
    assert terminate_group(proc, grace_s=0) == -signal.SIGKILL
    assert time.monotonic() - t0 < 5
    proc.stdout.close()
    done = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    done.wait()
    assert terminate_group(done) == 0  # already gone: no error, its code


@pytest.mark.parametrize("path, root, inside", [
    ("/ws", "/ws", True),
    ("/ws/a/b", "/ws", True),
    ("/ws/a", "/ws/", True),
    ("/ws-other/a", "/ws", False),
    ("/w", "/ws", False),
    ("/", "/ws", False),
    ("/anything", "/", True),
    ("/", "/", True),
    (Path("/ws/x"), Path("/ws"), True),
])
def test_is_within_compares_whole_components(path: str, root: str, inside: bool) -> None:
    assert is_within(path, root) is inside


class _OwnError(Exception):
    """A package's own error root, as each package has one."""


def test_reraised_as_tells_a_foundation_refusal_in_the_package_error_and_its_words(
        tmp_path: Path) -> None:
    with pytest.raises(_OwnError) as info, reraised_as(_OwnError):
        read_regular(tmp_path / "absent", 10, "record")
    assert isinstance(info.value, _OwnError) and "absent" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(ValueError, match="not ours"), reraised_as(_OwnError):
        raise ValueError("not ours")  # anything else passes through untouched


@dataclass
class _Kept:
    home: Path
    log = under("logs", "today.log", root="home")


def test_under_names_a_path_beneath_the_root_as_it_is_now() -> None:
    kept = _Kept(Path("/srv/a"))
    assert kept.log == Path("/srv/a/logs/today.log")
    kept.home = Path("/srv/b")  # computed on each read: it follows the root
    assert kept.log == Path("/srv/b/logs/today.log")
    assert isinstance(_Kept.log, under)  # on the class: the descriptor, as a property is
    with pytest.raises(AttributeError, match="log is under"):
        kept.log = Path("/elsewhere")
    assert kept.log == Path("/srv/b/logs/today.log")


def test_usable_cpus_follows_the_affinity_not_the_machine() -> None:
    """A process held to one CPU (taskset, a container's cpuset) gets one worker."""
    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)
    one = subprocess.run(
        [sys.executable, "-c", "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})"
         "; from foundation import usable_cpus; print(usable_cpus())"],
        capture_output=True, text=True, check=True, timeout=60)
    assert one.stdout.strip() == "1"
