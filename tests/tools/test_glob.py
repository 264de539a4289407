"""glob (§5): pattern syntax, newest first, ignores and excludes, the cap, the empty marker."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools import ToolFailure
from tools.pathpattern import PathPattern, escape


def _touch(root: Path, rel: str, mtime: float | None = None) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(rel + "\n")
    if mtime is not None:
        os.utime(p, (mtime, mtime))
    return p


def _rels(h: Any, res: Any) -> list[str]:
    return [os.path.relpath(line, h.root) for line in res.content.splitlines()
            if not line.startswith("[")]


# -- order --------------------------------------------------------------------


def test_newest_first_by_mtime(h: Any) -> None:
    _touch(h.root, "old.py", 1_000_000)
    _touch(h.root, "src/newest.py", 3_000_000)
    _touch(h.root, "mid.py", 2_000_000)
    _touch(h.root, "src/deep/older.py", 1_500_000)
    res = h.ok(h.glob("**/*.py"))
    assert _rels(h, res) == ["src/newest.py", "mid.py", "src/deep/older.py", "old.py"]
    assert res.details["count"] == 4 and res.details["total"] == 4


def test_equal_mtimes_are_ordered_by_path(h: Any) -> None:
    for name in ["c.txt", "a.txt", "b.txt"]:
        _touch(h.root, name, 5_000_000)
    assert _rels(h, h.ok(h.glob("*.txt"))) == ["a.txt", "b.txt", "c.txt"]


def test_output_is_absolute_paths(h: Any) -> None:
    _touch(h.root, "x/y.md")
    res = h.ok(h.glob("**/*.md"))
    assert res.content == f"{h.root}/x/y.md"


# -- syntax -------------------------------------------------------------------

TREE = ["a.py", "b.txt", ".hidden.py", "src/c.py", "src/d.js", "src/x/e.py", "src/x/y/f.py",
        "test/test_a.py", "test/test_b.py", "test/conf.py", "lib/g1.ts", "lib/g2.ts", "lib/g10.ts",
        "docs/A.md", "docs/b.md"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # no '/': a name at any depth (gitignore's rule, as in ripgrep's --glob)
        ("*.py", {"a.py", ".hidden.py", "src/c.py", "src/x/e.py", "src/x/y/f.py",
                  "test/test_a.py", "test/test_b.py", "test/conf.py"}),
        ("./*.py", {"a.py", ".hidden.py"}),  # a leading './' anchors at path
        ("**/*.py", {"a.py", ".hidden.py", "src/c.py", "src/x/e.py", "src/x/y/f.py",
                     "test/test_a.py", "test/test_b.py", "test/conf.py"}),
        ("src/*.py", {"src/c.py"}),
        ("src/**/*.py", {"src/c.py", "src/x/e.py", "src/x/y/f.py"}),
        ("src/**", {"src/c.py", "src/d.js", "src/x/e.py", "src/x/y/f.py"}),
        ("**/x/**/*.py", {"src/x/e.py", "src/x/y/f.py"}),
        ("src/*/*.py", {"src/x/e.py"}),
        ("*/*.py", {"src/c.py", "test/test_a.py", "test/test_b.py", "test/conf.py"}),
        ("test/test_?.py", {"test/test_a.py", "test/test_b.py"}),
        ("lib/g?.ts", {"lib/g1.ts", "lib/g2.ts"}),
        ("lib/g[12].ts", {"lib/g1.ts", "lib/g2.ts"}),
        ("lib/g[!1].ts", {"lib/g2.ts"}),
        ("lib/g[0-9][0-9].ts", {"lib/g10.ts"}),
        ("**/*.{md,ts}", {"docs/A.md", "docs/b.md", "lib/g1.ts", "lib/g2.ts", "lib/g10.ts"}),
        ("{src,test}/*.{py,js}", {"src/c.py", "src/d.js", "test/test_a.py", "test/test_b.py",
                                  "test/conf.py"}),
        ("docs/[A-Z]*.md", {"docs/A.md"}),
        ("**", set(TREE)),
        # a directory that matches covers everything beneath it
        ("src", {"src/c.py", "src/d.js", "src/x/e.py", "src/x/y/f.py"}),
        ("src/", {"src/c.py", "src/d.js", "src/x/e.py", "src/x/y/f.py"}),
        ("x/", {"src/x/e.py", "src/x/y/f.py"}),
        ("src/*", {"src/c.py", "src/d.js", "src/x/e.py", "src/x/y/f.py"}),
        (f"{'{'}a,b{'}'}.*", {"a.py", "b.txt", "docs/b.md"}),
        (f"./{'{'}a,b{'}'}.*", {"a.py", "b.txt"}),
        # a leading '!' inverts
        ("!**/*.py", {"b.txt", "src/d.js", "lib/g1.ts", "lib/g2.ts", "lib/g10.ts", "docs/A.md",
                      "docs/b.md"}),
        ("\\!*", set()),
    ],
)
def test_glob_syntax(h: Any, pattern: str, expected: set[str]) -> None:
    for rel in TREE:
        _touch(h.root, rel)
    res = h.ok(h.glob(pattern))
    assert set(_rels(h, res)) == expected


def test_star_never_crosses_a_slash() -> None:
    rx = PathPattern("src/*.py")
    assert rx.match("src/a.py") and not rx.match("src/x/a.py")
    assert not PathPattern("a*b").match("a/b")
    assert not PathPattern("a?b").match("a/b")
    assert not PathPattern("b[!x]c").match("b/c")
    assert not PathPattern("[/]").match("/")


def test_regex_characters_in_patterns_are_literal(h: Any) -> None:
    _touch(h.root, "a+b (1).txt")
    _touch(h.root, "a$b.txt")
    _touch(h.root, "aab (1)xtxt")
    assert _rels(h, h.ok(h.glob("a+b (1).txt"))) == ["a+b (1).txt"]
    assert _rels(h, h.ok(h.glob("a$b.*"))) == ["a$b.txt"]


def test_path_sets_the_base_of_the_pattern(h: Any) -> None:
    for rel in TREE:
        _touch(h.root, rel)
    res = h.ok(h.glob("./*.py", h.root / "src"))
    assert _rels(h, res) == ["src/c.py"]
    assert res.details["base"] == f"{h.root}/src"
    assert set(_rels(h, h.ok(h.glob("**/*.py", h.root / "src")))) == {
        "src/c.py", "src/x/e.py", "src/x/y/f.py"}


def test_absolute_pattern_inside_the_base_is_accepted(h: Any) -> None:
    _touch(h.root, "src/c.py")
    _touch(h.root, "other/src/d.py")  # absolute means anchored, not a name at any depth
    assert _rels(h, h.ok(h.glob(f"{h.root}/src/*.py"))) == ["src/c.py"]
    _touch(h.root, "c.py")
    _touch(h.root, "sub/c.py")
    assert _rels(h, h.ok(h.glob(f"{h.root}/c.py"))) == ["c.py"]
    res = h.err(h.glob("/etc/*"), "invalid_pattern")
    assert "relative to path" in res.content


def test_dotdot_in_pattern_is_refused(h: Any) -> None:
    res = h.err(h.glob("../*", h.root), "invalid_pattern")
    assert "'..'" in res.content


@pytest.mark.parametrize("pattern", ["a{b", "{{x}", "", "a}", "[z-a]", "x\\", "!", "{a,b}" * 9])
def test_malformed_patterns_are_refused(h: Any, pattern: str) -> None:
    h.err(h.glob(pattern), "invalid_pattern")


def test_unclosed_bracket_is_a_literal(h: Any) -> None:
    _touch(h.root, "a[b")
    assert _rels(h, h.ok(h.glob("a[b"))) == ["a[b"]


def test_path_errors(h: Any) -> None:
    _touch(h.root, "f.txt")
    res = h.err(h.glob("*", h.root / "nope"), "not_found")
    assert "without path" in res.content
    h.err(h.glob("*", h.root / "f.txt"), "not_a_directory")
    h.err(h.glob("*", "src"), "relative_path")


# -- no match -----------------------------------------------------------------


def test_no_match_marker(h: Any) -> None:
    _touch(h.root, "src/a.py")
    res = h.ok(h.glob("**/*.rs"))
    assert res.content == "[no files matched: **/*.rs]"
    assert res.details["count"] == 0 and res.truncated is False


def test_a_name_pattern_finds_files_in_subdirectories(h: Any) -> None:
    """Formerly '*.py' matched only directly inside path; now a name matches at any depth,
    as in .gitignore, ripgrep's --glob, secret_paths and policy rules."""
    _touch(h.root, "src/a.py")
    assert _rels(h, h.ok(h.glob("*.py"))) == ["src/a.py"]


