"""Programs that run another program named in their arguments (``sudo``, ``env``, ``timeout 5``, ...).

Each entry says how the wrapper's own options are spelled, how many operands
come before the command, and how the command runs: as its own argument
vector (``nohup rm -rf x`` runs ``rm``) or joined into one string for
``sh -c`` (``watch``, ``flock -c``, ``su -c``).  The parser strips wrappers
off the front and judges what they run, remembering them in
``SimpleCommand.wrappers``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tools.shell_parser._model import Word
from tools.shell_parser._options import Opts, Scan, opts, scan_options

_HELP = "--help --version"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Wrapper:
    opts: Opts
    positionals: int = 0  # operands before the command (timeout's DURATION, chroot's NEWROOT)
    shell: bool = False  # the command words are joined and run by ``sh -c``
    default: tuple[str, ...] = ()  # the command when none is given (xargs: echo)
    computed: bool = False  # the command gets more operands at run time (xargs)
    assignments: bool = False  # NAME=VALUE words may come before the command (env, sudo)
    sub: tuple[str, ...] = ()  # only after one of these subcommands (uv run, bundle exec)


@dataclass
class Peeled:
    """What a wrapper runs: a command (argv or one shell string), or nothing."""

    words: list[Word] = field(default_factory=list)
    assignments: list[Word] = field(default_factory=list)
    computed: bool = False
    shell: bool = False
    label: str = ""  # the route, for a command run through sh -c
    unknown: str | None = None  # an option policy does not know: which word is the program is unsure
    subcommand: bool = False  # ``unknown`` is the subcommand, computed at run time (npm $X ...)
    wrapped: bool = True  # False: not a wrapper use after all (uv pip install)


_LENIENT = opts(flags=None, stops=_HELP)

WRAPPERS: dict[str, Wrapper] = {
    "nohup": Wrapper(opts(stops=_HELP)),
    "nice": Wrapper(opts("-n --adjustment", stops=_HELP, numeric=True)),
    "timeout": Wrapper(opts("-s --signal -k --kill-after",
                            "--preserve-status --foreground -v --verbose", _HELP), positionals=1),
    "stdbuf": Wrapper(opts("-i --input -o --output -e --error", stops=_HELP)),
    "setsid": Wrapper(opts(flags="-c --ctty -f --fork -w --wait", stops="-h -V " + _HELP)),
    "time": Wrapper(opts("-f --format -o --output", "-a --append -p --portability -v --verbose "
                         "-q --quiet", "-V " + _HELP)),
    "command": Wrapper(opts(flags="-p", stops="-v -V")),
    "builtin": Wrapper(opts()),
    "exec": Wrapper(opts("-a", "-c -l")),
    "xargs": Wrapper(opts("-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs "
                          "-s --max-chars --process-slot-var",
                          "-0 --null -p --interactive -r --no-run-if-empty -t --verbose -x --exit "
                          "-o --open-tty", "--show-limits " + _HELP,
                          "-e --eof -i --replace -l --max-lines"),
                     default=("echo",), computed=True),
    "sudo": Wrapper(opts("-C --close-from -D --chdir -g --group -h --host -p --prompt -R --chroot "
                         "-r --role -t --type -T --command-timeout -U --other-user -u --user",
                         "-A --askpass -b --background -B --bell -E -H --set-home -i --login "
                         "-k --reset-timestamp -n --non-interactive -P --preserve-groups -S --stdin "
                         "-s --shell -N --no-update",
                         "-e --edit -K --remove-timestamp -l --list -V -v --validate " + _HELP,
                         "--preserve-env"), assignments=True),
    "doas": Wrapper(opts("-u", "-n -s", "-L -C")),
    "pkexec": Wrapper(opts("--user", "--disable-internal-agent --keep-cwd", _HELP)),
    "chroot": Wrapper(opts("--userspec --groups", "--skip-chdir", _HELP), positionals=1),
    "unshare": Wrapper(opts("--propagation --setgroups -S --setuid -G --setgid -R --root -w --wd "
                            "--monotonic --boottime --map-user --map-group --map-users "
                            "--map-groups -l --load-interp",
                            "-m -u -i -n -p -U -C -T -f --fork -r --map-root-user -c "
                            "--map-current-user --keep-caps --map-auto", "-h -V " + _HELP,
                            "--mount --uts --ipc --net --pid --user --cgroup --time --mount-proc "
                            "--kill-child")),
    "nsenter": Wrapper(opts("-t --target -S --setuid -G --setgid",
                            "-a --all -F --no-fork --preserve-credentials -Z --follow-context "
                            "-e --env -c --join-cgroup", "-h -V " + _HELP,
                            "-m --mount -u --uts -i --ipc -n --net -p --pid -U --user -C --cgroup "
                            "-T --time -r --root -w --wd")),
    "ionice": Wrapper(opts("-c --class -n --classdata", "-t --ignore",
                           "-p --pid -P --pgid -u --uid -h -V " + _HELP)),
    "taskset": Wrapper(opts(flags="-a --all-tasks -c --cpu-list", stops="-p --pid -h -V " + _HELP),
                       positionals=1),
    "chrt": Wrapper(opts("-T --sched-runtime -P --sched-period -D --sched-deadline",
                         "-b --batch -d --deadline -e --ext -f --fifo -i --idle -o --other -r --rr "
                         "-R --reset-on-fork -a --all-tasks -v --verbose",
                         "-m --max -p --pid -h -V " + _HELP), positionals=1),
    "numactl": Wrapper(opts("-C --physcpubind -N --cpunodebind -m --membind -i --interleave "
                            "-p --preferred -w --weighted-interleave",
                            "-l --localalloc -a --all -b --balancing --preferred-many",
                            "-s --show -H --hardware -V " + _HELP)),
    "prlimit": Wrapper(opts(flags=None, stops="-p --pid -h -V " + _HELP)),
    "setpriv": Wrapper(opts("--reuid --regid --ruid --euid --rgid --egid --groups --inh-caps "
                            "--ambient-caps --bounding-set --securebits --pdeathsig "
                            "--selinux-label --apparmor-profile --landlock-access "
                            "--landlock-rule --seccomp-filter",
                            "--nnp --no-new-privs --keep-groups --clear-groups --init-groups "
                            "--reset-env", "-d --dump -h -V " + _HELP)),
    # strace 6's long options that take a value (each refuses to run without one).
    "strace": Wrapper(opts("-e -o -p -s -a -b -E -I -O -P -S -u -X -U --abbrev --attach --columns "
                           "--const-print-style --detach-on --env --fault --inject "
                           "--interruptible --kvm --output --raw --read --signals --status "
                           "--string-limit --summary-columns --summary-sort-by "
                           "--summary-syscall-overhead --trace --trace-path --user --verbose "
                           "--write", None, "-h -V " + _HELP)),
    "ltrace": Wrapper(opts("-e -o -p -s -a -l -n -u -x -A -D -F", None, "-h -V " + _HELP)),
    "valgrind": Wrapper(_LENIENT),
    "perf": Wrapper(opts("-e --event -p --pid -t --tid -o --output -r --repeat -x "
                         "--field-separator -G --cgroup -C --cpu -I --interval-print -F --freq "
                         "-c --count --call-graph -j --branch-filter -m --mmap-pages -u --uid "
                         "--filter", None, _HELP), sub=("stat", "record", "trace")),
    "fakeroot": Wrapper(opts("-l --lib --faked -s -i -b", "-u --unknown-is-real", "-h -v " + _HELP)),
    "faketime": Wrapper(opts("-p", "-m -f --exclude-monotonic", "-h -v " + _HELP), positionals=1),
    "firejail": Wrapper(_LENIENT),
    "systemd-run": Wrapper(opts("-u --unit -p --property --description --slice -E --setenv --uid "
                                "--gid --nice --working-directory -M --machine -H --host "
                                "--on-active --on-boot --on-startup --on-unit-active "
                                "--on-unit-inactive --on-calendar --timer-property "
                                "--path-property --socket-property --service-type",
                                None, "-h " + _HELP)),
    "systemd-inhibit": Wrapper(opts("--what --who --why --mode", None, "-h --list " + _HELP)),
    "dbus-run-session": Wrapper(_LENIENT),
    "xvfb-run": Wrapper(opts("-e --error-file -f --auth-file -n --server-num -p --xauth-protocol "
                             "-s --server-args -w --wait", "-a --auto-servernum -l --listen-tcp -d",
                             "-h --help")),
    "catchsegv": Wrapper(opts()),
    "eatmydata": Wrapper(opts(stops=_HELP)),
    "chronic": Wrapper(opts(flags="-e -v")),
    "ifne": Wrapper(opts(flags="-n")),
    "unbuffer": Wrapper(opts(flags="-p")),
    "proxychains": Wrapper(opts("-f", "-q")),
    "proxychains4": Wrapper(opts("-f", "-q")),
    "torsocks": Wrapper(opts("-u --user -p --pass -a --address -P --port", "-i --isolate -d --debug "
                             "-q --quiet", "-h " + _HELP)),
    "ccache": Wrapper(opts(stops="-c --cleanup -C --clear -s --show-stats -z --zero-stats "
                                 "-M --max-size -F --max-files -p --show-config -o --set-config "
                                 "-x --show-compression -X --recompress -d --dir --checksum-file "
                                 "--evict-older-than --extract-result --inspect --print-stats "
                                 "--print-version --trim-dir --show-log-stats -h -V " + _HELP)),
    "sccache": Wrapper(opts(stops="-s --show-stats -z --zero-stats --start-server --stop-server "
                                  "--dist-status --dist-auth " + _HELP)),
    "distcc": Wrapper(opts(stops="-j --show-hosts --show-principal " + _HELP)),
    "linux32": Wrapper(opts(flags=None, stops=_HELP)),
    "linux64": Wrapper(opts(flags=None, stops=_HELP)),
    "rlwrap": Wrapper(opts("-a -b -C -D -e -f -g -H -l -O -p -P -q -s -S -t -w -z", None, _HELP)),
    "logsave": Wrapper(opts(flags="-a -v"), positionals=1),
    "cpulimit": Wrapper(opts("-l --limit -p --pid -e --exe", "-z --lazy -i --include-children "
                             "-v --verbose -q --quiet -k --kill -r --restore", "-h --help")),
    "gosu": Wrapper(opts(), positionals=1),
    "su-exec": Wrapper(opts(), positionals=1),
    "setuidgid": Wrapper(opts(), positionals=1),
    "busybox": Wrapper(opts(stops="--list --list-full --install " + _HELP)),
    "toybox": Wrapper(opts(stops="--long " + _HELP)),
    "watch": Wrapper(opts("-n --interval -q --equexit",
                          "-b --beep -c --color -C --no-color -e --errexit -g --chgexit "
                          "-p --precise -r --no-rerun -t --no-title -w --no-wrap -x --exec",
                          "-h -v " + _HELP, "-d --differences"), shell=True),
    "entr": Wrapper(opts(flags="-a -c -d -n -p -r -s -z", stops="-h")),
    # uv and pixi (clap) take long options only whole: their flags --no-build, --refresh ...
    # begin declared value options, and must not be read as them (abbrev=False).
    "uv": Wrapper(opts("--with --with-editable --with-requirements -p --python --project --directory "
                       "--env-file --package --extra --group --only-group --no-group --index "
                       "--index-url --default-index --extra-index-url -f --find-links "
                       "--config-file --cache-dir --color --python-platform --index-strategy "
                       "--keyring-provider --resolution --prerelease --exclude-newer --link-mode "
                       "-P --upgrade-package --reinstall-package --no-build-package "
                       "--no-binary-package --refresh-package -C --config-setting --from", None,
                       _HELP, abbrev=False), sub=("run",)),
    "uvx": Wrapper(opts("--from --with --with-editable --with-requirements -p --python --index "
                        "--index-url --default-index --extra-index-url -f --find-links "
                        "--config-file --cache-dir --color -C --config-setting", None, _HELP,
                        abbrev=False)),
    "poetry": Wrapper(_LENIENT, sub=("run",)),
    "pipenv": Wrapper(_LENIENT, sub=("run",)),
    "pdm": Wrapper(opts("-p --project", None, "-l --list -j --json " + _HELP), sub=("run",)),
    "hatch": Wrapper(_LENIENT, sub=("run",)),
    "conda": Wrapper(opts("-n --name -p --prefix --cwd", None, _HELP), sub=("run",)),
    "mamba": Wrapper(opts("-n --name -p --prefix --cwd", None, _HELP), sub=("run",)),
    "micromamba": Wrapper(opts("-n --name -p --prefix --cwd", None, _HELP), sub=("run",)),
    "pixi": Wrapper(opts("-e --environment --manifest-path", None, _HELP, abbrev=False),
                    sub=("run",)),
    "rye": Wrapper(_LENIENT, sub=("run",)),
    "devbox": Wrapper(_LENIENT, sub=("run",)),
    "bundle": Wrapper(_LENIENT, sub=("exec",)),
    "rbenv": Wrapper(_LENIENT, sub=("exec",)),
    "pyenv": Wrapper(_LENIENT, sub=("exec",)),
    "asdf": Wrapper(_LENIENT, sub=("exec",)),
    "direnv": Wrapper(_LENIENT, positionals=1, sub=("exec",)),
    "pnpm": Wrapper(_LENIENT, sub=("exec", "dlx")),
    "yarn": Wrapper(_LENIENT, sub=("exec", "dlx")),
    "bunx": Wrapper(_LENIENT),
    "bun": Wrapper(_LENIENT, sub=("x",)),
}
# Wrappers whose command runs as one string through ``sh -c`` when given this option.
_SHELL_OPTION = {"flock": ("-c", "--command"), "su": ("-c", "--command", "--session-command"),
                 "runuser": ("-c", "--command", "--session-command"), "sg": ("-c",),
                 "script": ("-c", "--command"), "nix-shell": ("--run", "--command"),
                 "npx": ("-c", "--call"), "npm": ("-c", "--call"), "mise": ("-c", "--command")}
_FLOCK = opts("-w --timeout --wait -E --conflict-exit-code -c --command",
              "-s --shared -x --exclusive -e -n --nonblock --nb -u --unlock -o --close "
              "-F --no-fork -v --verbose", "-h -V " + _HELP)
_SU = opts("-c --command --session-command -s --shell -g --group -G --supp-group -w "
           "--whitelist-environment -u --user", "-l --login -m -p --preserve-environment "
           "-P --pty -f --fast", "-h -V " + _HELP)
_SCRIPT = opts("-c --command -E --echo -I --log-in -O --log-out -B --log-io -T --log-timing "
               "-m --logging-format -o --output-limit", "-a --append -e --return -f --flush "
               "-q --quiet -t", "-h -V " + _HELP, "--timing")
_NPX = opts("-c --call -p --package -w --workspace", None, _HELP)
_NIX_SHELL = opts("--run --command -p --packages -A --attr -I --arg --argstr --option -j "
                  "--max-jobs --cores", None, _HELP)
_ENV = opts("-u --unset -C --chdir -S --split-string -P", "-i --ignore-environment -0 --null "
            "-v --debug --list-signal-handling", _HELP,
            "--block-signal --default-signal --ignore-signal")
_PARALLEL = opts("-j --jobs -P --max-procs -S --sshlogin --joblog -a --arg-file --colsep "
                 "-d --delimiter -E -I -n --max-args -N -L --max-lines --timeout --delay --retries "
                 "--halt --tagstring --results --tmpdir --workdir --wd --env --basefile "
                 "--transferfile --return --memfree --load --nice --sshdelay --max-replace-args "
                 "--block --blocksize --recstart --recend --seqreplace --rpl",
                 None, "--version --help --number-of-cpus --number-of-cores --citation")


_LOADER = opts("--library-path --preload --argv0 --audit --inhibit-rpath", None, "--list --verify "
               "--help --version --list-tunables --list-diagnostics")


def _setarch(words: list[Word]) -> Peeled:
    """``setarch ARCH [options] [PROGRAM [ARG]...]``: the options follow the architecture."""
    if len(words) < 2 or words[1].text.startswith("-"):
        return Peeled()
    sc = scan_options(words, opts(flags=None, stops="--list " + _HELP), 2)
    return Peeled(words=words[sc.operand:] if sc.stopped is None else [], unknown=sc.unknown)


def _loader(words: list[Word]) -> Peeled:
    """The dynamic loader run by hand (``/lib64/ld-linux-x86-64.so.2 /bin/rm -rf x``) runs
    the program that follows its options."""
    sc = scan_options(words, _LOADER, 1)
    return Peeled(words=words[sc.operand:] if sc.stopped is None else [], unknown=sc.unknown)


def peel(name: str, words: list[Word]) -> Peeled | None:
    """What the wrapper ``words[0]`` (base name ``name``) runs; ``None`` if ``name`` is no wrapper."""
    if name.startswith(("ld-linux", "ld.so", "ld64.so", "ld-musl")):
        return _loader(words)
    special = _SPECIAL.get(name)
    if special is not None:
        return special(words)
    spec = WRAPPERS.get(name)
    if spec is None:
        return None
    rest = 1
    if spec.sub:
        at = _subcommand_at(words, spec.sub)
        if isinstance(at, Peeled):
            return at
        rest = at
    sc = scan_options(words, spec.opts, rest)
    return _finish(name, words, spec, sc)


def _subcommand_at(words: list[Word], names: tuple[str, ...]) -> int | Peeled:
    """Where the words after the subcommand start, when ``words[0]``'s subcommand (after any
    global options) is one of ``names`` (``uv run``, ``npm exec``, ``nix develop``); otherwise
    what the wrapper peels: not a wrapper use (``uv pip install``, ``npm --help``), or an
    unknown program when a global option is computed (``npm -$X exec``: which word is the
    subcommand is unsure) or the subcommand itself is (``npm $X rm -rf ~``: ``$X`` may be
    ``exec``)."""
    glob = scan_options(words, _LENIENT, 1)
    if glob.unknown is not None:
        return Peeled(unknown=glob.unknown)
    if glob.operand < len(words) and words[glob.operand].dynamic:
        return Peeled(unknown=words[glob.operand].raw, subcommand=True)
    if glob.operand >= len(words) or words[glob.operand].text not in names:
        return Peeled(wrapped=False)
    return glob.operand + 1


def _finish(name: str, words: list[Word], spec: Wrapper, sc: Scan) -> Peeled:
    out = Peeled(computed=spec.computed, unknown=sc.unknown)
    if sc.unknown is not None or sc.stopped is not None:
        return out
    i = sc.operand
    if spec.assignments:
        while i < len(words) and _ASSIGNMENT.match(words[i].text):
            out.assignments.append(words[i])
            i += 1
    i += spec.positionals
    cmd = words[i:] if i <= len(words) else []
    if not cmd and spec.default:
        cmd = [Word.literal(w) for w in spec.default]
    if name == "xargs":
        cmd = _xargs_replace(cmd, sc)
    if spec.shell and not (name == "watch" and sc.has("-x", "--exec")):
        out.shell = True
        out.label = f"the command {name} runs through sh -c"
    out.words = cmd
    return out


def _xargs_replace(cmd: list[Word], sc: Scan) -> list[Word]:
    """With ``-I R`` each ``R`` in the command becomes a line of input: computed text."""
    marks = [w.text for w in sc.get("-I", "-i", "--replace")]
    if sc.has("-i", "--replace") and not any(marks):
        marks = ["{}"]
    if not any(marks):
        return cmd
    out: list[Word] = []
    for w in cmd:
        if any(m and m in w.text for m in marks):
            for m in marks:
                if m:
                    w = w.computed_where(m)
        out.append(w)
    return out


_AfterOptions = Callable[[list[Word], Scan], Peeled]


def _options_first(spec: Opts) -> Callable[[_AfterOptions], Callable[[list[Word]], Peeled]]:
    """A wrapper whose own options come first, read by ``spec``: one policy cannot read (which
    word is the program is unsure, so it is named) or one that stops the program (``--help``)
    peels nothing; otherwise ``handler`` reads on from the options' ``Scan``."""
    def wrap(handler: _AfterOptions) -> Callable[[list[Word]], Peeled]:
        def peel_it(words: list[Word]) -> Peeled:
            sc = scan_options(words, spec, 1)
            if sc.unknown is not None or sc.stopped is not None:
                return Peeled(unknown=sc.unknown)
            return handler(words, sc)
        return peel_it
    return wrap


