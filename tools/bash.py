"""bash: run a shell command in the session sandbox (never on the host unless
the operator chose the ``host`` backend on purpose).

The tool owns the *semantics* (limits, output shaping, refusing interactive
commands, the non-interactive environment, the carried working directory,
background handles); the sandbox (``ToolContext.sandbox``) owns *where* the
command runs and the process lifecycle.
"""

from __future__ import annotations

import codecs
import os
import signal
import weakref
from collections.abc import Callable
from typing import Any

from pydantic import Field

from foundation import is_within
from tools._result import NOT_STARTED, ToolFailure, ToolResult, failure, success
from tools._sandbox import JobOutput, ShellRun, ShellSandbox
from tools._tool import Args, Tool, ToolContext
from tools.shell_parser import split_command

__all__ = ["NONINTERACTIVE_ENV", "Bash", "BashArgs", "interactive_problem", "shape_output"]

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_OUTPUT_CHARS = 30_000
MAX_COMMAND_CHARS = 64 * 1024
# head + tail kept when output is cut; the notes around them fit in the rest.
_KEEP_CHARS = 14_500

NONINTERACTIVE_ENV: dict[str, str] = {
    "CI": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "GIT_EDITOR": "true",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "cat",
    "EDITOR": "true",
    "VISUAL": "true",
    "PIP_NO_INPUT": "1",
    "NPM_CONFIG_YES": "true",
    "PYTHONUNBUFFERED": "1",
    "TERM": "dumb",
}


class BashArgs(Args):
    command: str | None = Field(
        default=None,
        description="The shell command (bash). Required, except when job_id is given.",
    )
    description: str = Field(
        description="Short human-readable description of what the command does (shown in the "
        "approval prompt), e.g. 'Run the unit tests'."
    )
    timeout_ms: int | None = Field(
        default=None, description=f"Default {DEFAULT_TIMEOUT_MS}, max {MAX_TIMEOUT_MS}."
    )
    background: bool = Field(
        default=False,
        description="Run detached and return a job handle at once. Use for servers and long builds.",
    )
    job_id: str | None = Field(
        default=None,
        description="A background job's handle: returns its new output and state (no command).",
    )
    kill: bool = Field(default=False, description="With job_id: stop that job (process group).")


# -- refusing commands that need a terminal --------------------------------

_TTY_PROGRAMS = {
    "vi": "edit files with the edit or write tool",
    "vim": "edit files with the edit or write tool",
    "nvim": "edit files with the edit or write tool",
    "nano": "edit files with the edit or write tool",
    "emacs": "edit files with the edit or write tool (or `emacs --batch ...`)",
    "pico": "edit files with the edit or write tool",
    "less": "print with cat, head, tail or grep, or use the read tool",
    "more": "print with cat, head, tail or grep, or use the read tool",
    "most": "print with cat, head, tail or grep, or use the read tool",
    "top": "use `ps aux` or `top -b -n 1`",
    "htop": "use `ps aux`",
    "btop": "use `ps aux`",
    "watch": "run the command once, or loop in a background job",
    "tmux": "use background: true for long-running processes",
    "screen": "use background: true for long-running processes",
    "tig": "use git log / git show",
    "mc": "use ls, find and the file tools",
    "ranger": "use ls, find and the file tools",
    "ncdu": "use `du -sh *`",
    "ssh": "the sandbox has no network",
    "telnet": "the sandbox has no network",
    "ftp": "the sandbox has no network",
    "sftp": "the sandbox has no network",
    "passwd": "nothing in the sandbox needs a password change",
    "visudo": "edit files with the edit tool",
}
_REPLS = {"python", "python3", "ipython", "node", "irb", "ghci", "julia", "lua", "R", "psql",
          "mysql", "sqlite3", "bc", "gdb"}


