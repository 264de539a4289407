"""grep: schema, RE2 refusals, output shape, caps, files policy; every test on both engines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tools import ToolContext, ToolResult, ToolSettings, Workspace, native_tools, run_tool
from tools._grep import find_rg, select_engine
from tools._settings import DEFAULT_SECRET_PATHS
from tools.grep import Grep

ENGINES = ["python", "ripgrep"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def grep(ws: Path, engine: str, settings: dict[str, Any] | None = None, **args: Any) -> ToolResult:
    st = ToolSettings(grep_engine=engine, **(settings or {}))  # type: ignore[arg-type]
    ctx = ToolContext(Workspace(str(ws), DEFAULT_SECRET_PATHS), st)
    result = run_tool(Grep(), args, ctx)
    if result.ok:
        assert result.details["engine"] == engine
    return result


def write(root: Path, rel: str, data: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        p.write_text(data, encoding="utf-8")
    else:
        p.write_bytes(data)
    return p


def test_grep_is_registered_and_ripgrep_is_installed_for_ci() -> None:
    assert "grep" in native_tools()
    assert find_rg() is not None, "the ripgrep wheel in the dev extras must provide rg"
    schema = Grep.input_schema()
    assert schema["required"] == ["pattern"]
    assert set(schema["properties"]) == {
        "pattern", "path", "glob", "output_mode", "context", "case_insensitive", "multiline"}


def test_files_with_matches_is_default_sorted_and_absolute(workspace: Path, engine: str) -> None:
    write(workspace, "b.py", "needle\n")
    write(workspace, "a/z.py", "x needle y\n")
    write(workspace, "a/c.txt", "nothing\n")
    r = grep(workspace, engine, pattern="needle")
    assert r.ok
    assert r.content.splitlines() == [str(workspace / "a/z.py"), str(workspace / "b.py")]


def test_empty_result_has_fixed_form(workspace: Path, engine: str) -> None:
    write(workspace, "a.txt", "hello\n")
    for mode in ("files_with_matches", "content", "count"):
        r = grep(workspace, engine, pattern="absent", output_mode=mode)
        assert r.ok and r.content == "[no matches: absent]"
        assert r.details["matched_files"] == 0


def test_content_marks_matches_and_context_differently(workspace: Path, engine: str) -> None:
    write(workspace, "f.txt", "one\ntwo\nthree match\nfour\nfive\nsix\nseven\neight match\n")
    r = grep(workspace, engine, pattern="match", output_mode="content", context=1)
    p = str(workspace / "f.txt")
    assert r.content.splitlines() == [
        f"{p}-2-two", f"{p}:3:three match", f"{p}-4-four", "--",
        f"{p}-7-seven", f"{p}:8:eight match",
    ]


def test_context_requires_content_mode(workspace: Path, engine: str) -> None:
    r = grep(workspace, engine, pattern="x", context=2)
    assert not r.ok and r.error is not None and "content" in r.content


def test_count_mode_counts_matching_lines_per_file(workspace: Path, engine: str) -> None:
    write(workspace, "a.txt", "x x x\nx\ny\n")
    write(workspace, "b.txt", "y\nx\n")
    r = grep(workspace, engine, pattern="x", output_mode="count")
    assert r.content.splitlines() == [f"{workspace / 'a.txt'}:2", f"{workspace / 'b.txt'}:1"]


def test_content_caps_at_50_lines_per_file_and_100_total(workspace: Path, engine: str) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        write(workspace, name, "hit\n" * 70)
    r = grep(workspace, engine, pattern="hit", output_mode="content")
    lines = r.content.splitlines()
    assert sum(1 for ln in lines if ":hit" in ln) == 100
    assert r.truncated
    assert f"[{workspace / 'a.txt'}: more matching lines after line 50 not shown." in r.content
    assert "[truncated: 100 matching lines shown from 2 of 3 matching files" in r.content
    assert "Narrow" in lines[-1]


def test_long_lines_are_cut(workspace: Path, engine: str) -> None:
    write(workspace, "min.js", "a" * 5000 + "needle" + "\n")
    r = grep(workspace, engine, pattern="needle", output_mode="content")
    assert "[line truncated: 5006 characters]" in r.content
    assert len(r.content) < 700


def test_case_insensitive_is_unicode_aware(workspace: Path, engine: str) -> None:
    write(workspace, "u.txt", "ÉCOLE\nother\n")
    r = grep(workspace, engine, pattern="école", case_insensitive=True, output_mode="count")
    assert r.content == f"{workspace / 'u.txt'}:1"


def test_perl_classes_are_ascii_like_re2(workspace: Path, engine: str) -> None:
    write(workspace, "u.txt", "café\ncafe\n")
    r = grep(workspace, engine, pattern=r"caf\w\b", output_mode="content")
    assert r.content == f"{workspace / 'u.txt'}:2:cafe"


def test_line_mode_never_crosses_lines_and_multiline_does(workspace: Path, engine: str) -> None:
    write(workspace, "m.txt", "foo\nbar\n")
    assert grep(workspace, engine, pattern=r"foo\sbar").content.startswith("[no matches")
    r = grep(workspace, engine, pattern=r"foo\nbar")
    assert not r.ok and r.error is not None and r.error.code == "newline_in_pattern"
    r = grep(workspace, engine, pattern=r"foo.bar", multiline=True, output_mode="content")
    p = workspace / "m.txt"
    assert r.content.splitlines() == [f"{p}:1:foo", f"{p}:2:bar"]


def test_anchors_are_line_anchors(workspace: Path, engine: str) -> None:
    write(workspace, "a.txt", "x\nstart here\nend\n")
    r = grep(workspace, engine, pattern=r"^start", output_mode="count")
    assert r.content.endswith(":1")
    r = grep(workspace, engine, pattern=r"\Aend\z", output_mode="count")
    assert r.content.endswith(":1")
    r = grep(workspace, engine, pattern=r"^$", output_mode="count")
    assert r.content.startswith("[no matches")


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("foo(?=bar)", "lookahead"),
        ("foo(?!bar)", "negative lookahead"),
        ("(?<=a)b", "lookbehind"),
        ("(?<!a)b", "negative lookbehind"),
        (r"(a)\1", "backreference"),
        ("(?P<x>a)(?P=x)", "backreference"),
        (r"\k<x>", "backreference"),
        ("a++", "possessive"),
        ("a{2}+", "possessive"),
        ("(?>abc)", "atomic group"),
        (r"abc\Z", r"\Z"),
        ("(?(1)a|b)", "conditional"),
        ("(?R)", "recursion"),
        ("(?x) a b", "verbose"),
        (r"\K", r"\K"),
    ],
)
def test_pcre_constructs_are_refused_by_name(workspace: Path, pattern: str, construct: str) -> None:
    r = grep(workspace, "python", pattern=pattern)
    assert not r.ok and r.error is not None and r.error.code == "unsupported_regex"
    assert construct in r.content
    assert "Instead," in r.content


def test_pcre_lookalikes_inside_classes_and_escapes_are_fine(workspace: Path, engine: str) -> None:
    write(workspace, "a.txt", "(?=x) a++ \\Z\n")
    r = grep(workspace, engine, pattern=r"[(][?]=x\) a\+\+ \\Z", output_mode="count")
    assert r.ok and r.content.endswith(":1")


@pytest.mark.parametrize(
    ("pattern", "code"),
    [
        ("(unclosed", "invalid_regex"),
        ("a{1001}", "invalid_regex"),
        ("", "invalid_pattern"),
        ("a\x00b", "invalid_pattern"),
        ("x" * 5000, "pattern_too_large"),
        ("((((((((((a{100}){100}){100}){100}){100}){100}){100}){100}){100}){100})", "invalid_regex"),
    ],
)
def test_bad_patterns_get_clear_errors(workspace: Path, pattern: str, code: str) -> None:
    r = grep(workspace, "python", pattern=pattern)
    assert not r.ok and r.error is not None
    assert r.error.code in (code, "pattern_too_large"), r.content


def test_pathological_patterns_run_in_linear_time(workspace: Path, engine: str) -> None:
    write(workspace, "a.txt", "a" * 20000 + "\n")
    for pattern in ("(a*)*b", "(a|aa)+$x", "(x+x+)+y", "(.*a){12}z"):
        r = grep(workspace, engine, pattern=pattern)
        assert r.ok and r.content.startswith("[no matches"), pattern


def test_wrong_argument_types_are_refused(workspace: Path) -> None:
    ctx = ToolContext(Workspace(str(workspace)))
    for args in ({}, {"pattern": 3}, {"pattern": "x", "output_mode": "lines"},
                 {"pattern": "x", "context": -1}, {"pattern": "x", "context": 1000},
                 {"pattern": "x", "bogus": True}, ["x"]):
        r = run_tool(Grep(), args, ctx)
        assert not r.ok and r.error is not None and r.error.code == "invalid_arguments", args


def test_relative_and_outside_paths_are_refused(workspace: Path, engine: str, tmp_path: Path) -> None:
    r = grep(workspace, engine, pattern="x", path="src")
    assert r.error is not None and r.error.code == "relative_path"
    assert str(workspace / "src") in r.content
    r = grep(workspace, engine, pattern="x", path=str(tmp_path))
    assert r.error is not None and r.error.code == "outside_workspace"
    r = grep(workspace, engine, pattern="x", path=str(workspace / "nope"))
    assert r.error is not None and r.error.code == "not_found"
    r = grep(workspace, engine, pattern="x", path=str(workspace) + "/\x00")
    assert r.error is not None and r.error.code == "invalid_path"


def test_path_may_be_a_single_file(workspace: Path, engine: str) -> None:
    write(workspace, "one.txt", "alpha\nbeta\n")
    write(workspace, "two.txt", "alpha\n")
    r = grep(workspace, engine, pattern="alpha", path=str(workspace / "one.txt"), output_mode="content")
    assert r.content == f"{workspace / 'one.txt'}:1:alpha"


def test_glob_filters_by_name_or_by_relative_path(workspace: Path, engine: str) -> None:
    write(workspace, "src/a.py", "hit\n")
    write(workspace, "src/deep/b.py", "hit\n")
    write(workspace, "src/c.md", "hit\n")
    r = grep(workspace, engine, pattern="hit", glob="*.py")
    assert r.content.splitlines() == [str(workspace / "src/a.py"), str(workspace / "src/deep/b.py")]
    r = grep(workspace, engine, pattern="hit", glob="src/*.py")
    assert r.content.splitlines() == [str(workspace / "src/a.py")]
    r = grep(workspace, engine, pattern="hit", glob="!*.py")
    assert r.content.splitlines() == [str(workspace / "src/c.md")]
    r = grep(workspace, engine, pattern="hit", glob="../*")
    assert r.error is not None and r.error.code == "invalid_glob"


def test_binary_files_are_skipped_and_counted(workspace: Path, engine: str) -> None:
    write(workspace, "blob.bin", b"needle\x00\x01\x02")
    write(workspace, "late.bin", b"x" * 9000 + b"\x00needle\n")  # NUL after 8 KiB: text
    write(workspace, "text.txt", "needle\n")
    r = grep(workspace, engine, pattern="needle")
    assert r.content.splitlines()[:2] == [str(workspace / "late.bin"), str(workspace / "text.txt")]
    assert r.details["binary_skipped"] == 1
    assert r.details["binary_files"] == [str(workspace / "blob.bin")]
    assert "1 binary file(s) also match and were skipped" in r.content


def test_non_utf8_files_are_searched_as_bytes(workspace: Path, engine: str) -> None:
    write(workspace, "latin1.txt", "caf\xe9 needle\n".encode("latin-1"))
    r = grep(workspace, engine, pattern="needle", output_mode="content")
    assert r.content == f"{workspace / 'latin1.txt'}:1:caf\ufffd needle"
    r = grep(workspace, engine, pattern="caf.", output_mode="count")
    assert r.content.startswith("[no matches")  # '.' is a character, never a stray byte


def test_secret_files_are_never_searched(workspace: Path, engine: str) -> None:
    write(workspace, ".env", "TOKEN=needle\n")
    write(workspace, "keys/server.pem", "needle\n")
    write(workspace, ".ssh/config", "needle\n")
    write(workspace, ".env.example", "TOKEN=needle\n")
    r = grep(workspace, engine, pattern="needle")
    assert r.content.splitlines() == [str(workspace / ".env.example")]
    assert r.details["secret_skipped"] == 3
    r = grep(workspace, engine, pattern="needle", path=str(workspace / ".env"))
    assert r.error is not None and r.error.code == "secret_path"


def test_ignores_default_excludes_operator_list_and_hidden_policy(workspace: Path, engine: str) -> None:
    for rel in ("node_modules/x.js", "dist/x.js", "target/x", "__pycache__/x.pyc",
                "build/out.txt", "keep/.hidden.txt", ".github/ci.yml"):
        write(workspace, rel, "needle\n")
    r = grep(workspace, engine, {"ignore": ("build/",)}, pattern="needle")
    assert r.content.splitlines() == [str(workspace / ".github/ci.yml"),
                                      str(workspace / "keep/.hidden.txt")]


def test_symlinks_are_not_followed(workspace: Path, engine: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.txt").write_text("needle\n")
    os.symlink(outside, workspace / "link")
    os.symlink(outside / "s.txt", workspace / "file-link.txt")
    r = grep(workspace, engine, pattern="needle")
    assert r.content.startswith("[no matches")


def test_gitignore_rules_in_a_plain_tree(workspace: Path, engine: str) -> None:
    write(workspace, ".gitignore", "*.log\n!keep.log\n/top.txt\nbuilddir/\n")
    write(workspace, "sub/.gitignore", "local.txt\n")
    for rel in ("a.log", "keep.log", "top.txt", "sub/top.txt", "builddir/x.txt",
                "sub/local.txt", "other/local.txt"):
        write(workspace, rel, "needle\n")
    r = grep(workspace, engine, pattern="needle")
    assert r.content.splitlines() == [str(workspace / p) for p in
                                      ("keep.log", "other/local.txt", "sub/top.txt")]


def test_forced_ripgrep_without_rg_says_what_to_do(monkeypatch: pytest.MonkeyPatch, workspace: Path) -> None:
    import tools._grep as g

    monkeypatch.setattr(g, "find_rg", lambda: None)
    with pytest.raises(Exception) as info:
        select_engine("ripgrep", str(workspace))
    assert "grep_engine" in str(info.value)
    assert select_engine("auto", str(workspace)).name == "python"


def test_huge_file_is_searched_in_bounded_chunks(workspace: Path, engine: str) -> None:
    line = b"lorem ipsum dolor sit amet\n"
    data = line * (10 * 1024 * 1024 // len(line)) + b"the needle\n" + line * 1000
    write(workspace, "big.txt", data)
    r = grep(workspace, engine, pattern="needle", output_mode="content")
    number = data.count(b"\n", 0, data.index(b"needle")) + 1
    assert r.content == f"{workspace / 'big.txt'}:{number}:the needle"


def test_tool_runs_through_abhed_tool_cli(workspace: Path) -> None:
    import json
    import subprocess
    import sys

    write(workspace, "a.txt", "needle\n")
    out = subprocess.run(
        [sys.executable, "-m", "cli", "tool", "grep", json.dumps({"pattern": "needle"}),
         "--workspace", str(workspace)], capture_output=True, text=True, timeout=60, check=False)
    assert str(workspace / "a.txt") in out.stdout, out.stderr


def test_alternation_of_literals_with_uneven_frequencies_finds_every_line(
        workspace: Path, engine: str) -> None:
    # Many hits of one literal, rare hits of the others, two on one line, the
    # rare ones last: every line reported, in order, by both engines.
    lines = []
    for i in range(3000):
        if i % 1000 == 999:
            lines.append(f"{i} FIXME rare")
        elif i % 3 == 0:
            lines.append(f"{i} TODO common")
        else:
            lines.append(f"{i} nothing here")
    lines.append("3000 XXX and TODO on one line")
    lines.append("3001 XXX last")
    write(workspace, "a.txt", "\n".join(lines) + "\n")
    expected = [n + 1 for n, text in enumerate(lines)
                if any(w in text for w in ("TODO", "FIXME", "XXX"))]
    r = grep(workspace, engine, pattern="TODO|FIXME|XXX", output_mode="count")
    assert r.ok and r.content.endswith(f"a.txt:{len(expected)}"), r.content
    r = grep(workspace, engine, pattern="(TODO|FIXME|XXX)", output_mode="content")
    assert r.ok
    shown = [int(row.split(":")[1]) for row in r.content.splitlines() if row.count(":") >= 2]
    assert shown == expected[: len(shown)] and len(shown) > 0, shown[:5]


def test_every_required_literal_gets_a_prefilter_program_folded_as_the_pattern() -> None:
    from tools._grep import compile_query

    one = compile_query("spin_lock_irqsave", multiline=False, case_insensitive=False)
    assert one.literals == ("spin_lock_irqsave",) and one.prefilter is not None
    # Several alternatives: one RE2 literal program each (memchr-accelerated), not one pass
    # of the alternation's DFA (issue 33: the alternation was 2.4x rg -j1).
    many = compile_query("(TODO|FIXME|XXX)", multiline=False, case_insensitive=False)
    assert many.literals == ("TODO", "FIXME", "XXX") and many.prefilter is not None
    unanchored = type(many.regex).Anchor.UNANCHORED
    assert [p.Match(unanchored, b"a FIXME b", 0, 9)[0][0] for p in many.prefilter] == [-1, 2, -1]
    folded = compile_query("pyerr_setstring", multiline=False, case_insensitive=True)
    assert folded.prefilter is not None
    text = b"PyErr_SetString("
    assert folded.prefilter[0].Match(unanchored, text, 0, len(text))[0][0] == 0
    # Characters RE2 would read as syntax are literal in the program.
    odd = compile_query(r"a\.b\[c\]d\{2\}e\$\^\\|x\(y\)\*z\+\t", multiline=False,
                        case_insensitive=False)
    assert odd.literals == ("a.b[c]d{2}e$^\\", "x(y)*z+\t") and odd.prefilter is not None
    for lit, program in zip(odd.literals, odd.prefilter, strict=True):
        data = f"..{lit}..".encode()
        assert program.Match(unanchored, data, 0, len(data))[0] == (2, 2 + len(lit))
        assert program.Match(unanchored, b"ab", 0, 2)[0][0] == -1


@pytest.mark.parametrize("pattern, text", [
    ("kelvin", "the \u212aelvin scale"),  # KELVIN SIGN folds to k
    ("class", "a \u017fs cla\u017f\u017f"),  # LONG S folds to s
    ("TODO|fixme", "a FiXmE here"),
])
def test_a_case_insensitive_prefilter_folds_as_re2_does(workspace: Path, engine: str,
                                                        pattern: str, text: str) -> None:
    # The prefilter must never miss a line the pattern matches: a folded literal program
    # matches Unicode's simple case folding, as the pattern does (not only ASCII case).
    write(workspace, "a.txt", "nothing\n" + text + "\nnothing\n")
    r = grep(workspace, engine, pattern=pattern, case_insensitive=True, output_mode="content")
    assert r.ok and ":2:" in r.content, r.content
