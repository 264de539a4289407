"""tools.pathpattern: the one path-pattern dialect (gitignore's rules plus braces).

Brace-free patterns are checked against git itself (`git check-ignore`), so
"gitignore's rules" is a tested claim, not a description.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools import ToolSettings
from tools.pathpattern import PathPattern, PathRules, PatternError, check_patterns, escape

NAMES = ["a", "b", "ab", ".env", "x.pem", "src", "c.py"]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.pem", "x.pem", True),
        ("*.pem", "deep/er/x.pem", True),  # a name matches at any depth
        ("/x.pem", "deep/x.pem", False),  # a leading '/' anchors (in lists, as in git)
        ("./x.pem", "deep/x.pem", False),  # so does './'
        ("./x.pem", "x.pem", True),
        ("conf/*.env", "conf/a.env", True),
        ("conf/*.env", "x/conf/a.env", False),  # a '/' inside anchors
        ("src", "src/a/b.py", True),  # a matched directory covers what is beneath
        ("src/", "src", False),  # a trailing '/' matches directories only
        ("src/", "a/src/b", True),
        ("src/**", "src/a/b", True),
        ("**/b", "b", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("*", ".env", True),  # dot-files are not special
        ("a?", "ab", True),
        ("a?", "a/", False),
        ("[ab]", "b", True),
        ("[!a]", "b", True),
        ("b[!x]c", "b/c", False),  # no class ever matches '/'
        ("{a,b}", "b", True),
        ("x{1..3}", "x2", True),
        ("\\*", "*", True),
        ("\\*", "a", False),
        ("!*.py", "a.txt", True),  # a single pattern with '!' matches what the rest does not
        ("!*.py", "a.py", False),
        ("\\!x", "!x", True),
        ("#x", "#x", True),  # a single pattern is never a comment
    ],
)
def test_semantics(pattern: str, path: str, expected: bool) -> None:
    assert PathPattern(pattern).match(path) is expected


def test_rules_last_match_wins_and_report_the_pattern() -> None:
    rules = PathRules([".env.*", "!.env.example", "# comment", "", "secrets/"])
    assert rules.match("a/.env.local") == ".env.*"
    assert rules.match(".env.example") is None
    assert rules.match("x/secrets/k") == "secrets/"
    assert rules.patterns == (".env.*", "!.env.example", "secrets/")
    assert not PathRules([]) and PathRules([]).match("a") is None


def test_braces_expand_and_classes_match_the_same_files() -> None:
    """Regression (issue 11): policy read `conf/{a,b}.env` and `conf/[ab].env` as literals."""
    for pattern in ("conf/{a,b}.env", "conf/[ab].env"):
        p = PathPattern(pattern)
        assert p.match("conf/a.env") and p.match("conf/b.env")
        assert not p.match("conf/c.env") and not p.match("x/conf/a.env")


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("!", "nothing after '!'"),
        ("a{b", "never closed"),
        ("a}b", "no '{'"),
        ("[z-a]", "backwards"),
        ("x\\", "lone backslash"),
        ("a\x00b", "NUL"),
        ("{a,b}" * 9, "more than 256"),
        ("a" * 5000, "characters long"),
        ("/", "matches no path"),
    ],
)
def test_unreadable_patterns_are_refused_with_the_problem(pattern: str, problem: str) -> None:
    with pytest.raises(PatternError) as info:
        PathPattern(pattern)
    assert problem in info.value.message and info.value.code == "invalid_pattern"


def test_config_lists_are_refused_at_load_naming_the_entry() -> None:
    with pytest.raises(ValueError) as info:
        ToolSettings(secret_paths=("*.pem", "conf/{a,b.env"))
    assert "secret_paths[1]" in str(info.value) and "never closed" in str(info.value)
    with pytest.raises(ValueError) as info:
        ToolSettings(ignore=("[z-a]",))
    assert "ignore[0]" in str(info.value) and "backwards" in str(info.value)
    with pytest.raises(ValueError, match=r"patterns\[0\]"):
        check_patterns(["x\\"], "patterns")
    check_patterns(["# a comment", "", "ok/**"], "patterns")


def test_escape_round_trips_awkward_names() -> None:
    for name in ["a*b", "[x]", "{a,b}", "!bang", "#hash", "back\\slash", "trail ", "a?b"]:
        p = PathPattern(escape(name))
        assert p.match(name), name
        assert not p.match(name + "x")


def test_pathspec_still_calls_our_segment_translation() -> None:
    """pathspec passes classes to re verbatim; our override fixes that.  If an upgrade stops
    calling it, these fail rather than '[!x]' quietly matching '/' again."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PathPattern("[a&&b]").match("&")
        assert PathPattern("[[]").match("[")
    assert not PathPattern("a[!x]b").match("a/b")