def interactive_problem(command: str) -> str | None:
    """Why ``command`` would wait for a terminal, with what to do instead; None if fine.

    The command is read by the one shell parser (:mod:`tools.shell_parser`, the one
    policy uses), so wrappers (``sudo``, ``env``, ``timeout 5``, ``xargs``),
    keywords (``if ...; then vim x; fi``), command substitutions and
    ``bash -c '...'`` strings are looked through, and here-document bodies are
    data.  A command policy cannot read is left for bash to report.
    """
    for cmd in split_command(command).commands:
        if "watch" in cmd.wrappers:
            return ("`watch` needs an interactive terminal and never exits; "
                    f"{_TTY_PROGRAMS['watch']}.")
        if cmd.program is None or cmd.dynamic_program:
            continue
        problem = _needs_terminal(os.path.basename(cmd.program), cmd.args, cmd.stdin_redirected)
        if problem is not None:
            return problem
    return None


def _needs_terminal(prog: str, rest: list[str], stdin: bool) -> str | None:
    if prog in _TTY_PROGRAMS:
        if prog == "emacs" and any(a in ("--batch", "-batch", "--script") for a in rest):
            return None
        if prog == "top" and "-b" in rest:
            return None
        return f"`{prog}` needs an interactive terminal, which commands here do not have; " \
               f"{_TTY_PROGRAMS[prog]}."
    base = prog.rstrip("0123456789.") if prog.startswith("python") else prog
    if (base in _REPLS or prog in _REPLS) and not rest and not stdin:
        return (f"`{prog}` with no arguments starts an interactive prompt, and stdin here is "
                f"closed; pass a script or code instead (e.g. `{prog} -c '...'` or "
                f"`{prog} file`).")
    while prog == "git" and rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-C", "-c") else rest[1:]  # global options
    if prog == "git" and rest:
        sub = rest[0]
        flags = rest[1:]
        if sub == "rebase" and any(f in ("-i", "--interactive") or
                                   (f.startswith("-") and not f.startswith("--") and "i" in f)
                                   for f in flags):
            return ("`git rebase -i` opens an editor; use a non-interactive rebase "
                    "(`git rebase BASE`), or `GIT_SEQUENCE_EDITOR=\"sed -i ...\" git rebase -i` "
                    "with a scripted todo list.")
        if sub in ("add", "checkout", "reset", "restore", "stash", "commit") and any(
                f in ("-p", "--patch", "-i", "--interactive") for f in flags):
            return (f"`git {sub} {' '.join(f for f in flags if f.startswith('-'))}` asks "
                    "questions interactively; name the paths instead (e.g. `git add FILE`), "
                    "or make the change with the edit tool first.")
    return None


# -- output shaping ------------------------------------------------------------

def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def shape_output(head: bytes, tail: bytes, total_bytes: int,
                 kept: str | None = None) -> tuple[str, bool, int]:
    """(text within the cap, whether it was cut, chars or bytes dropped from the middle).

    ``kept`` names the artifact holding the whole output, when one was kept;
    the cut note then tells the model to page it instead of re-running.
    """
    gap = total_bytes - len(head) - len(tail)
    if gap <= 0:
        text = _decode(head + tail)
        if len(text) <= MAX_OUTPUT_CHARS:
            return text, False, 0
        dropped = len(text) - 2 * _KEEP_CHARS
        return (text[:_KEEP_CHARS] + _cut_note(f"{dropped} characters", kept) + text[-_KEEP_CHARS:],
                True, dropped)
    head_text = _decode(head)[:_KEEP_CHARS]
    tail_text = _decode(tail)[-_KEEP_CHARS:]
    dropped = total_bytes - len(head_text.encode()) - len(tail_text.encode())
    return head_text + _cut_note(f"about {dropped} bytes", kept) + tail_text, True, dropped


def _cut_note(amount: str, kept: str | None = None) -> str:
    if kept is not None:
        return (f"\n\n[... {amount} of output cut from the middle; the start and the end are "
                f"shown. The whole output is kept: read it with the read tool, path \"{kept}\", "
                "using offset/limit to page. Do NOT re-run the command to see it ...]\n\n")
    return (f"\n\n[... {amount} of output cut from the middle; the start and the end are shown. "
            "To see more, re-run with the output filtered (`| grep PATTERN`, `| tail -n 200`) "
            "or redirected to a file in the workspace and read it with the read tool ...]\n\n")


