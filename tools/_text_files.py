"""Text files on disk for read, write and edit: their facts, decoding and atomic writes.

Everything here streams in fixed-size chunks, so a 100 MB file costs the same
memory as a 1 KB one.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from foundation import NotRegularFile, open_regular_fd
from tools._result import ToolFailure

__all__ = [
    "CHUNK",
    "FileFacts",
    "atomic_write",
    "binary_kind",
    "decode",
    "display",
    "encode",
    "encode_new",
    "open_regular_at",
    "file_facts",
]

CHUNK = 1 << 20

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Magic numbers for the binary formats a repository commonly holds, so a
# refusal can name what the file is.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (also jar/whl/docx/xlsx)"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"(\xb5/\xfd", "zstd-compressed data"),
    (b"7z\xbc\xaf\x27\x1c", "7-zip archive"),
    (b"\x7fELF", "ELF executable or library"),
    (b"MZ", "Windows PE executable"),
    (b"\xcf\xfa\xed\xfe", "Mach-O binary"),
    (b"\xca\xfe\xba\xbe", "Java class file or Mach-O universal binary"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x00asm", "WebAssembly module"),
    (b"RIFF", "RIFF media (WAV/AVI/WebP)"),
    (b"OggS", "Ogg media"),
    (b"ID3", "MP3 audio"),
    (b"\x00\x00\x01\x00", "ICO image"),
    (b"BM", "BMP image"),
    (b"II*\x00", "TIFF image"),
    (b"MM\x00*", "TIFF image"),
)

_BARE_LF = re.compile(r"(?<!\r)\n")
_MULTIBYTE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def bom_of(head: bytes) -> tuple[bytes, str] | None:
    for bom, enc in _BOMS:
        if head.startswith(bom):
            return bom, enc
    return None


def binary_kind(head: bytes) -> str | None:
    """Name the binary type of a file from its first bytes, or ``None`` for text.

    A file is text when it starts with a Unicode BOM, or has no NUL byte in its
    first 8 KiB and is not one of the known binary formats.
    """
    if bom_of(head):
        return None
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if magic in (b"MZ", b"BM", b"ID3") and b"\x00" not in head[:8192]:
                continue  # short magics that plain text can start with
            return kind
    if b"\x00" in head[:8192]:
        return "binary data (contains NUL bytes)"
    return None


@dataclass
class FileFacts:
    """What one streaming pass learns about a file's bytes."""

    size: int
    sha256: str
    encoding: str  # a Python codec name; "utf-8" may carry invalid bytes (see ``lossy``)
    bom: bytes
    lossy: bool  # not valid in ``encoding``: invalid bytes kept via surrogateescape
    lf: int
    crlf: int
    ends_with_newline: bool
    data: bytes | None = None  # the whole file, when the caller asked to keep it
    cr: int = 0  # every CR, those of CRLFs included
    ends_with_cr: bool = False

    @property
    def line_count(self) -> int:
        if self.size == len(self.bom):
            return 0
        if self.newline == "\r":
            return self.cr + (0 if self.ends_with_cr else 1)
        return self.lf + (0 if self.ends_with_newline else 1)

    @property
    def newline(self) -> str:
        """The file's line ending, decided with its charset and BOM (docs/tools.md, "One codec").

        "\\r\\n" when every LF is part of a CRLF; "\\r" for a CR-only file (classic
        Mac OS: CRs and no LF at all); otherwise "\\n", which also covers a file
        with mixed endings: it is matched byte for byte.
        """
        if self.crlf and self.crlf == self.lf:
            return "\r\n"
        if self.cr and not self.lf:
            return "\r"
        return "\n"

    @property
    def newline_label(self) -> str:
        return {"\r\n": "CRLF", "\r": "CR"}.get(self.newline, "LF")

    def to_file_text(self, text: str) -> str:
        """Model text (lines ended by \\n, as read shows them) in the file's line endings.

        Only a bare LF is translated: an explicit \\r\\n is kept, so text written
        either way means the same thing.  Mixed-ending files are left as given.
        """
        if self.newline == "\n" or "\n" not in text:
            return text
        return _BARE_LF.sub(self.newline, text)

    def to_model_text(self, text: str) -> str:
        """File text with the file's line ending shown as \\n (the inverse of :meth:`to_file_text`)."""
        if self.newline == "\n":
            return text
        return text.replace(self.newline, "\n")

    @property
    def encoding_label(self) -> str:
        label = self.encoding + (" with BOM" if self.bom else "")
        return label + (" (with invalid bytes)" if self.lossy else "")


