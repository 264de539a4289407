"""The strict ustar reader against hostile archives made by real tar writers."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from bundle import FormatError, UnsafeMember
from bundle._tar import TarReader, check_member_name, end_of_archive, member_header, padding


def _read_all(data: bytes) -> list[tuple[str, bytes]]:
    reader = TarReader(io.BytesIO(data), label="t")
    out = []
    while (h := reader.next_member()) is not None:
        out.append((h.name, b"".join(reader.data())))
    return out


def _ours(*members: tuple[str, bytes]) -> bytes:
    return b"".join(member_header(n, len(d)) + d + padding(len(d)) for n, d in members) \
        + end_of_archive()


def _tarfile(add: object, fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        add(tf)  # type: ignore[operator]
    return buf.getvalue()


def test_round_trip_and_gnu_tar_reads_what_we_write(tmp_path: Path) -> None:
    long_name = "models/" + "d" * 90 + "/" + "f" * 90 + ".bin"
    data = _ours(("a.txt", b"hello"), (long_name, b"x" * 1000), ("empty", b""))
    assert _read_all(data) == [("a.txt", b"hello"), (long_name, b"x" * 1000), ("empty", b"")]
    (tmp_path / "t.tar").write_bytes(data)
    listing = subprocess.run(["tar", "tvf", "t.tar"], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout
    assert long_name in listing and "0/0" in listing
    with tarfile.open(tmp_path / "t.tar") as tf:  # and Python's reader agrees
        assert tf.getnames() == ["a.txt", long_name, "empty"]


def test_sizes_of_8_gib_and_more_use_base256_that_python_reads() -> None:
    header = member_header("big", 9 * 2**30)
    info = tarfile.TarInfo.frombuf(header, "utf-8", "strict")
    assert info.size == 9 * 2**30
    reader = TarReader(io.BytesIO(header + b"only a little data"), label="t")
    member = reader.next_member()
    assert member is not None and member.size == 9 * 2**30
    with pytest.raises(FormatError, match="truncated"):
        for _ in reader.data():
            pass


@pytest.mark.parametrize("kind,adder", [
    ("symbolic link", lambda tf: tf.addfile(_info("evil", tarfile.SYMTYPE, "/etc/passwd"))),
    ("hard link", lambda tf: tf.addfile(_info("evil", tarfile.LNKTYPE, "manifest.json"))),
    ("character device", lambda tf: tf.addfile(_info("dev", tarfile.CHRTYPE))),
    ("block device", lambda tf: tf.addfile(_info("dev", tarfile.BLKTYPE))),
    ("directory", lambda tf: tf.addfile(_info("dir", tarfile.DIRTYPE))),
    ("FIFO", lambda tf: tf.addfile(_info("fifo", tarfile.FIFOTYPE))),
])
def test_links_devices_and_directories_are_refused_by_kind(kind: str, adder: object) -> None:
    with pytest.raises(UnsafeMember, match=kind):
        _read_all(_tarfile(adder))


def _info(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def test_pax_and_gnu_extension_headers_are_refused() -> None:
    def add_long(tf: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("x" * 300)
        tf.addfile(info, io.BytesIO(b""))
    with pytest.raises(UnsafeMember, match="pax extended header"):
        _read_all(_tarfile(add_long, tarfile.PAX_FORMAT))
    with pytest.raises((UnsafeMember, FormatError)):
        _read_all(_tarfile(add_long, tarfile.GNU_FORMAT))


@pytest.mark.parametrize("name", [
    "../evil", "a/../../evil", "/etc/passwd", "a//b", "./a", "a/./b", "a\\..\\b", "",
    "a\0b", "dir/", "ünïcode", "sp ace", "x" * 300, "a/..", "..",
])
def test_zip_slip_and_odd_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafeMember):
        check_member_name(name)


def test_traversal_name_inside_a_real_tar_is_refused() -> None:
    def add(tf: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("../../etc/cron.d/evil")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"bad"))
    with pytest.raises(UnsafeMember, match="traversal"):
        _read_all(_tarfile(add))


def test_bad_checksum_truncation_and_appended_data_are_named() -> None:
    data = bytearray(_ours(("a", b"hello" * 200), ("b", b"x")))
    bad = bytearray(data)
    bad[1536 + 5] ^= 1  # inside the second header's name
    with pytest.raises(FormatError, match="bad checksum"):
        _read_all(bytes(bad))
    for cut in (100, 512, 700, len(data) - 1024, len(data) - 10):
        with pytest.raises(FormatError, match="ends|truncated|early"):
            _read_all(bytes(data[:cut]))
    with pytest.raises(FormatError, match="appended"):
        _read_all(bytes(data) + b"trailing junk")
    assert _read_all(bytes(data) + bytes(10240)) == [("a", b"hello" * 200), ("b", b"x")]
    nonzero_pad = bytearray(data)
    nonzero_pad[512 + 1000 + 3] = 7
    with pytest.raises(FormatError, match="padding"):
        _read_all(bytes(nonzero_pad))


@pytest.mark.parametrize("field, value, says", [
    (slice(257, 265), b"ustar  \0", "not a POSIX ustar"),  # GNU's magic
    (slice(124, 136), b"99999999999\0", "not octal"),  # a size in digits past 7
])
def test_gnu_format_headers_and_non_octal_sizes_are_refused(field: slice, value: bytes,
                                                            says: str) -> None:
    header = bytearray(member_header("a", 1))
    header[field] = value
    header[148:156] = b" " * 8
    header[148:156] = format(sum(header), "06o").encode() + b"\0 "
    with pytest.raises(FormatError, match=says):
        _read_all(bytes(header) + bytes(512) + end_of_archive())
