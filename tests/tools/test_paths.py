"""Path rules (§0.5 and issue 2): absolute only, resolved beneath the workspace,
no escape through `..`, symlinks or a race, secret paths refused for reading."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tools import ToolContext, ToolFailure, Workspace, run_tool
from tools._paths import SecretMatcher
from tools._settings import DEFAULT_SECRET_PATHS
from tools._text_files import open_regular_at

# -- absolute paths -----------------------------------------------------------


@pytest.mark.parametrize("rel", ["src/app.py", "./src/app.py", "app.py", "src/../app.py"])
@pytest.mark.parametrize("tool", ["read", "write", "edit", "glob"])
def test_relative_path_is_refused_with_its_absolute_form(h: Any, rel: str, tool: str) -> None:
    args = {"read": {"path": rel}, "write": {"path": rel, "content": "x"},
            "edit": {"path": rel, "old_string": "", "new_string": "x"},
            "glob": {"pattern": "*", "path": rel}}[tool]
    res = h.err(h.call(tool, args), "relative_path")
    absolute = os.path.normpath(os.path.join(h.root, rel))
    assert repr(absolute) in res.content
    assert res.details["suggestion"] == absolute
    assert "must be an absolute path" in res.content
    assert not (h.root / "src").exists() and not (h.root / "app.py").exists()


def test_paths_out_are_absolute(h: Any) -> None:
    (h.root / "src").mkdir()
    h.ok(h.write(h.root / "src" / "a.py", "x = 1\n"))
    res = h.ok(h.read(f"{h.root}/src/./../src//a.py"))
    assert res.details["path"] == f"{h.root}/src/a.py"
    assert h.ok(h.glob("**/*.py")).content == f"{h.root}/src/a.py"


# -- `..` ---------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["/../outside.txt", "/../../etc/passwd", "/a/../../x", "/.."])
def test_dotdot_escaping_the_root_is_refused(h: Any, suffix: str) -> None:
    (h.root.parent / "outside.txt").write_text("outside\n")
    res = h.err(h.read(str(h.root) + suffix), "outside_workspace")
    assert "outside the workspace" in res.content
    assert "outside\n" not in res.content
    h.err(h.write(str(h.root) + suffix, "x"), "outside_workspace")
    assert (h.root.parent / "outside.txt").read_text() == "outside\n"


def test_dotdot_that_stays_inside_is_fine(h: Any) -> None:
    (h.root / "a").mkdir()
    (h.root / "b.txt").write_text("b\n")
    assert h.ok(h.read(f"{h.root}/a/../b.txt")).details["path"] == f"{h.root}/b.txt"


def test_a_sibling_directory_sharing_the_root_prefix_is_outside(h: Any) -> None:
    sibling = Path(str(h.root) + "-evil")
    sibling.mkdir()
    (sibling / "f.txt").write_text("nope\n")
    h.err(h.read(sibling / "f.txt"), "outside_workspace")


# -- symlinks -----------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("OUTSIDE-CONTENT\n")
    return d


def test_symlink_final_component_to_outside_file_is_refused(h: Any, outside: Path) -> None:
    os.symlink(outside / "secret.txt", h.root / "link.txt")
    res = h.err(h.read(h.root / "link.txt"), "symlink_escape")
    assert "OUTSIDE" not in res.content and "points outside the workspace" in res.content
    h.err(h.write(h.root / "link.txt", "clobber"), "symlink_escape")
    h.err(h.edit(h.root / "link.txt", "OUTSIDE", "x"), "symlink_escape")
    assert (outside / "secret.txt").read_text() == "OUTSIDE-CONTENT\n"


def test_relative_symlink_climbing_out_is_refused(h: Any, outside: Path) -> None:
    (h.root / "sub").mkdir()
    os.symlink("../../outside/secret.txt", h.root / "sub" / "rel.txt")
    h.err(h.read(h.root / "sub" / "rel.txt"), "symlink_escape")


def test_symlink_intermediate_directory_to_outside_is_refused(h: Any, outside: Path) -> None:
    os.symlink(outside, h.root / "dlink")
    h.err(h.read(h.root / "dlink" / "secret.txt"), "symlink_escape")
    h.err(h.write(h.root / "dlink" / "new.txt", "x"), "symlink_escape")
    h.err(h.edit(h.root / "dlink" / "new.txt", "", "x"), "symlink_escape")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_symlink_final_directory_to_outside_is_refused(h: Any, outside: Path) -> None:
    os.symlink(outside, h.root / "dlink")
    h.err(h.glob("*", h.root / "dlink"), "symlink_escape")
    res = h.ok(h.glob("**"))
    assert "secret.txt" not in res.content


def test_nested_symlink_chain_ending_outside_is_refused(h: Any, outside: Path) -> None:
    (h.root / "a").mkdir()
    os.symlink(outside, h.root / "far")
    os.symlink("../far", h.root / "a" / "near")  # inside -> inside link -> outside
    h.err(h.read(h.root / "a" / "near" / "secret.txt"), "symlink_escape")


def test_symlinks_staying_inside_are_followed(h: Any) -> None:
    (h.root / "real").mkdir()
    (h.root / "real" / "f.txt").write_text("inside\n")
    os.symlink("real", h.root / "alias")
    os.symlink(h.root / "real" / "f.txt", h.root / "flink")
    res = h.ok(h.read(h.root / "alias" / "f.txt"))
    assert res.details["path"] == f"{h.root}/real/f.txt"
    assert h.ok(h.read(h.root / "flink")).details["path"] == f"{h.root}/real/f.txt"
    # The ledger keys on the real path, so an edit through the alias is allowed.
    h.ok(h.edit(h.root / "alias" / "f.txt", "inside", "changed"))
    assert (h.root / "real" / "f.txt").read_text() == "changed\n"
    assert (h.root / "flink").is_symlink()


@pytest.mark.parametrize("layout", ["self", "pair", "dir"])
def test_symlink_loops_are_refused(h: Any, layout: str) -> None:
    if layout == "self":
        os.symlink("loop", h.root / "loop")
        target = h.root / "loop"
    elif layout == "pair":
        os.symlink("b", h.root / "a")
        os.symlink("a", h.root / "b")
        target = h.root / "a"
    else:
        os.symlink("d2", h.root / "d1")
        os.symlink("d1", h.root / "d2")
        target = h.root / "d1" / "f.txt"
    res = h.err(h.read(target), "symlink_loop")
    assert "more than 40 symlinks" in res.content
    h.err(h.write(target, "x"), "symlink_loop")


def test_dangling_symlink_inside_reads_as_missing(h: Any) -> None:
    os.symlink("nowhere.txt", h.root / "dangling")
    h.err(h.read(h.root / "dangling"), "not_found")


# -- races between check and open -------------------------------------------


def test_directory_swapped_for_symlink_during_the_walk_is_refused(
    h: Any, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap happens right before the walk opens the directory (check passed)."""
    (h.root / "d").mkdir()
    (h.root / "d" / "secret.txt").write_text("inside\n")
    real_open = os.open
    swapped: list[bool] = []

    def swapping_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == "d" and dir_fd is not None and not swapped:
            os.rename(h.root / "d", h.root / "d.moved")
            os.symlink(outside, h.root / "d")
            swapped.append(True)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", swapping_open)
    res = h.err(h.read(h.root / "d" / "secret.txt"), "symlink_escape")
    assert swapped and "OUTSIDE" not in res.content


