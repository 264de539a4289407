"""The outer container: a strict subset of POSIX ustar, written and read here.

Why our own reader instead of ``tarfile``: ``tarfile`` silently stops at a
corrupt header after the first (so a damaged bundle reads as a shorter one),
follows pax and GNU extension headers that can rename members, and accepts
links and devices.  The subset below is what our builder writes and nothing
more, so anything else is refused by name, before its data is read.

Every member is a 512-byte ustar header then its data, zero-padded to 512:

* typeflag ``'0'`` (regular file) only; linkname empty; magic ``ustar\\0``,
  version ``00``; mode 0644, uid/gid 0, empty owner names, mtime 0;
* the name in ``name`` (up to 100 bytes) or split at a ``/`` into
  ``prefix`` + ``name``; see ``check_member_name`` for the allowed names;
* the size in octal, or, at 8 GiB and above, in base-256 (first byte 0x80,
  then big-endian), the GNU/star extension that GNU tar and Python read;
* the header checksum is the unsigned byte sum with the checksum field as spaces.

The archive ends with two zero blocks; only zero bytes may follow them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ._errors import FormatError, UnsafeMember

__all__ = ["BLOCK", "MemberHeader", "TarReader", "check_member_name", "end_of_archive",
           "member_header", "padding"]

BLOCK = 512
CHUNK = 1 << 20
MAX_NAME_BYTES = 255
_OCTAL_SIZE_LIMIT = 8**11  # 8 GiB: the largest size 11 octal digits can hold, plus one
_COMPONENT = re.compile(r"[A-Za-z0-9_.+=@~,-]+")
_TYPE_NAMES = {
    b"1": "a hard link", b"2": "a symbolic link", b"3": "a character device",
    b"4": "a block device", b"5": "a directory", b"6": "a FIFO", b"7": "a contiguous file",
    b"x": "a pax extended header", b"g": "a pax global header", b"L": "a GNU long-name header",
    b"K": "a GNU long-link header", b"\0": "an old-style (pre-POSIX) file entry",
}


def check_member_name(name: str) -> None:
    """Refuse any name that could escape a directory, hide, or differ by platform.

    Allowed: relative paths of ``/``-separated components made of ASCII
    letters, digits and ``_ . + = @ ~ , -``, no component ``.`` or ``..``,
    at most 255 bytes.
    """
    if not name or len(name.encode("utf-8", "replace")) > MAX_NAME_BYTES:
        raise UnsafeMember(f"member name {name[:80]!r} is empty or longer than "
                           f"{MAX_NAME_BYTES} bytes")
    if name.startswith("/") or "\\" in name or "\0" in name:
        raise UnsafeMember(f"member name {name!r} is absolute or contains a backslash or NUL: "
                           "refused (it could write outside the staging area)")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise UnsafeMember(f"member name {name!r} has an empty, '.' or '..' component: "
                               "refused (path traversal)")
        if not _COMPONENT.fullmatch(part):
            raise UnsafeMember(f"member name {name!r} has characters outside "
                               "[A-Za-z0-9_.+=@~,-]: refused")


def _octal(value: int, width: int) -> bytes:
    return format(value, "o").zfill(width - 1).encode() + b"\0"


def member_header(name: str, size: int) -> bytes:
    """The 512-byte ustar header for a regular file ``name`` of ``size`` bytes."""
    check_member_name(name)
    raw = name.encode()
    prefix = b""
    if len(raw) > 100:
        cut = raw.rfind(b"/", 0, 156)  # the rightmost '/' that leaves a prefix <= 155 bytes
        if cut <= 0 or len(raw) - cut - 1 > 100:
            raise FormatError(f"member name {name!r} cannot be split into ustar prefix (155) "
                              "and name (100) at a '/': shorten it")
        prefix, raw = raw[:cut], raw[cut + 1:]
    if size < 0:
        raise FormatError("negative member size")
    size_field = (_octal(size, 12) if size < _OCTAL_SIZE_LIMIT
                  else b"\x80" + size.to_bytes(11, "big"))
    header = bytearray(BLOCK)
    header[0:len(raw)] = raw
    header[100:108] = _octal(0o644, 8)
    header[108:116] = _octal(0, 8)
    header[116:124] = _octal(0, 8)
    header[124:136] = size_field
    header[136:148] = _octal(0, 12)
    header[148:156] = b" " * 8
    header[156:157] = b"0"
    header[257:263] = b"ustar\0"
    header[263:265] = b"00"
    header[329:337] = _octal(0, 8)
    header[337:345] = _octal(0, 8)
    header[345:345 + len(prefix)] = prefix
    header[148:156] = format(sum(header), "06o").encode() + b"\0 "
    return bytes(header)


def padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


def end_of_archive() -> bytes:
    return bytes(2 * BLOCK)


@dataclass(frozen=True)
class MemberHeader:
    name: str
    size: int
    offset: int  # where the member's data starts in the file


def _parse_size(field: bytes, where: str) -> int:
    if field[0] & 0x80:
        if field[0] != 0x80:
            raise FormatError(f"{where}: negative or oversized base-256 size field")
        return int.from_bytes(field[1:], "big")
    text = field.rstrip(b"\0 ").lstrip(b" ")
    if not text or not all(0x30 <= c <= 0x37 for c in text):
        raise FormatError(f"{where}: size field {field!r} is not octal")
    return int(text, 8)


def _cstring(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


class TarReader:
    """Reads our ustar subset front to back, one member at a time, from any stream.

    ``next_member()`` returns the next header (or None at a proper end of
    archive); then the caller either reads the data with ``data()`` or skips
    it with ``skip()``.  Every structural fault raises FormatError naming the
    byte offset, so an operator can tell truncation from tampering.
    """

    def __init__(self, f: BinaryIO, *, label: str = "bundle") -> None:
        self._f = f
        self._label = label
        self._pos = 0
        self._pending: MemberHeader | None = None
        self._done = False

    def _read_exact(self, n: int) -> bytes:
        buf = self._f.read(n)
        while len(buf) < n:
            more = self._f.read(n - len(buf))
            if not more:
                raise FormatError(f"{self._label} ends early at byte {self._pos + len(buf)} "
                                  "(truncated: an incomplete copy or a full disk?); copy it again")
            buf += more
        self._pos += n
        return buf

    def next_member(self) -> MemberHeader | None:
        if self._pending is not None:
            raise RuntimeError("read or skip the previous member's data first")
        if self._done:
            return None
        at = self._pos
        block = self._read_exact(BLOCK)
        if block == bytes(BLOCK):
            if self._read_exact(BLOCK) != bytes(BLOCK):
                raise FormatError(f"{self._label}: a lone zero block at byte {at} is followed "
                                  "by data; the archive is damaged")
            self._check_trailer()
            self._done = True
            return None
        where = f"{self._label}: header at byte {at}"
        stored = block[148:156]
        expected = sum(block[:148]) + 8 * 0x20 + sum(block[156:])
        try:
            stored_sum = int(_cstring(stored).strip(b" ") or b"-1", 8)
        except ValueError:
            stored_sum = -1
        if stored_sum != expected:
            raise FormatError(f"{where} has a bad checksum: the file is corrupt there")
        if block[257:263] != b"ustar\0" or block[263:265] != b"00":
            raise FormatError(f"{where} is not a POSIX ustar header")
        raw_name = _cstring(block[0:100])
        prefix = _cstring(block[345:500])
        full = (prefix + b"/" + raw_name) if prefix else raw_name
        try:
            name = full.decode("ascii")
        except UnicodeDecodeError:
            raise UnsafeMember(f"{where}: member name {full!r} is not ASCII: refused") from None
        typeflag = block[156:157]
        if typeflag != b"0":
            kind = _TYPE_NAMES.get(typeflag, f"type {typeflag!r}")
            raise UnsafeMember(f"{where}: member {name!r} is {kind}; a bundle holds regular "
                               "files only: refused")
        if _cstring(block[157:257]):
            raise UnsafeMember(f"{where}: member {name!r} names a link target: refused")
        check_member_name(name)
        size = _parse_size(block[124:136], where)
        self._pending = MemberHeader(name=name, size=size, offset=self._pos)
        return self._pending

    def data(self, limit: int = CHUNK) -> Iterator[bytes]:
        """The pending member's data in chunks of at most ``limit`` bytes."""
        member = self._pending
        if member is None:
            raise RuntimeError("no pending member")
        left = member.size
        while left:
            chunk = self._f.read(min(limit, left))
            if not chunk:
                raise FormatError(f"{self._label} ends inside member {member.name!r} at byte "
                                  f"{self._pos} (truncated); copy it again")
            self._pos += len(chunk)
            left -= len(chunk)
            yield chunk
        pad = -member.size % BLOCK
        if pad and self._read_exact(pad) != bytes(pad):
            raise FormatError(f"{self._label}: padding after member {member.name!r} is not "
                              "zero; the archive is damaged")
        self._pending = None

    def read_all(self, cap: int) -> bytes:
        member = self._pending
        if member is None:
            raise RuntimeError("no pending member")
        if member.size > cap:
            raise FormatError(f"{self._label}: member {member.name!r} is {member.size} bytes, "
                              f"over its {cap}-byte cap: refused without reading it")
        return b"".join(self.data())

    def skip(self) -> None:
        """Skip the pending member's data (seeking when the stream allows)."""
        member = self._pending
        if member is None:
            raise RuntimeError("no pending member")
        total = member.size + (-member.size % BLOCK)
        if self._f.seekable():
            end = self._f.seek(0, 2)
            if end < member.offset + total:
                raise FormatError(f"{self._label} ends inside member {member.name!r} "
                                  "(truncated); copy it again")
            self._f.seek(member.offset + total)
            self._pos = member.offset + total
            self._pending = None
        else:
            for _ in self.data():
                pass

    def _check_trailer(self) -> None:
        while True:
            chunk = self._f.read(CHUNK)
            if not chunk:
                return
            if chunk.count(0) != len(chunk):
                raise FormatError(f"{self._label}: data after the end of the archive (byte "
                                  f"{self._pos}): something was appended; refused")
            self._pos += len(chunk)