@_options_first(_ENV)
def _env(words: list[Word], sc: Scan) -> Peeled:
    """``env [-i] [-u N] [-S STRING] [NAME=VALUE]... [COMMAND [ARG]...]``; ``-S`` splits its string."""
    out = Peeled()
    rest = words[sc.operand:]
    split = sc.get("-S", "--split-string")
    if split:
        inner: list[Word] = []
        for w in split:
            if w.dynamic:
                out.unknown = f"-S {w.raw}"  # a computed string: the command is unknown
                return out
            inner.extend(Word.literal(x) for x in _split_string(w.text))
        return _env([words[0], *inner, *rest])
    i = 0
    while i < len(rest) and _ASSIGNMENT.match(rest[i].text):
        out.assignments.append(rest[i])
        i += 1
    out.words = rest[i:]
    return out


def _split_string(text: str) -> list[str]:
    """``env -S``'s splitting: blanks separate, quotes group, backslash escapes."""
    out: list[str] = []
    cur: list[str] = []
    have = False
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\n":
            if have:
                out.append("".join(cur))
                cur, have = [], False
            i += 1
            continue
        have = True
        if c == "'":
            end = text.find("'", i + 1)
            end = len(text) if end < 0 else end
            cur.append(text[i + 1:end])
            i = end + 1
        elif c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                if text[j] == "\\" and j + 1 < len(text):
                    j += 1
                cur.append(text[j])
                j += 1
            i = j + 1
        elif c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            cur.append({"n": "\n", "t": "\t", "_": " "}.get(nxt, nxt))
            i += 2
        elif c == "#" and not cur:
            break
        else:
            cur.append(c)
            i += 1
    if have:
        out.append("".join(cur))
    return out


