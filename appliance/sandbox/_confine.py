"""Last step inside bubblewrap: Landlock and a seccomp filter, then exec the shell.

Run as ``python3 -I -S _confine.py RW_DIR... -- ARGV``.  Standard library only
(it runs from the host's /usr inside the sandbox).  Why here and not before
bubblewrap: a landlocked process may not mount, and bubblewrap must mount to
build the sandbox; the seccomp filter denies ``unshare``/``mount`` which
bubblewrap needs too.  So both are applied after bubblewrap has set up, by
this small program, right before the command starts.

* Landlock: read and execute anywhere in the (already reduced) sandbox view,
  write only beneath the given directories (workspace, /tmp) and to /dev
  nodes.  Skipped with a note on stderr only when the kernel has no Landlock;
  ``ABHED_CONFINE_STRICT=1`` makes that fatal.
* seccomp: deny (EPERM) syscalls a build or test never needs but an escape
  does: ptrace, mount family, namespaces (unshare, setns, clone with
  CLONE_NEWUSER), module loading, kexec, bpf, perf, keyctl, userfaultfd,
  io_uring, process_vm_*, TIOCSTI.  Non-x86_64 syscall ABIs are killed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

_SYS_landlock_create_ruleset = 444
_SYS_landlock_add_rule = 445
_SYS_landlock_restrict_self = 446
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _fs_rights(abi: int) -> tuple[int, int, int]:
    """(all handled rights, read+exec rights, device rights) for a Landlock ABI."""
    handled = (1 << 13) - 1  # EXECUTE .. MAKE_SYM (ABI 1)
    if abi >= 2:
        handled |= 1 << 13  # REFER
    if abi >= 3:
        handled |= 1 << 14  # TRUNCATE
    if abi >= 5:
        handled |= 1 << 15  # IOCTL_DEV
    read = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
    dev = read | 2 | (handled & ((1 << 14) | (1 << 15)))  # + WRITE_FILE, TRUNCATE, IOCTL_DEV
    return handled, read, dev


def landlock(rw_dirs: list[str]) -> int:
    """Restrict this process; return the ABI used (0 when unsupported)."""
    abi = _libc.syscall(_SYS_landlock_create_ruleset, None, 0, 1)
    if abi < 0:
        return 0
    handled, read, dev = _fs_rights(abi)
    attr = struct.pack("=Q", handled)
    fd = _libc.syscall(_SYS_landlock_create_ruleset, ctypes.c_char_p(attr), len(attr), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    def allow(path: str, rights: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        rule = struct.pack("=Qi", rights & handled, pfd)
        rc = _libc.syscall(_SYS_landlock_add_rule, fd, 1, ctypes.c_char_p(rule), 0)
        os.close(pfd)
        if rc < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")

    allow("/", read)
    allow("/dev", dev)
    allow("/proc", dev)
    for d in rw_dirs:
        allow(d, handled)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")
    if _libc.syscall(_SYS_landlock_restrict_self, fd, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(fd)
    return int(abi)


# x86_64 syscall numbers denied outright.
_DENY = (
    101,  # ptrace
    135,  # personality
    155, 165, 166,  # pivot_root, mount, umount2
    163,  # acct
    167, 168, 169,  # swapon, swapoff, reboot
    170, 171,  # sethostname, setdomainname
    172, 173,  # iopl, ioperm
    175, 176, 313,  # init_module, delete_module, finit_module
    179,  # quotactl
    212,  # lookup_dcookie
    246, 320,  # kexec_load, kexec_file_load
    248, 249, 250,  # add_key, request_key, keyctl
    272, 308,  # unshare, setns
    298,  # perf_event_open
    303, 304,  # name_to_handle_at, open_by_handle_at
    310, 311,  # process_vm_readv, process_vm_writev
    321,  # bpf
    323,  # userfaultfd
    425, 426, 427,  # io_uring_*
    428, 429, 430, 431, 432, 442,  # open_tree, move_mount, fsopen, fsconfig, fsmount, mount_setattr
)
_SYS_clone, _SYS_clone3, _SYS_ioctl = 56, 435, 16
_CLONE_NEWUSER = 0x10000000
_TIOCSTI = 0x5412
_AUDIT_ARCH_X86_64 = 0xC000003E

# classic BPF opcodes
_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000


def _errno_ret(err: int) -> int:
    return 0x00050000 | err


def seccomp_program() -> bytes:
    ins: list[tuple[int, int, int, int]] = []

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        ins.append((code, jt, jf, k))

    op(_LD_W_ABS, 4)  # arch
    op(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0)
    op(_RET_K, _RET_KILL)
    op(_LD_W_ABS, 0)  # nr
    op(_JGE_K, 0x40000000, 0, 1)  # x32 ABI
    op(_RET_K, _errno_ret(errno.EPERM))
    for nr in _DENY:
        op(_JEQ_K, nr, 0, 1)
        op(_RET_K, _errno_ret(errno.EPERM))
    # clone3's flags live in memory BPF cannot read: make libc fall back to clone.
    op(_JEQ_K, _SYS_clone3, 0, 1)
    op(_RET_K, _errno_ret(errno.ENOSYS))
    op(_JEQ_K, _SYS_clone, 0, 3)
    op(_LD_W_ABS, 16)  # args[0] low word: clone flags
    op(_JSET_K, _CLONE_NEWUSER, 0, 1)
    op(_RET_K, _errno_ret(errno.EPERM))
    op(_LD_W_ABS, 0)
    op(_JEQ_K, _SYS_ioctl, 0, 3)
    op(_LD_W_ABS, 24)  # args[1] low word: request
    op(_JEQ_K, _TIOCSTI, 0, 1)
    op(_RET_K, _errno_ret(errno.EPERM))
    op(_RET_K, _RET_ALLOW)
    return b"".join(struct.pack("=HBBI", *i) for i in ins)


def seccomp() -> None:
    prog = seccomp_program()
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = struct.pack("=HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(SECCOMP)")


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit("usage: _confine.py RW_DIR... -- ARGV")
    split = argv.index("--")
    rw, cmd = argv[:split], argv[split + 1:]
    if not cmd:
        raise SystemExit("_confine.py: nothing to run after --")
    abi = landlock(rw)
    if abi == 0 and os.environ.get("ABHED_CONFINE_STRICT") == "1":
        raise SystemExit("abhed sandbox: this kernel has no Landlock; refusing to run")
    seccomp()
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