def file_facts(fd: int, *, keep_bytes: int = 0) -> FileFacts:
    """Hash a file and learn its encoding and line endings in one streaming pass.

    When the file is at most ``keep_bytes`` long its bytes are kept in
    ``FileFacts.data``, saving callers a second read of small files.
    """
    os.lseek(fd, 0, os.SEEK_SET)
    digest = hashlib.sha256()
    size = lf = crlf = cr = 0
    decoder: codecs.IncrementalDecoder | None = None
    utf8_ok = True
    multibyte = False
    last = b""
    prev_cr = False
    bom = b""
    encoding = "utf-8"
    wide = False
    kept: list[bytes] | None = [] if keep_bytes > 0 else None
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        if kept is not None:
            if size + len(chunk) <= keep_bytes:
                kept.append(chunk)
            else:
                kept = None
        if size == 0:
            found = bom_of(chunk)
            if found:
                bom, encoding = found
            decoder = codecs.getincrementaldecoder(encoding)("strict")
            wide = encoding.startswith(("utf-16", "utf-32"))
            body = chunk[len(bom):]
        else:
            body = chunk
        size += len(chunk)
        digest.update(chunk)
        text: str | bytes = body
        if utf8_ok and decoder is not None:
            try:
                decoded = decoder.decode(body)
            except UnicodeDecodeError:
                utf8_ok = False
            else:
                if wide:
                    text = decoded
        if wide and isinstance(text, str):
            # UTF-16/32: count line endings on characters, not bytes.
            lf += text.count("\n")
            cr += text.count("\r")
            crlf += text.count("\r\n") + (1 if prev_cr and text.startswith("\n") else 0)
            prev_cr = text.endswith("\r")
            if text:
                last = b"\n" if text.endswith("\n") else b"\r" if text.endswith("\r") else b"x"
        else:
            lf += chunk.count(b"\n")
            cr += chunk.count(b"\r")
            crlf += chunk.count(b"\r\n") + (1 if prev_cr and chunk.startswith(b"\n") else 0)
            prev_cr = chunk.endswith(b"\r")
            last = chunk[-1:]
        if not bom and not multibyte and not chunk.isascii() and _MULTIBYTE.search(chunk):
            multibyte = True
    if decoder is not None and utf8_ok:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            utf8_ok = False
    lossy = False
    if not utf8_ok:
        if bom or multibyte:
            lossy = True  # mostly UTF-8 (or BOM'd): keep the odd invalid byte as-is
        else:
            encoding = "latin-1"  # no UTF-8 sequences at all: a legacy 8-bit file
    os.lseek(fd, 0, os.SEEK_SET)
    return FileFacts(
        size=size,
        sha256=digest.hexdigest(),
        encoding=encoding,
        bom=bom,
        lossy=lossy,
        lf=lf,
        crlf=crlf,
        ends_with_newline=last == b"\n",
        data=b"".join(kept) if kept is not None else None,
        cr=cr,
        ends_with_cr=last == b"\r",
    )


def decode(data: bytes, facts: FileFacts) -> str:
    """Decode file bytes (without BOM) so that :func:`encode` gives them back exactly."""
    return data.decode(facts.encoding, "surrogateescape" if facts.lossy else "strict")


def display(data: bytes, facts: FileFacts) -> str:
    """Decode for showing: invalid bytes become U+FFFD, never lone surrogates."""
    return data.decode(facts.encoding, "replace")