@_options_first(_FLOCK)
def _flock(words: list[Word], sc: Scan) -> Peeled:
    """``flock [opts] FILE CMD [ARG]...``, ``flock [opts] FILE -c CMD``, or ``flock FD`` (runs nothing)."""
    strings = sc.get("-c", "--command")
    rest = words[sc.operand + 1:]
    if not strings and rest[:1] and rest[0].text in ("-c", "--command"):
        strings = rest[1:2]
    if strings:
        return Peeled(words=strings[:1], shell=True, label="the command of flock -c")
    return Peeled(words=rest)


@_options_first(_SU)
def _su(words: list[Word], sc: Scan) -> Peeled:
    """``su [opts] [-] [USER [ARG]...]``: ``-c CMD`` (before or after USER) runs CMD in a shell."""
    name = base(words[0])
    strings = sc.get("-c", "--command", "--session-command")
    rest = words[sc.operand:]
    for k, w in enumerate(rest):
        if w.text in ("-c", "--command", "--session-command") and k + 1 < len(rest):
            strings.append(rest[k + 1])
        elif w.text.startswith(("--command=", "--session-command=")):
            strings.append(Word.literal(w.text.partition("=")[2]) if not w.dynamic else w)
    if strings:
        return Peeled(words=strings[:1], shell=True, label=f"the command of {name} -c")
    return Peeled()