def test_no_match_in_empty_workspace(h: Any) -> None:
    assert h.ok(h.glob("**")).content == "[no files matched: **]"


# -- ignores ------------------------------------------------------------------


@pytest.mark.parametrize("excluded", ["node_modules", ".git", "target", "dist", "__pycache__"])
def test_default_excludes_at_any_depth(h: Any, excluded: str) -> None:
    _touch(h.root, "keep.py")
    _touch(h.root, f"{excluded}/pkg/index.py")
    _touch(h.root, f"sub/{excluded}/mod.py")
    assert _rels(h, h.ok(h.glob("**/*.py"))) == ["keep.py"]
    everything = h.with_settings(default_excludes=())
    assert len(_rels(h, everything.ok(everything.glob("**/*.py")))) == 3


def test_gitignore_is_honoured_without_git(h: Any) -> None:
    (h.root / ".gitignore").write_text("*.log\nbuild/\n/top.txt\n!keep.log\n")
    for rel in ["a.log", "keep.log", "build/out.txt", "top.txt", "sub/top.txt", "sub/b.log", "src/ok.py"]:
        _touch(h.root, rel)
    (h.root / "sub" / ".gitignore").write_text("!b.log\n")
    got = set(_rels(h, h.ok(h.glob("**"))))
    assert got == {".gitignore", "keep.log", "sub/top.txt", "sub/b.log", "sub/.gitignore", "src/ok.py"}