def encode(text: str, facts: FileFacts, *, what: str) -> bytes:
    """Encode text in the file's encoding, refusing characters it cannot hold."""
    try:
        return text.encode(facts.encoding, "surrogateescape" if facts.lossy else "strict")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise ToolFailure(
            "encoding_error",
            f"{what} contains {bad!r}, which the file's encoding ({facts.encoding_label}) cannot "
            "represent. The file was not changed. Use characters the encoding holds, or convert the "
            "file with bash if changing its encoding is intended.",
        ) from None


def encode_new(text: str, *, what: str) -> bytes:
    """Bytes of a new file: UTF-8, with surrogate escapes giving back the bytes they stand for.

    A lone surrogate outside U+DC80..U+DCFF stands for no byte at all, so it is
    refused as an encoding error rather than crashing the call.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise ToolFailure(
            "encoding_error",
            f"{what} contains {bad!r} at position {exc.start}, a lone surrogate that UTF-8 cannot "
            "represent. Nothing was written. Remove it or use the character you meant.",
        ) from None


def open_regular_at(dir_fd: int, name: str, path: str) -> int:
    """Open a regular file beneath ``dir_fd`` for reading, never following a final symlink.

    The rule is foundation's (checked on the opened descriptor, so a file swapped for a
    FIFO between the caller's ``lstat`` and this open is refused, never waited on); the
    words are the model's.
    """
    try:
        return open_regular_fd(name, what=path, dir_fd=dir_fd, follow_symlinks=False)
    except NotRegularFile as exc:
        if exc.kind == "a directory":
            raise ToolFailure("is_directory", f"{path} is a directory. Use glob to list it.") from None
        raise ToolFailure("not_a_regular_file", f"{path} is {exc.kind}, not a regular file; "
                          "it was replaced while being opened, or cannot be read without "
                          "blocking. Check it and retry.", retryable=True) from None
    except FileNotFoundError:
        raise ToolFailure("not_found", f"{path} disappeared while being opened; check it and retry.",
                          retryable=True) from None
    except PermissionError:
        raise ToolFailure(
            "permission_denied",
            f"Permission denied opening {path}. The agent's user cannot access it; ask the user to "
            "change its permissions if you need it.",
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolFailure("changed_during_call", f"{path} was replaced by a symlink while being "
                              "opened; retry.", retryable=True) from None
        if exc.errno == errno.EISDIR:
            raise ToolFailure("is_directory", f"{path} is a directory. Use glob to list it.") from None
        raise ToolFailure("io_error", f"Could not open {path}: {exc.strerror}.", retryable=True) from None


def atomic_write(
    dir_fd: int,
    name: str,
    path: str,
    chunks: Iterable[bytes],
    *,
    mode: int,
    owner: tuple[int, int] | None = None,
) -> int:
    """Write ``chunks`` to a temp file beside ``name``, fsync, rename over it.

    Returns the bytes written.  On any failure the temp file is removed and the
    original is untouched; a crash leaves at most a stray ``.abhed-*.tmp``.
    """
    tmp = f".{name[:180]}.abhed-{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dir_fd)
    except PermissionError:
        raise ToolFailure(
            "permission_denied",
            f"Permission denied creating a file in {os.path.dirname(path)}. Nothing was written.",
        ) from None
    except OSError as exc:
        code = "read_only_filesystem" if exc.errno == errno.EROFS else "io_error"
        raise ToolFailure(code, f"Could not write {path}: {exc.strerror}. Nothing was written.") from None
    written = 0
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                    written += n
            if owner is not None:
                try:
                    os.fchown(fd, *owner)
                except PermissionError:
                    pass  # not root: the file keeps our owner, as any editor's would
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        if isinstance(exc, OSError):
            code = "disk_full" if exc.errno == errno.ENOSPC else "io_error"
            raise ToolFailure(code, f"Writing {path} failed: {exc.strerror}. The original file is "
                              "untouched.", retryable=exc.errno != errno.ENOSPC) from None
        raise
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    return written
