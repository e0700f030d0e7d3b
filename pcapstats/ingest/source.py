"""Open a capture path as one read-only byte array, without holding the file in memory twice.

Plain files are memory-mapped.  Gzip files are inflated, in chunks, into an unlinked temporary
file that is then mapped, so a big .pcap.gz costs disk, not memory.  The caller closes the
returned ``Source`` (or uses it as a context manager) when the packet table is built.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np

from .. import paths
from ..errors import CaptureFormatError, CaptureOpenError, CorruptCaptureError, TruncatedCaptureWarning

GZIP_MAGIC = b"\x1f\x8b"
_POPULATE = [getattr(mmap, "MADV_POPULATE_READ", 22)]   # Linux's value; emptied if refused
_CHUNK = 4 * 1024 * 1024


@dataclass
class Source:
    path: str
    buf: np.ndarray               # uint8 view of the mapped bytes
    file_size: int                # bytes on disk
    compressed: bool
    _closers: list = field(default_factory=list, repr=False)
    _map: mmap.mmap | None = field(default=None, repr=False)
    _released: int = field(default=0, repr=False)
    _fd: int | None = field(default=None, repr=False)   # a gzip file's inflated bytes

    def release(self, upto: int) -> None:
        """Drop the mapped pages before file offset ``upto`` from memory (they were read)."""
        if upto > self._released:
            self.drop(self._released, upto)
            self._released = max(self._released, (upto // mmap.PAGESIZE) * mmap.PAGESIZE)

    def populate(self, start: int, end: int) -> None:
        """Map the pages of [start, end) in one call before they are read: a page fault each
        costs more than the kernel mapping them together (MADV_POPULATE_READ, Linux 5.14;
        elsewhere nothing)."""
        mm, page = self._map, mmap.PAGESIZE
        start = (start // page) * page
        if mm is None or not _POPULATE or end <= start:
            return
        try:
            mm.madvise(_POPULATE[0], start, min(end, len(mm)) - start)
        except OSError:                 # an older kernel: fault the pages in as they are read
            _POPULATE.clear()

    def drop(self, start: int, end: int) -> None:
        """Drop the whole mapped pages within [start, end) from memory; reading them again
        brings them back from the file (or the page cache)."""
        mm, page = self._map, mmap.PAGESIZE
        start, end = -(-start // page) * page, (end // page) * page
        if mm is not None and end > start:
            mm.madvise(mmap.MADV_DONTNEED, start, end - start)

    def records_at(self, offsets: np.ndarray, size: int, chunk: int):
        """The ``size`` bytes at each file offset, ``chunk`` offsets at a time: yields (i,
        records), records[j] (a numpy void; ``.view(np.uint8)`` for its bytes) being those at
        offsets[i + j].  Each chunk's pages are dropped once the caller is done with it:
        touching a mapped page maps the ~64 kB around it, so scattered reads would hold much of
        the file.  Offsets must not be negative; IndexError where the bytes pass the end."""
        view = np.ndarray((max(len(self.buf) - size + 1, 0),), f"V{size}", buffer=self.buf,
                          strides=(1,))               # the bytes from each offset
        for i in range(0, len(offsets), chunk):
            at = offsets[i:i + chunk]
            yield i, view[at]
            self.drop(int(at.min()), int(at.max()) + size)

    def read_at(self, offsets: np.ndarray, size: int) -> np.ndarray:
        """The ``size`` bytes at each of a few file offsets, a row each (uint8), read with
        pread: no page of the file is mapped (``records_at`` maps ~64 kB around each offset,
        and costs ~10x as much a read).  IndexError where the bytes pass the end."""
        fd = self._fd if self.compressed else os.open(self.path, os.O_RDONLY)
        try:
            data = b"".join([os.pread(fd, size, at) for at in np.asarray(offsets).tolist()])
        finally:
            if fd != self._fd:
                os.close(fd)
        if len(data) != size * len(offsets):
            raise IndexError("bytes past the end of the file")
        return np.frombuffer(data, np.uint8).reshape(len(offsets), size)

    def close(self) -> None:
        self.buf = np.empty(0, np.uint8)
        for close in reversed(self._closers):
            try:
                close()
            except BufferError:  # a view of the map is still alive somewhere: the GC unmaps it later
                pass
        self._closers.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_source(path) -> Source:
    """The capture at ``path``, mapped (or inflated, then mapped).  Only a regular file is
    opened, and never in a way that blocks: a FIFO, a device, a socket or a directory given as
    a capture is one CaptureOpenError line (:func:`pcapstats.paths.open_readable`)."""
    path = paths.text(path)
    f = os.fdopen(paths.open_readable(path, "capture", CaptureOpenError), "rb")
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise CaptureFormatError("empty file (0 bytes), no capture header", path=path,
                                     hint="was the capture stopped before it wrote anything?")
        head = f.read(2)
        f.seek(0)
        if head == GZIP_MAGIC:
            return _inflate(f, path, size)
        mm = _map(f.fileno())
    buf = np.frombuffer(mm, dtype=np.uint8)
    return Source(path, buf, size, False, [mm.close], mm)


def _map(fd: int) -> mmap.mmap:
    """Read-only map, read once in order; the reader releases pages window by window."""
    mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    mm.madvise(mmap.MADV_SEQUENTIAL)
    return mm


def _inflate(f, path: str, size: int) -> Source:
    """Inflate all gzip members into an unlinked temp file; a cut stream keeps what it gave."""
    tmp = tempfile.TemporaryFile(prefix="pcapstats-", suffix=".inflated")
    try:
        d = zlib.decompressobj(wbits=31)
        member_open = False   # fed bytes to a member that has not ended yet
        consumed = 0          # compressed bytes handled before the current chunk
        while chunk := f.read(_CHUNK):
            data = chunk
            while data:
                member_open = True
                try:
                    tmp.write(d.decompress(data))
                except zlib.error as e:
                    raise CorruptCaptureError(
                        f"corrupt gzip data ({e})", path=path, offset=consumed,
                        hint="the compressed file is damaged; `gzip -t` tells where") from None
                data = b""
                if d.eof:  # one member ended: another may follow, or trailing junk (ignored, as gzip does)
                    member_open = False
                    rest = d.unused_data
                    d = zlib.decompressobj(wbits=31)
                    if rest[:2] == GZIP_MAGIC:
                        data = rest
            consumed += len(chunk)
        if member_open:
            tmp.write(d.flush())
            warnings.warn(TruncatedCaptureWarning(
                "gzip stream ends early; reading what could be inflated", path=path, offset=size,
                hint="the compressed file was cut while being copied or written"))
        tmp.flush()
        if tmp.tell() == 0:
            raise CaptureFormatError("gzip file holds no data", path=path,
                                     hint="it is not a compressed capture")
        mm = _map(tmp.fileno())
    except BaseException:
        tmp.close()
        raise
    buf = np.frombuffer(mm, dtype=np.uint8)
    return Source(path, buf, size, True, [tmp.close, mm.close], mm, _fd=tmp.fileno())