def test_ancestor_gitignore_applies_when_searching_a_subdirectory(h: Any) -> None:
    (h.root / ".gitignore").write_text("*.tmp\n")
    _touch(h.root, "src/a.tmp")
    _touch(h.root, "src/a.py")
    assert _rels(h, h.ok(h.glob("*", h.root / "src"))) == ["src/a.py"]


def test_operator_ignore_list(h: Any) -> None:
    for rel in ["a.py", "gen/b.py", "c.generated.py", "vendor/x/d.py"]:
        _touch(h.root, rel)
    op = h.with_settings(ignore=("gen/", "*.generated.py", "/vendor"))
    assert _rels(h, op.ok(op.glob("**/*.py"))) == ["a.py"]


def test_hidden_files_are_listed(h: Any) -> None:
    _touch(h.root, ".github/workflows/ci.yml")
    _touch(h.root, ".env.example")
    assert set(_rels(h, h.ok(h.glob("**")))) == {".github/workflows/ci.yml", ".env.example"}


def test_symlinks_are_not_followed_or_listed(h: Any, tmp_path: Path) -> None:
    _touch(h.root, "real/a.py")
    os.symlink("real", h.root / "alias")
    os.symlink("real/a.py", h.root / "link.py")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("x")
    os.symlink(outside, h.root / "out")
    assert _rels(h, h.ok(h.glob("**/*.py"))) == ["real/a.py"]


# -- the cap ------------------------------------------------------------------


def test_cap_keeps_the_newest_and_says_so(h: Any) -> None:
    for i in range(8):
        _touch(h.root, f"f{i}.txt", 1_000_000 + i)
    small = h.with_settings(glob_max_results=5)
    res = small.ok(small.glob("*.txt"))
    lines = res.content.splitlines()
    assert [os.path.basename(p) for p in lines[:5]] == ["f7.txt", "f6.txt", "f5.txt", "f4.txt", "f3.txt"]
    assert lines[5] == ("[truncated: showing the 5 newest of 8 matches. Narrow the pattern or pass a "
                        "deeper path to see the rest.]")
    assert res.truncated is True and res.details["count"] == 5 and res.details["total"] == 8