# -- the oracle: git itself ---------------------------------------------------

GIT = shutil.which("git")
SEGMENT = st.sampled_from(["a", "b", "ab", "*", "?", "**", "[ab]", "[!a]", "a*", "*b", ".e", "\\*"])
PATH_PART = st.sampled_from(["a", "b", "ab", "ba", ".e", "*", "aa"])


@st.composite
def _patterns(draw: st.DrawFn) -> str:
    segs = draw(st.lists(SEGMENT, min_size=1, max_size=3))
    pattern = "/".join(segs)
    if draw(st.booleans()):
        pattern = "/" + pattern
    if draw(st.integers(0, 4)) == 0:
        pattern += "/"
    return pattern.replace("***", "**")


@pytest.mark.skipif(GIT is None, reason="git is installed by scripts/setup")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=_patterns(), paths=st.lists(st.lists(PATH_PART, min_size=1, max_size=4)
                                            .map("/".join), min_size=1, max_size=8, unique=True))
def test_brace_free_patterns_agree_with_git_check_ignore(tmp_path: Path, pattern: str,
                                                         paths: list[str]) -> None:
    try:
        ours = PathRules([pattern])
    except PatternError:
        return  # git would read it somehow; we refuse it, loudly, at config load
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / ".gitignore").write_text(pattern + "\n")
    if not (repo / ".git").exists():
        subprocess.run([GIT or "git", "init", "-q"], cwd=repo, check=True)
    out = subprocess.run(
        [GIT or "git", "check-ignore", "--no-index", "--stdin", "--non-matching", "-v", "-z"],
        cwd=repo, input="\0".join(paths) + "\0", capture_output=True, text=True, check=False,
    ).stdout.split("\0")
    # -z -v: source, line, pattern, path per record
    for i in range(0, len(out) - 3, 4):
        source, path = out[i], out[i + 3]
        git_says = bool(source)
        assert (ours.match(path) is not None) == git_says, (pattern, path)


def test_a_trailing_star_star_matches_inside_a_directory_never_the_directory_itself() -> None:
    """git's reading (issue 22): ``vendor/**`` leaves ``vendor/`` itself alone, so a walker
    still enters it and ``!vendor/manifest`` can re-include; ``vendor/**/`` is the
    directories inside."""
    rules = PathRules(["vendor/**", "!vendor/manifest"])
    assert rules.match("vendor", is_dir=True) is None
    assert rules.match("vendor/lib.c") == "vendor/**"
    assert rules.match("vendor/manifest") is None
    assert rules.match("vendor/sub", is_dir=True) == "vendor/**"
    assert rules.match("vendor/sub/x") == "vendor/**"
    dirs = PathRules(["vendor/**/"])
    assert dirs.match("vendor", is_dir=True) is None
    assert dirs.match("vendor/lib.c") is None
    assert dirs.match("vendor/sub", is_dir=True) == "vendor/**/"
    assert PathPattern("src/**").match("src/a/b.py") and not PathPattern("src/**").match(
        "src", is_dir=True)