def _sg(words: list[Word]) -> Peeled:
    """``sg [-] GROUP [-c] COMMAND``: the command runs through ``sh -c``."""
    i = 1
    if i < len(words) and words[i].text == "-":
        i += 1
    rest = words[i + 1:]
    if rest[:1] and rest[0].text == "-c":
        rest = rest[1:2]
    if not rest:
        return Peeled()
    joined = " ".join(w.text for w in rest)
    word = rest[0] if len(rest) == 1 else Word(joined, joined, (
        "x" if any(w.dynamic for w in rest) else "q") * len(joined))
    return Peeled(words=[word], shell=True, label="the command of sg")


def _string_option(name: str, spec: Opts) -> Callable[[list[Word]], Peeled]:
    """``script -c CMD``, ``nix-shell --run CMD``: a shell string, or an interactive shell."""
    @_options_first(spec)
    def peel_it(_words: list[Word], sc: Scan) -> Peeled:
        strings = sc.get(*_SHELL_OPTION[name])
        if strings:
            return Peeled(words=strings[:1], shell=True,
                          label=f"the command of {name} {_opt_name(sc, _SHELL_OPTION[name])}")
        return Peeled()
    return peel_it


@_options_first(_NPX)
def _npx(words: list[Word], sc: Scan) -> Peeled:
    """``npx [opts] CMD [ARG]...`` runs a package's program; ``-c 'CMD'`` runs a shell string."""
    strings = sc.get("-c", "--call")
    if strings:
        return Peeled(words=strings[:1], shell=True, label="the command of npx -c")
    return Peeled(words=words[sc.operand:])