@pytest.mark.slow
def test_real_cap_at_1000(h: Any) -> None:
    d = h.root / "many"
    d.mkdir()
    for i in range(1001):
        (d / f"{i:04}.txt").write_bytes(b"")
    res = h.ok(h.glob("many/*.txt"))
    lines = res.content.splitlines()
    assert len(lines) == 1001 and lines[-1].startswith("[truncated: showing the 1000 newest of 1001")
    assert res.truncated is True
    _touch(h.root, "many/9999.txt")  # nothing else changes: exactly the cap is not truncated
    for p in list(d.iterdir())[:2]:
        p.unlink()
    res = h.ok(h.glob("many/*.txt"))
    assert res.truncated is False and len(res.content.splitlines()) == 1000


def test_glob_changes_nothing_and_records_nothing(h: Any) -> None:
    _touch(h.root, "a.py")
    h.ok(h.glob("**"))
    assert h.ledger.hashes == {}
    assert os.listdir(h.root) == ["a.py"]


# -- regressions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "name"),
    [("[[]x", "[x"), ("[]]x", "]x"), ("[!]]x", "ax"), ("[a&&b]x", "&x"), ("[~~]x", "~x"),
     ("[||]x", "|x"), ("[\\]x", "\\x"), ("[a^]x", "^x")],
)
def test_regression_brackets_inside_a_class_crashed_or_ended_it_early(
    h: Any, pattern: str, name: str
) -> None:
    """'[[]' made Python's re warn about a nested set (an error under -W error); '[]]' was
    compiled as an empty class."""
    _touch(h.root, name)
    _touch(h.root, "zz")
    assert _rels(h, h.ok(h.glob(pattern))) == [name]


def test_regression_no_slash_hint_was_given_for_a_pattern_with_a_trailing_slash(h: Any) -> None:
    res = h.ok(h.glob("src/"))
    assert res.content == "[no files matched: src/]"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab/*?[]{},!^-\\&~|. #", max_size=16))
def test_any_pattern_compiles_or_is_refused_cleanly(pattern: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            rx = PathPattern(pattern)
        except ToolFailure as exc:
            assert exc.code == "invalid_pattern"
            return
        for candidate in ("a", "ab/b", "a/b/c", "[", "]", "{a,b}"):
            rx.match(candidate)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]),
               min_size=1, max_size=12).filter(lambda n: n not in (".", "..") and n == n.strip()))
def test_an_escaped_name_matches_only_itself(name: str) -> None:
    rx = PathPattern(escape(name))
    assert rx.match(name) and rx.match("d/" + name)
    assert not rx.match(name + "x") and not rx.match("x" + name)


@pytest.mark.parametrize("pattern", ["out/sub/*", "out/sub/**", "out/sub/secret_name.txt",
                                     "inside/sub/*"])
def test_regression_symlink_in_the_literal_prefix_led_glob_outside_the_workspace(
    h: Any, tmp_path: Path, pattern: str
) -> None:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "secret_name.txt").write_text("x")
    os.symlink(outside, h.root / "out")
    _touch(h.root, "real/sub/a.txt")
    os.symlink("real", h.root / "inside")
    res = h.ok(h.glob(pattern))
    assert res.content.startswith("[no files matched:")
    assert "secret_name" not in res.content.split("]")[-1]


def test_regression_class_with_double_dash_warned_and_crashed_under_w_error() -> None:
    """Hypothesis found '[?--]': Python's re warns "possible set difference" (an error here)."""
    with pytest.raises(ToolFailure) as info:
        PathPattern("[?--]")
    assert info.value.code == "invalid_pattern" and "backwards" in info.value.message
    assert PathPattern("[+--]").match(",")  # the range + to -, which holds ","
    assert PathPattern("[a&&b]").match("&") and PathPattern("[~~]").match("~")
