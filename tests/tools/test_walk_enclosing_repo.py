"""Regression: a workspace inside an ignored folder of an enclosing git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tools import ToolContext, Workspace, native_tools, run_tool


def test_workspace_ignored_by_an_enclosing_repo_still_lists_its_files(tmp_path: Path) -> None:
    outer = tmp_path / "home"
    project = outer / "work" / "project"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    (outer / ".gitignore").write_text("*\n!.gitignore\n")  # a dot-files repo ignoring everything
    (project / "main.py").write_text("print('hi')\n")
    (project / ".gitignore").write_text("build/\n")
    (project / "build").mkdir()
    (project / "build" / "out.py").write_text("x\n")
    ctx = ToolContext(Workspace(str(project)))
    result = run_tool(native_tools()["glob"], {"pattern": "**/*.py"}, ctx)
    assert result.content.splitlines() == [str(project.resolve() / "main.py")]


def test_workspace_in_a_tracked_subfolder_keeps_git_rules(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    sub = repo / "pkg"
    sub.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("*.gen.py\n")
    (sub / "a.py").write_text("a\n")
    (sub / "b.gen.py").write_text("b\n")
    ctx = ToolContext(Workspace(str(sub)))
    result = run_tool(native_tools()["glob"], {"pattern": "*.py"}, ctx)
    assert result.content.splitlines() == [str(sub.resolve() / "a.py")]