def _opt_name(sc: Scan, names: tuple[str, ...]) -> str:
    return next((o for o, _ in sc.values if o in names), names[0])


_AfterSubcommand = Callable[[list[Word], int], Peeled]


def _after_subcommand(*names: str) -> Callable[[_AfterSubcommand], Callable[[list[Word]], Peeled]]:
    """A wrapper only after one of its subcommands ``names`` (:func:`_subcommand_at`);
    ``handler`` reads on from the index after the subcommand."""
    def wrap(handler: _AfterSubcommand) -> Callable[[list[Word]], Peeled]:
        def peel_it(words: list[Word]) -> Peeled:
            at = _subcommand_at(words, names)
            return at if isinstance(at, Peeled) else handler(words, at)
        return peel_it
    return wrap


@_after_subcommand("exec", "x")
def _npm(words: list[Word], at: int) -> Peeled:
    """``npm exec [--] CMD`` / ``npm x -c 'CMD'``; other npm subcommands run package.json scripts."""
    sc = scan_options(words, _NPX, at)
    strings = sc.get("-c", "--call")
    if strings:
        return Peeled(words=strings[:1], shell=True, label="the command of npm exec -c")
    return Peeled(words=words[sc.operand:], unknown=sc.unknown)


@_after_subcommand("exec", "x")
def _mise(words: list[Word], at: int) -> Peeled:
    """``mise exec [TOOL@VER]... -- CMD`` or ``mise x -c 'CMD'``."""
    rest = words[at:]
    for k, w in enumerate(rest):
        if w.text in ("-c", "--command") and k + 1 < len(rest):
            return Peeled(words=[rest[k + 1]], shell=True, label="the command of mise exec -c")
        if w.text == "--":
            return Peeled(words=rest[k + 1:])
    return Peeled()