def test_nofollow_open_refuses_a_final_component_swapped_after_the_check(
    h: Any, outside: Path
) -> None:
    (h.root / "f.txt").write_text("inside\n")
    ws = Workspace(str(h.root))
    with ws.locate(str(h.root / "f.txt")) as loc:
        assert loc.exists
        os.replace(h.root / "f.txt", h.root / "f.old")
        os.symlink(outside / "secret.txt", h.root / "f.txt")
        with pytest.raises(ToolFailure) as exc:
            open_regular_at(loc.dir_fd, loc.name, loc.path)
    assert exc.value.code == "changed_during_call"


def test_a_file_swapped_for_a_fifo_after_locate_is_refused_not_waited_on(h: Any) -> None:
    # The tools check the type with lstat, then open: the opened descriptor is checked
    # again (foundation.open_regular_fd), so a FIFO put in between cannot hang a read.
    (h.root / "f.txt").write_text("inside\n")
    ws = Workspace(str(h.root))
    with ws.locate(str(h.root / "f.txt")) as loc:
        os.replace(h.root / "f.txt", h.root / "f.old")
        os.mkfifo(h.root / "f.txt")
        with pytest.raises(ToolFailure) as exc:
            open_regular_at(loc.dir_fd, loc.name, loc.path)
    assert exc.value.code == "not_a_regular_file" and "named pipe" in exc.value.message


def test_held_directory_fd_keeps_reads_inside_when_the_directory_is_swapped(
    h: Any, outside: Path
) -> None:
    (h.root / "d").mkdir()
    (h.root / "d" / "secret.txt").write_text("inside\n")
    ws = Workspace(str(h.root))
    with ws.locate(str(h.root / "d" / "secret.txt")) as loc:
        os.rename(h.root / "d", h.root / "d.moved")
        os.symlink(outside, h.root / "d")
        fd = open_regular_at(loc.dir_fd, loc.name, loc.path)
        try:
            assert os.read(fd, 100) == b"inside\n"
        finally:
            os.close(fd)


