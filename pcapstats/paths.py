"""Every path a person hands pcapstats, checked before it is read or written.

A capture, a sidecar, a study file, a matrix spec, a client's printed report: each is read
only when it is a regular file that can be read (:func:`readable`); a FIFO would block the
read forever, a device (``/dev/zero``) never ends, a directory or a socket is no file at all.
A side file is read whole only up to :data:`SIDE_FILE_BYTES` (:func:`read_side_file`): a
sidecar or a study file is a few kB, so anything past a few MB is not one.  An output is
checked before any work (:func:`writable`): its name fits the file system, its directory is
there and writable with room left, and it is a regular file (or a directory, where a
directory is asked for), not a device or a pipe.  Each refusal is one ``what (where). What to
do`` line: the CLI's exit status 2.

The checks are made on the path's own inode, opened without blocking (``O_NONBLOCK``) and
checked again by ``fstat``: a FIFO swapped in after the check still cannot hang the read.
"""

from __future__ import annotations

import os
import re
import stat

from .errors import UsageError, shown

SIDE_FILE_BYTES = 4 << 20      # a side file read whole: sidecars and study files are a few kB
MIN_FREE_BYTES = 64 << 10      # an output's file system must have at least this much room
NAME_MAX = 255                 # bytes in one file name (Linux, macOS, most file systems)
PATH_MAX = 4096                # bytes in a whole path, as the kernel takes it

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    """What a file is, from its stat mode: "a regular file", "a FIFO (named pipe)", ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def text(path) -> str:
    """A path as str (bytes from the file system decoded as Python does: surrogateescape)."""
    path = os.fspath(path)
    return os.fsdecode(path) if isinstance(path, bytes) else path


def check_name(path, what: str, error=UsageError) -> str:
    """The path as str, refused in one line when no file system could hold it: empty, a NUL
    byte, a name over NAME_MAX bytes, a path over PATH_MAX."""
    path = text(path)
    if path == "":
        raise error(f"an empty {what} name", hint=f"give the {what}'s path")
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise error(f"a {what} name with a NUL byte", path=path,
                    hint="no file system allows one; check how the name was made")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        raise error(f"{what} name too long: {len(longest)} bytes, where file systems allow "
                    f"{NAME_MAX}", path=_cut(path),
                    hint="use a shorter name (bytes count: é is 2, 日 is 3, an emoji 4)")
    if len(raw) > PATH_MAX:
        raise error(f"{what} path too long: {len(raw)} bytes, where the system allows "
                    f"{PATH_MAX}", path=_cut(path), hint="use a shorter path")
    return path


def readable(path, what: str = "file", error=UsageError) -> str:
    """The path as str when it is a regular file this process can read; else ``error``, one
    line saying what the path is instead (no such file, a FIFO, a device, a directory ...)."""
    path = check_name(path, what, error)
    fd = open_readable(path, what, error)
    os.close(fd)
    return path


def open_readable(path, what: str = "file", error=UsageError) -> int:
    """A file descriptor (O_RDONLY, blocking again) of the regular file at ``path``, opened
    without ever blocking on it; ``error`` in one line otherwise."""
    path = check_name(path, what, error)
    try:
        st = os.stat(path)
    except OSError as e:
        raise _not_there(e, path, what, error) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(st.st_mode, path, what, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise _not_there(e, path, what, error) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):          # swapped for something else since the stat
        os.close(fd)
        raise _not_regular(mode, path, what, error)
    os.set_blocking(fd, True)
    return fd


def read_side_file(path, what: str, error=UsageError, limit: int = SIDE_FILE_BYTES, *,
                   strict: bool = True) -> str:
    """A side file's text (a sidecar, a study file, a spec): a regular readable file of at
    most ``limit`` bytes of UTF-8; ``error`` in one line otherwise, naming the line of a byte
    that is not UTF-8 (``strict=False``: such a byte read as U+FFFD, for a program's printed
    output saved as it came)."""
    fd = open_readable(path, what, error)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise error(f"{what} larger than {limit >> 20} MiB, where one is a few kB",
                    path=path, hint=f"is this the {what}? pcapstats reads at most "
                                           f"{limit >> 20} MiB of one")
    if not strict:
        return data.decode("utf-8-sig", errors="replace")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{what} is not UTF-8 text: byte 0x{data[e.start]:02x} at line {line}",
                    path=path, hint=f"save the {what} as UTF-8 text") from None


def line_of(text: str, key: str) -> int | str:
    """The line of a side file's text where ``key`` is first given (``"key":`` in JSON,
    ``key =`` in TOML, a CSV header's column): what an error about that field names; "?"
    when it is not found as written."""
    pattern = re.compile(rf'^[ \t]*(?:"{re.escape(key)}"[ \t]*:|{re.escape(key)}[ \t]*=|'
                         rf'\[+[ \t]*{re.escape(key)}[ \t]*\]+)|"{re.escape(key)}"[ \t]*:',
                         re.M)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else "?"


def writable(path, what: str = "output", *, directory: bool = False,
             error=UsageError) -> str:
    """The path as str when an output can be written there: its name fits, it is a regular
    file or nothing yet (``directory``: a directory or nothing yet, made with its parents),
    its directory (for ``directory``, the nearest one that exists) is there, writable, with
    room left.  ``error`` in one line otherwise, before any work is done."""
    path = check_name(path, what, error)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise error(f"cannot write the {what}: a part of its path is a file, not a directory",
                    path=path, hint="check the path") from None
    except OSError as e:
        raise _not_there(e, path, what, error) from None
    if st is not None:
        if directory and not stat.S_ISDIR(st.st_mode):
            raise error(f"cannot write the {what}: it is {kind(st.st_mode)}, not a directory",
                        path=path, hint="name a directory (it is made if it is not there)")
        if not directory and not stat.S_ISREG(st.st_mode):
            hint = (f"name a file inside it, e.g. {shown(os.path.join(path, 'out'))}"
                    if stat.S_ISDIR(st.st_mode) else
                    "name a regular file: pcapstats does not write into devices or pipes")
            raise error(f"cannot write the {what}: it is {kind(st.st_mode)}, not a file",
                        path=path, hint=hint)
    folder = os.path.dirname(os.path.abspath(path))
    if directory and st is None:
        while not os.path.exists(folder) and os.path.dirname(folder) != folder:
            folder = os.path.dirname(folder)
    elif directory:
        folder = os.path.abspath(path)
    if not os.path.isdir(folder):
        there = "not a directory" if os.path.exists(folder) else "no such directory"
        raise error(f"cannot write the {what}: {there} {shown(folder)}", path=path,
                    hint=f"make it first (mkdir -p {shown(folder)})"
                    if there == "no such directory" else "check the path")
    if not os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in
                     os.supports_effective_ids):
        ro = _read_only(folder)
        raise error(f"cannot write the {what}: {shown(folder)} is "
                    + ("on a read-only file system" if ro else "not writable"),
                    path=path, hint="write it somewhere else" if ro else
                    "write it somewhere else, or check the directory's permissions")
    try:
        fs = os.statvfs(folder)
    except OSError:
        return path
    free = fs.f_bavail * fs.f_frsize
    if free < MIN_FREE_BYTES:
        raise error(f"cannot write the {what}: no space left on the file system of "
                    f"{shown(folder)} ({free // 1024} KiB free)", path=path,
                    hint="free some space or write it somewhere else")
    return path


def _read_only(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _not_there(e: OSError, path: str, what: str, error) -> Exception:
    import errno
    if e.errno == errno.ENOENT:
        return error(f"no such {what}", path=path,
                     hint="check the path and the working directory")
    if e.errno == errno.ENOTDIR:
        return error(f"no such {what}: a part of its path is a file, not a directory",
                     path=path, hint="check the path")
    if e.errno in (errno.EACCES, errno.EPERM):
        return error(f"cannot read the {what}: permission denied", path=path,
                     hint="check its permissions and its directories'")
    if e.errno == errno.ENAMETOOLONG:
        return error(f"{what} name too long for this file system", path=_cut(path),
                     hint="use a shorter name")
    return error(f"cannot open the {what}: {e.strerror}", path=path, hint="check the path")


def _not_regular(mode: int, path: str, what: str, error) -> Exception:
    is_a = kind(mode)
    if stat.S_ISDIR(mode):
        hint = (f"name the files inside it, e.g. {shown(os.path.join(path, '*.pcap'))}"
                if what == "capture" else f"name the {what} inside it")
    elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        hint = "save what it carries to a file first: pcapstats reads files, not streams"
    else:
        hint = "name a regular file: pcapstats does not read devices"
    return error(f"{what} is {is_a}, not a regular file", path=path, hint=hint)


def _cut(path: str, keep: int = 60) -> str:
    """A very long path shown by its start and end."""
    path = shown(path)
    return path if len(path) <= 2 * keep else f"{path[:keep]}...{path[-keep:]}"