@_after_subcommand("develop", "shell")
def _nix(words: list[Word], at: int) -> Peeled:
    """``nix develop|shell ... -c CMD ARG...`` runs CMD with its arguments."""
    rest = words[at:]
    for k, w in enumerate(rest):
        if w.text in ("-c", "--command"):
            return Peeled(words=rest[k + 1:])
    return Peeled()


def _cmake(words: list[Word]) -> Peeled:
    """``cmake -E <tool>``: ``env``, ``chdir DIR``, ``time`` run a command; ``rm`` is rm."""
    if len(words) < 3 or words[1].text != "-E":
        return Peeled(wrapped=False)
    tool, rest = words[2].text, words[3:]
    if tool == "env":
        sc = scan_options(rest, opts("--unset", "--modify", "--", ""), 0)
        i = sc.operand
        while i < len(rest) and _ASSIGNMENT.match(rest[i].text):
            i += 1
        return Peeled(words=rest[i:], assignments=rest[sc.operand:i])
    if tool == "chdir":
        return Peeled(words=rest[1:])
    if tool == "time":
        return Peeled(words=rest)
    if tool in ("rm", "remove", "remove_directory", "rmdir"):
        flags = {"remove_directory": ["-r", "-f"], "rmdir": []}.get(tool, [])
        return Peeled(words=[Word.literal("rm"), *map(Word.literal, flags), *rest])
    return Peeled(wrapped=False)