def test_concurrent_directory_symlink_flipping_never_leaks_outside(h: Any, outside: Path) -> None:
    """A thread flips d between a real directory and a link outside while we read."""
    (h.root / "real").mkdir()
    (h.root / "real" / "secret.txt").write_text("inside\n")
    os.symlink(outside, h.root / "evil")
    stop = threading.Event()

    def flipper() -> None:
        while not stop.is_set():
            for src in ("real", "evil"):
                try:
                    os.rename(h.root / src, h.root / "tmp")
                    os.rename(h.root / "tmp", h.root / "d")
                    os.rename(h.root / "d", h.root / src)
                except OSError:
                    pass

    t = threading.Thread(target=flipper)
    t.start()
    seen: set[str] = set()
    try:
        for _ in range(400):
            res = h.call("read", {"path": f"{h.root}/d/secret.txt"})
            assert "OUTSIDE" not in res.content
            seen.add(res.error.code if res.error else "ok")
    finally:
        stop.set()
        t.join()
    # Outcomes vary with timing; every one is a clean refusal or the inside file.
    assert seen <= {"ok", "symlink_escape", "parent_not_found", "not_found", "not_a_directory",
                    "changed_during_call"}


@pytest.mark.parametrize("where", ["intermediate", "final"])
def test_regression_symlink_vanishing_before_readlink_was_internal_error(
    h: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Found by the flipping test: the link was gone between lstat and readlink."""
    (h.root / "real").mkdir()
    (h.root / "real" / "f.txt").write_text("x\n")
    os.symlink("real", h.root / "d")
    os.symlink("real/f.txt", h.root / "fl")

    def vanished(*args: Any, **kwargs: Any) -> str:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "readlink", vanished)
    target = h.root / "d" / "f.txt" if where == "intermediate" else h.root / "fl"
    res = h.err(h.read(target), "changed_during_call")
    assert res.error.retryable


# -- secret paths -------------------------------------------------------------

SECRETS = [
    ".env",
    ".env.production",
    "sub/.env",
    "certs/server.pem",
    "deploy.key",
    "id_rsa",
    "id_rsa.pub",
    "home/.ssh/config",
    ".ssh/known_hosts",
    ".aws/credentials",
    ".netrc",
    ".git-credentials",
]


@pytest.mark.parametrize("rel", SECRETS)
def test_secret_paths_are_refused_for_reading_with_the_rule(h: Any, rel: str) -> None:
    target = h.root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("TOKEN=hunter2\n")
    res = h.err(h.read(target), "secret_path")
    assert "hunter2" not in res.content
    assert "secret-path rule" in res.content and str(target) in res.content
    assert h.ledger.seen_hash(str(target)) is None


def test_secret_refusal_also_blocks_overwrite_and_edit(h: Any) -> None:
    (h.root / ".env").write_text("TOKEN=hunter2\n")
    h.err(h.edit(h.root / ".env", "hunter2", "x"), "secret_path")
    h.ledger.hashes[str(h.root / ".env")] = "forged"  # even with a (forged) read on record
    h.err(h.edit(h.root / ".env", "hunter2", "x"), "secret_path")
    h.err(h.write(h.root / ".env", "x"), "secret_path")
    assert (h.root / ".env").read_text() == "TOKEN=hunter2\n"


@pytest.mark.parametrize("rel", [".env.example", ".env.sample", "env.py", "docs/ssh.md", "key.txt",
                                 "aws/credentials.md", "pem.txt"])
def test_look_alike_names_are_not_secret(h: Any, rel: str) -> None:
    target = h.root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("FOO=example\n")
    assert "FOO=example" in h.ok(h.read(target)).content


def test_symlink_pointing_at_a_secret_is_refused(h: Any) -> None:
    (h.root / ".env").write_text("TOKEN=hunter2\n")
    os.symlink(".env", h.root / "notes.txt")
    (h.root / ".ssh").mkdir()
    (h.root / ".ssh" / "id").write_text("PRIVATE\n")
    os.symlink(".ssh", h.root / "harmless")
    res = h.err(h.read(h.root / "notes.txt"), "secret_path")
    assert "hunter2" not in res.content and f"{h.root}/.env" in res.content
    h.err(h.read(h.root / "harmless" / "id"), "secret_path")


def test_missing_file_suggestions_never_name_secrets(h: Any) -> None:
    (h.root / ".env").write_text("x\n")
    res = h.err(h.read(h.root / ".envv"), "not_found")
    assert f"{h.root}/.env" not in res.details["suggestions"]


def test_operator_configured_secret_list_replaces_the_default(h: Any) -> None:
    for rel, text in [("prod/db.yaml", "pw: 1\n"), ("a/b.vault", "v\n"), ("a/keep.vault", "k\n"),
                      (".env", "E=1\n")]:
        (h.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (h.root / rel).write_text(text)
    op = h.with_settings(secret_paths=("prod/", "*.vault", "!keep.vault"))
    op.err(op.read(h.root / "prod" / "db.yaml"), "secret_path")
    res = op.err(op.read(h.root / "a" / "b.vault"), "secret_path")
    assert "'*.vault'" in res.content
    op.ok(op.read(h.root / "a" / "keep.vault"))
    op.ok(op.read(h.root / ".env"))  # the operator's list replaced the defaults


def test_operator_secret_list_from_config_json_reaches_the_cli(
    workspace: Path, abhed_home: Path, cli: Any
) -> None:
    (abhed_home / "config.json").write_text('{"tools": {"secret_paths": ["*.cfg"]}}')
    (workspace / "app.cfg").write_text("password=1\n")
    rc, result, _, _ = cli("read", f'{{"path": "{workspace}/app.cfg"}}', "--workspace", str(workspace))
    assert rc == 0 and result is not None
    assert result["error"]["code"] == "secret_path" and "password" not in result["content"]


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (".env", ".env"),
        ("a/b/.env.local", ".env.*"),
        (".env.example", None),
        ("x/.ssh/id", ".ssh/"),
        (".ssh", None),  # the directory itself is not a file inside it
        ("a/.aws/credentials", "**/.aws/credentials"),
        (".aws/credentials", "**/.aws/credentials"),
        ("deep/er/key.pem", "*.pem"),  # a name pattern matches at any depth
        ("x/.ssh/sub/known_hosts", ".ssh/"),
        ("credentials", None),
        ("id_ed25519", "id_ed25519*"),
        ("server.PEM", None),  # case-sensitive, like gitignore on Linux
    ],
)
def test_default_secret_matcher(rel: str, expected: str | None) -> None:
    assert SecretMatcher(DEFAULT_SECRET_PATHS).match(rel) == expected


def test_secret_matcher_ignores_comments_and_blanks() -> None:
    m = SecretMatcher(["# comment", "", "  ", "/top/secret"])
    assert m.match("top/secret") == "/top/secret"
    assert m.match("x/top/secret") is None  # a leading '/' anchors, as in .gitignore
    assert m.match("# comment") is None


def test_workspace_root_must_be_a_directory(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError):
        Workspace(str(f))
    with pytest.raises(ValueError):
        Workspace(str(tmp_path / "missing"))


def test_workspace_given_through_a_symlink_uses_the_real_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f.txt").write_text("x\n")
    os.symlink(real, tmp_path / "alias")
    ws = Workspace(str(tmp_path / "alias"))
    assert ws.root == str(real.resolve())
    with ws.locate(str(real / "f.txt")) as loc:
        assert loc.exists


def test_regression_symlink_escape_message_named_the_parent_not_the_link(
    h: Any, outside: Path
) -> None:
    (h.root / "a").mkdir()
    os.symlink(outside, h.root / "a" / "out")
    os.symlink(outside / "secret.txt", h.root / "a" / "flink")
    res = h.err(h.read(h.root / "a" / "out" / "secret.txt"), "symlink_escape")
    assert f"({h.root}/a/out -> {outside})" in res.content
    res = h.err(h.read(h.root / "a" / "flink"), "symlink_escape")
    assert f"({h.root}/a/flink -> {outside}/secret.txt)" in res.content


@pytest.mark.parametrize("tool", ["read", "write", "edit", "glob"])
def test_regression_removed_workspace_root_was_internal_error(h: Any, tool: str) -> None:
    ws = Workspace(str(h.root))  # built while the root exists ...
    os.rmdir(h.root)  # ... which disappears before the call
    args = {"read": {"path": f"{h.root}/f"}, "write": {"path": f"{h.root}/f", "content": "x"},
            "edit": {"path": f"{h.root}/f", "old_string": "", "new_string": "x"},
            "glob": {"pattern": "*"}}[tool]
    res = run_tool(h.tools[tool], args, ToolContext(workspace=ws))
    assert res.error is not None and res.error.code == "workspace_unavailable", res.content
    assert "tell the user" in res.content
