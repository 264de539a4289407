"""The ``sandbox`` section of ``ABHED_HOME/config.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_ENV_ALLOW", "SandboxSettings"]

# Host variables that may reach a sandboxed command (values copied when set).
# Everything else, credentials included, stays on the host.
DEFAULT_ENV_ALLOW: tuple[str, ...] = ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ",
                                      "SOURCE_DATE_EPOCH")


class SandboxSettings(BaseModel):
    """Where the agent's shell runs, and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["auto", "microvm", "bwrap", "host"] = Field(
        default="auto",
        description="auto: the microVM when its image and QEMU work here, else bubblewrap. "
        "host runs commands unsandboxed and is only used when set explicitly.",
    )
    image_dir: str | None = Field(
        default=None,
        description="Folder with vmlinuz, initrd.img, rootfs.ext4, manifest.json "
        "(default: ABHED_HOME/image).",
    )
    accel: Literal["auto", "kvm", "tcg"] = Field(
        default="auto",
        description="auto: try a KVM boot (microvm machine), fall back to software emulation (q35).",
    )
    memory_mib: int = Field(default=1024, ge=128, le=1 << 20)
    vcpus: int = Field(default=2, ge=1, le=256)
    boot_timeout_s: float = Field(default=90.0, gt=0, le=900)
    boot_at_open: bool = Field(
        default=True,
        description="microvm: start booting the VM when the session opens, in the background, "
        "so the first command rarely waits (false: boot on the first command).",
    )
    kill_grace_s: float = Field(default=2.0, ge=0, le=60,
                                description="SIGTERM to SIGKILL delay when a command is stopped.")
    max_output_bytes: int = Field(default=64 * 1024 * 1024, ge=1024,
                                  description="A command printing more is killed (output overflow).")
    env_allow: tuple[str, ...] = Field(
        default=DEFAULT_ENV_ALLOW,
        description="Host environment variables passed into the sandbox; nothing else is.",
    )
    qemu_binary: str = "qemu-system-x86_64"