def _bwrap(words: list[Word]) -> Peeled:
    """``bwrap [options] COMMAND``: its options take 0 to 3 arguments each."""
    i = 1
    while i < len(words):
        t = words[i].text
        if t == "--":
            i += 1
            break
        if not t.startswith("--"):
            break
        n = _BWRAP_ARGS.get(t)
        if n is None:
            return Peeled(unknown=t)
        i += 1 + n
    return Peeled(words=words[i:])


_BWRAP_ARGS = {o: 0 for o in (
    "--unshare-user --unshare-user-try --unshare-ipc --unshare-pid --unshare-net --unshare-uts "
    "--unshare-cgroup --unshare-cgroup-try --unshare-all --share-net --die-with-parent --as-pid-1 "
    "--new-session --clearenv --disable-userns --assert-userns-disabled").split()}
_BWRAP_ARGS.update({o: 1 for o in (
    "--args --argv0 --uid --gid --hostname --chdir --unsetenv --lock-file --sync-fd --remount-ro "
    "--exec-label --file-label --proc --dev --tmpfs --mqueue --dir --seccomp --add-seccomp-fd "
    "--userns --userns2 --pidns --info-fd --json-status-fd --block-fd --userns-block-fd "
    "--cap-add --cap-drop --perms --size --overlay-src --tmp-overlay --ro-overlay").split()})