def _keep_whole(run: ShellRun, ctx: ToolContext) -> list[dict[str, Any]]:
    """Keep a cut output whole as a session artifact; [] when nothing was cut or kept."""
    spill = run.spill_path
    try:
        if ctx.artifacts is None:
            return []
        whole = run.output_bytes <= len(run.head) + len(run.tail)
        if whole and len(_decode(run.head + run.tail)) <= MAX_OUTPUT_CHARS:
            return []  # nothing will be cut
        if whole:
            ref = ctx.artifacts.keep(run.head + run.tail, kind="output")
        elif spill is not None:
            ref = ctx.artifacts.keep(path=spill, kind="output")
        else:
            return []
        return [ref] if ref is not None else []
    finally:
        if spill is not None:
            try:
                os.unlink(spill)
            except OSError:
                pass


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


# -- the tool ------------------------------------------------------------------

_JOB_OFFSETS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


class Bash(Tool):
    name = "bash"
    description = (
        "Run a shell command (bash) in the session sandbox: an isolated machine that sees the "
        "workspace at the same absolute path and has no network. Use it for builds, tests, git and "
        "package managers; prefer read/glob/grep for looking at files (cheaper and safer). "
        "Each call is a FRESH shell: the working directory carries over to the next call (a `cd` "
        "persists), but environment variables, shell functions, aliases and `source`d settings do "
        "NOT; chain dependent steps in one command (`export X=1 && make`). "
        "stdin is closed and there is no terminal: commands that wait for input or need a TTY "
        "(vim, less, top, `git rebase -i`, `git add -p`, python with no arguments) are refused; "
        "pagers and editors are set to non-interactive (GIT_EDITOR=true, PAGER=cat, CI=1). "
        "stdout and stderr are combined; more than 30000 characters keeps the start and the end. "
        "The exit code is always reported; a non-zero exit is a normal result to reason about. "
        "timeout_ms defaults to 120000 (max 600000); on timeout the command and all its children "
        "are killed. background: true starts a job and returns a handle; call bash again with "
        "job_id to read its new output, with job_id and kill: true to stop it. Background jobs "
        "end when the session ends."
    )
    args_model = BashArgs
    capabilities = frozenset({"shell:exec", "fs:write"})
    mutates = True

    def run(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        description = args.description.strip()
        if not description:
            raise ToolFailure("invalid_arguments", "`description` is empty; say in a few words what "
                              "the command does (the user sees it when approving). Nothing was run.")
        if len(description) > 500:
            raise ToolFailure("invalid_arguments", "`description` is over 500 characters; keep it to "
                              "one short sentence. Nothing was run.")
        sandbox = ctx.sandbox
        if sandbox is None:
            why = f" ({ctx.sandbox_problem})" if ctx.sandbox_problem else ""
            raise ToolFailure(
                "sandbox_unavailable",
                f"bash cannot run: this session has no sandbox to run commands in{why}. Use the "
                "file tools (read, glob, grep, edit) instead, and tell the user to check the "
                "sandbox (`abhed sandbox check`).")
        if args.job_id is not None:
            if args.command is not None or args.background or args.timeout_ms is not None:
                raise ToolFailure(
                    "invalid_arguments",
                    "With job_id, give only description and optionally kill: true (no command, "
                    "background or timeout_ms). Nothing was run.")
            return self._job(sandbox, args.job_id, args.kill)
        if args.kill:
            raise ToolFailure("invalid_arguments", "kill: true needs the job_id of a background "
                              "job to stop. Nothing was run.")
        if args.command is None or not args.command.strip():
            raise ToolFailure("invalid_arguments", "`command` is required (or job_id to read a "
                              "background job). Nothing was run.")
        command = args.command
        if len(command) > MAX_COMMAND_CHARS:
            raise ToolFailure("too_large", f"The command is {len(command)} characters, over the "
                              f"{MAX_COMMAND_CHARS} limit. Write a script file with the write tool "
                              "and run it. Nothing was run.")
        if "\x00" in command:
            raise ToolFailure("invalid_arguments", "The command contains a NUL character, which "
                              "no shell can run; remove it. Nothing was run.")
        timeout_ms = DEFAULT_TIMEOUT_MS if args.timeout_ms is None else args.timeout_ms
        if not 1 <= timeout_ms <= MAX_TIMEOUT_MS:
            raise ToolFailure("invalid_arguments", f"timeout_ms must be between 1 and "
                              f"{MAX_TIMEOUT_MS}; got {timeout_ms}. For longer work use background: "
                              "true. Nothing was run.")
        problem = interactive_problem(command)
        if problem:
            raise ToolFailure("interactive_command", f"Refused: {problem} Nothing was run.")
        notes: list[str] = []
        cwd = self._cwd(sandbox, notes)
        env = dict(NONINTERACTIVE_ENV)
        try:
            if args.background:
                # A job is never interrupted (it has its own handle): one the interrupt
                # reached before it started does not start.
                if ctx.cancelled is not None and ctx.cancelled():
                    raise ToolFailure("not_run", NOT_STARTED)
                job_id = sandbox.start(command, cwd=cwd, env=env)
                return self._started(sandbox, job_id, cwd)
            # Only what is set: a bare backend (no interrupts, nobody watching) takes neither.
            extra: dict[str, Any] = {}
            if ctx.progress is not None:
                extra["on_output"] = _watched(ctx.progress)
            if ctx.cancelled is not None:
                extra["cancelled"] = ctx.cancelled
            run = sandbox.run(command, cwd=cwd, env=env, timeout_s=timeout_ms / 1000, **extra)
        except ToolFailure:
            raise
        except Exception as exc:
            return _sandbox_failed(sandbox, exc)
        return self._finished(sandbox, run, cwd, timeout_ms, notes, ctx)

    # -- helpers ---------------------------------------------------------------
    @staticmethod
    def _cwd(sandbox: ShellSandbox, notes: list[str]) -> str:
        cwd = sandbox.cwd or sandbox.workspace
        if cwd != sandbox.workspace and not os.path.isdir(cwd):
            notes.append(f"[the previous working directory {cwd} no longer exists; this command "
                         f"ran in the workspace root {sandbox.workspace}]")
            sandbox.cwd = cwd = sandbox.workspace
        return cwd

    @staticmethod
    def _finished(sandbox: ShellSandbox, run: ShellRun, cwd: str, timeout_ms: int,
                  notes: list[str], ctx: ToolContext) -> ToolResult:
        kept = _keep_whole(run, ctx)
        text, cut, dropped = shape_output(run.head, run.tail, run.output_bytes,
                                          kept[0]["ref"] if kept else None)
        lines: list[str] = [text.rstrip("\n") if text.strip() else "(no output)"]
        lines.extend(notes)
        new_cwd = run.cwd
        if new_cwd and new_cwd != cwd:
            if is_within(new_cwd, sandbox.workspace):
                sandbox.cwd = new_cwd
                lines.append(f"[working directory is now {new_cwd}]")
            else:
                lines.append(f"[the shell ended in {new_cwd}, outside the workspace; the next "
                             f"command starts in {cwd} again]")
        if run.timed_out:
            lines.append(f"[timed out after {timeout_ms / 1000:g} s: the command and all its "
                         "children were stopped (SIGTERM, then SIGKILL). Give a larger timeout_ms "
                         f"(max {MAX_TIMEOUT_MS}) or use background: true for long work]")
        elif run.output_limited:
            lines.append(f"[output overflow: the command printed {run.output_bytes} bytes, over "
                         "the sandbox's limit, and was killed. This is not a failure of the "
                         "command itself: redirect its output to a file and inspect parts of it]")
        elif run.signal is not None:
            lines.append(f"[killed by {_signal_name(run.signal)}]")
        else:
            lines.append(f"[exit code {run.exit_code}]")
        if sandbox.backend == "host":
            lines.append("[sandbox: host: this command ran UNSANDBOXED on the host, as the "
                         "operator configured]")
        return success(
            "\n".join(lines), truncated=cut,
            exit_code=run.exit_code, signal=run.signal, timed_out=run.timed_out,
            output_limited=run.output_limited, output_bytes=run.output_bytes,
            omitted=dropped, duration_ms=run.duration_ms, cwd=cwd,
            cwd_after=sandbox.cwd, sandbox=sandbox.backend, artifacts=kept,
        )

    @staticmethod
    def _started(sandbox: ShellSandbox, job_id: str, cwd: str) -> ToolResult:
        _JOB_OFFSETS.setdefault(sandbox, {})[job_id] = 0
        host = (" [sandbox: host: this job runs UNSANDBOXED on the host]"
                if sandbox.backend == "host" else "")
        return success(
            f"Started background job {job_id} in {cwd}.{host} Read its new output with "
            f'{{"job_id": "{job_id}", "description": "..."}}; stop it with {{"job_id": '
            f'"{job_id}", "kill": true, "description": "..."}}. It is killed when the session ends.',
            job_id=job_id, cwd=cwd, sandbox=sandbox.backend, background=True,
        )

    @staticmethod
    def _job(sandbox: ShellSandbox, job_id: str, kill: bool) -> ToolResult:
        offsets = _JOB_OFFSETS.setdefault(sandbox, {})
        try:
            out: JobOutput = sandbox.job(job_id, offset=offsets.get(job_id, 0), kill=kill)
        except KeyError:
            known = ", ".join(sorted(offsets)) or "none started in this session"
            raise ToolFailure("unknown_job", f"There is no background job {job_id!r} (jobs: "
                              f"{known}). Start one with background: true.") from None
        except Exception as exc:
            return _sandbox_failed(sandbox, exc)
        offsets[job_id] = out.next_offset
        keep = 1 << 16
        head, tail = (out.data, b"") if len(out.data) <= 2 * keep else (out.data[:keep],
                                                                       out.data[-keep:])
        text, cut, dropped = shape_output(head, tail, len(out.data))
        lines = [text.rstrip("\n") if text.strip() else "(no new output)"]
        if out.dropped_bytes:
            lines.insert(0, f"[{out.dropped_bytes} older bytes were discarded before this read]")
        if out.state == "running":
            lines.append(f"[job {job_id} is still running]")
        elif out.state == "killed":
            lines.append(f"[job {job_id} was stopped" + (
                f" ({_signal_name(out.signal)})]" if out.signal is not None
                else f"; exit code {out.exit_code}]"))
        elif out.signal is not None:
            lines.append(f"[job {job_id} ended: killed by {_signal_name(out.signal)}]")
        else:
            lines.append(f"[job {job_id} exited with exit code {out.exit_code}]")
        return success("\n".join(lines), truncated=cut, job_id=job_id, state=out.state,
                       exit_code=out.exit_code, signal=out.signal, omitted=dropped,
                       next_offset=out.next_offset, sandbox=sandbox.backend)


def _watched(progress: Callable[[str], None]) -> Callable[[bytes], None]:
    """Output bytes as text for whoever watches (a character split across chunks is kept
    for the next one; control characters are the watcher's to make visible)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(chunk: bytes) -> None:
        text = decoder.decode(chunk)
        if text:
            progress(text.replace("\r\n", "\n"))

    return feed


def _sandbox_failed(sandbox: ShellSandbox, exc: Exception) -> ToolResult:
    return failure(
        "sandbox_error",
        f"The {sandbox.backend} sandbox failed ({type(exc).__name__}: {exc}). The command may not "
        "have run. Retry once; if it fails again, continue with the file tools and tell the user "
        "(`abhed sandbox check` diagnoses the sandbox).",
        retryable=True, details={"sandbox": sandbox.backend, "exception": type(exc).__name__},
    )