_BWRAP_ARGS.update({o: 2 for o in (
    "--bind --bind-try --dev-bind --dev-bind-try --ro-bind --ro-bind-try --symlink --file "
    "--bind-data --ro-bind-data --chmod --setenv --bind-fd --ro-bind-fd").split()})
_BWRAP_ARGS["--overlay"] = 3


def _parallel(words: list[Word]) -> Peeled:
    """GNU ``parallel [options] COMMAND ::: ARGS``: the command runs through a shell per input."""
    sc = scan_options(words, _PARALLEL, 1)
    if sc.stopped is not None:
        return Peeled()
    cmd: list[Word] = []
    for w in words[sc.operand:]:
        if w.text in (":::", "::::", ":::+", "::::+"):
            break
        cmd.append(w)
    if not cmd:
        return Peeled(words=[Word.literal("-")], shell=False, computed=True, unknown=sc.unknown,
                      label="commands read from standard input by parallel")
    joined = " ".join(w.text for w in cmd)
    dynamic = any(w.dynamic for w in cmd)
    word = Word(joined, joined, ("x" if dynamic else "q") * len(joined))
    return Peeled(words=[word], shell=True, computed=True, unknown=sc.unknown,
                  label="the command of parallel")


_SPECIAL: dict[str, Callable[[list[Word]], Peeled]] = {
    "env": _env, "npm": _npm, "mise": _mise, "nix": _nix, "cmake": _cmake, "bwrap": _bwrap,
    "parallel": _parallel, "sem": _parallel,
    "setarch": _setarch, "flock": _flock, "su": _su, "runuser": _su, "sg": _sg, "npx": _npx,
    "script": _string_option("script", _SCRIPT),
    "nix-shell": _string_option("nix-shell", _NIX_SHELL),
}


def base(word: Word) -> str:
    return os.path.basename(word.text)
