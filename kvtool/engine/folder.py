"""T3 (and T4 as ``file://``): ``FolderMedium``, one file per chunk in a folder on a shared
file system, written whole or not at all, read back checked, O_DIRECT where the file system
takes it. ``mediums`` says what every medium promises."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kvtool.engine.chunkfile import (
    ALIGN,
    HEADER_BYTES,
    CorruptChunk,
    aligned,
    decode,
    header,
    relative_path,
    stored_length,
)
from kvtool.engine.medium import DEFAULT_IO_THREADS, MediumError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class _DirectRefused(Exception):
    """This file system refused an O_DIRECT open or read: read the file buffered."""


class FolderMedium:
    """Chunk files in ``root/chunks/ab/cd/<key>.kv``; corrupt ones go to ``root/quarantine``."""

    def __init__(self, tier: str, root: Path, *, io_threads: int = DEFAULT_IO_THREADS) -> None:
        self.tier = tier
        self.root = root
        self.io_threads = io_threads
        self.direct: bool | None = None  # found out on the first write
        self.quarantined = 0
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()  # each I/O thread's reusable aligned buffer

    @property
    def description(self) -> str:
        mode = {None: "O_DIRECT untried", True: "O_DIRECT", False: "buffered (no O_DIRECT)"}
        return f"files under {self.root} ({mode[self.direct]}, {self.io_threads} I/O threads)"

    def path(self, key: str) -> Path:
        """Where ``key`` lives; only ever inside ``root`` (keys are hex digests)."""
        return self.root / "chunks" / relative_path(key)

    def _buffer(self, size: int) -> mmap.mmap:
        """This thread's page-aligned I/O buffer, at least ``size`` bytes: reused, so its pages
        are faulted in once rather than on every chunk."""
        buffer: mmap.mmap | None = getattr(self._local, "buffer", None)
        if buffer is None or len(buffer) < size:
            if buffer is not None:
                buffer.close()
            buffer = self._local.buffer = mmap.mmap(-1, max(aligned(size), ALIGN))
        return buffer

    def _folder(self, parts: Sequence[str], *, create: bool) -> int:
        """A descriptor of ``root/parts...``, walked one name at a time without following a
        link below ``root`` (a link there could send chunks outside it). FileNotFoundError
        when a part is missing and ``create`` is False; MediumError for a link or a file where
        a folder should be."""
        if create:
            try:  # its own folder only, never the folders above it: where those are gone (the
                # file system unmounted, the run's folder removed) a chunk must not land on
                # whatever disk now holds the path
                self.root.mkdir(exist_ok=True)
            except FileNotFoundError:
                raise MediumError(
                    f"{self.tier}: {self.root.parent} is gone (unmounted or removed):"
                    " not made again"
                ) from None
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError):
                raise
            raise MediumError(
                f"{self.tier}: {self.root}/{'/'.join(parts)} is not a folder of kvtool's (a link"
                f" or a file there?): {exc.strerror or exc}"
            ) from None
        return fd

    @staticmethod
    def _parts(key: str) -> tuple[tuple[str, ...], str]:
        folder_a, folder_b, name = relative_path(key).split("/")
        return ("chunks", folder_a, folder_b), name

    def put(self, key: str, data: bytes | memoryview) -> None:
        parts, name = self._parts(key)
        head = header(key, data)
        end = HEADER_BYTES + len(data)
        size = HEADER_BYTES + aligned(len(data))
        buffer = self._buffer(size)
        buffer[:HEADER_BYTES] = head
        buffer[HEADER_BYTES:end] = data
        buffer[end:size] = bytes(size - end)  # the padding is zero, as readers check
        tmp = f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            folder = self._folder(parts, create=True)
        except OSError as exc:
            raise MediumError(f"{self.tier} write of {name}: {exc.strerror or exc}") from None
        try:
            self._write(folder, tmp, buffer, size)
            self._rename(folder, tmp, name)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise MediumError(
                f"{self.tier} write to {self.path(key)}: {exc.strerror or exc}"
            ) from None
        finally:
            os.close(folder)

    def _write(self, folder: int, tmp: str, buffer: mmap.mmap, size: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = None
        if self.direct is not False:
            try:
                fd = os.open(tmp, flags | os.O_DIRECT, 0o644, dir_fd=folder)
                self.direct = True
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                # some file systems create the file, then refuse O_DIRECT
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                self.direct = False
        if fd is None:
            fd = os.open(tmp, flags, 0o644, dir_fd=folder)
        try:
            written = 0
            while written < size:  # views are temporaries: none outlives a failed call
                written += os.write(fd, memoryview(buffer)[written:size])
            self._sync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _sync(fd: int) -> None:
        """The file's bytes on stable storage before it gets its name."""
        os.fsync(fd)

    @staticmethod
    def _rename(folder: int, tmp: str, name: str) -> None:
        """Atomic: readers see the old file, the new, or none; then the folder is flushed so
        the name survives a crash (the copy above is deleted once this returns). A file
        system that cannot flush a folder (EINVAL) has made the rename durable itself."""
        os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        try:
            os.fsync(folder)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise

    def get(self, key: str) -> bytes | None:
        """The chunk's checked bytes, or None when it is not there. Anything at its name that
        is not a valid chunk of this key (damaged, truncated, extended, a link, a folder) is
        moved to ``quarantine/`` and raises CorruptChunk; the read is bounded by the header's
        length, so a huge file is judged from its first 4 KiB."""
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except FileNotFoundError:
            return None
        try:
            return self._get(key, folder, name)
        finally:
            os.close(folder)

    def _get(self, key: str, folder: int, name: str) -> bytes | None:
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MediumError(f"{self.tier} read of {name}: {exc.strerror or exc}") from None
        ident = (found.st_dev, found.st_ino)
        if not stat.S_ISREG(found.st_mode):
            self._quarantine(folder, name, ident)
            raise CorruptChunk("not a regular file (a link or a folder at the chunk's name)")
        corrupt = ""
        try:
            data = self._read(key, folder, name, ident, direct=bool(self.direct))
        except _DirectRefused:
            data = self._read(key, folder, name, ident, direct=False)
        except CorruptChunk as exc:
            corrupt = str(exc)
        except FileNotFoundError:
            return None  # removed since the stat: absent
        except OSError as exc:
            raise MediumError(f"{self.tier} read of {name}: {exc.strerror or exc}") from None
        if corrupt:
            self._quarantine(folder, name, ident)
            raise CorruptChunk(corrupt)
        return data

    def _read(
        self, key: str, folder: int, name: str, ident: tuple[int, int], *, direct: bool
    ) -> bytes | None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECT if direct else 0)
        try:
            fd = os.open(name, flags, dir_fd=folder)
        except OSError as exc:
            if direct and exc.errno == errno.EINVAL:
                raise _DirectRefused from None
            raise
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ident:
                raise FileNotFoundError(name)  # replaced since the stat: read it next time
            size = st.st_size
            if size < HEADER_BYTES:
                raise CorruptChunk(f"{size} bytes: shorter than the header")
            buffer = self._buffer(HEADER_BYTES)
            self._fill(fd, buffer, 0, HEADER_BYTES, direct)
            whole = stored_length(key, memoryview(buffer)[:HEADER_BYTES])
            if size != aligned(whole):
                raise CorruptChunk(
                    f"{size:,} bytes on disk; the header says {aligned(whole):,}"
                    " (truncated or extended)"
                )
            buffer = self._buffer(size)
            self._fill(fd, buffer, 0, size, direct)
            try:
                return bytes(decode(key, memoryview(buffer)[:size]))  # checked, one copy
            except CorruptChunk as exc:
                raise CorruptChunk(str(exc)) from None  # no view of the buffer outlives this
        finally:
            os.close(fd)

    @staticmethod
    def _fill(fd: int, buffer: mmap.mmap, start: int, end: int, direct: bool) -> None:
        """Read ``[start, end)`` of the file into ``buffer``; a short file is CorruptChunk."""
        got = start
        while got < end:
            try:
                n = os.preadv(fd, [memoryview(buffer)[got:end]], got)
            except OSError as exc:
                if direct and exc.errno == errno.EINVAL:
                    raise _DirectRefused from None
                raise
            if n == 0:
                raise CorruptChunk(f"ends at {got:,} bytes of {end:,}")
            got += n

    def _quarantine(self, folder: int, name: str, ident: tuple[int, int]) -> None:
        """Move aside what was judged, and only that: another process may have renamed a good
        chunk into place since (its inode differs), and that one stays."""
        try:
            now = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return
        if (now.st_dev, now.st_ino) != ident:
            return
        try:
            target = self._folder(("quarantine",), create=True)
        except (OSError, MediumError):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
            return
        try:
            os.rename(name, f"{name}.{time.time_ns()}", src_dir_fd=folder, dst_dir_fd=target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
        finally:
            os.close(target)
        self.quarantined += 1

    def delete(self, key: str) -> None:
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except (FileNotFoundError, MediumError):
            return
        try:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
        finally:
            os.close(folder)

    def contains(self, key: str) -> bool:
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except (FileNotFoundError, MediumError):
            return False
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(folder)
        return stat.S_ISREG(found.st_mode)

    def put_many(self, items: Sequence[tuple[str, bytes | memoryview]]) -> list[Exception | None]:
        """Write chunks on the I/O threads; one outcome per item (None: written)."""
        return self._map(lambda item: self.put(*item), items)

    def get_many(self, keys: Sequence[str]) -> list[bytes | Exception | None]:
        """Read chunks on the I/O threads; bytes, None (absent) or the exception per key."""
        return self._map(self.get, keys)

    def _map(self, call: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.io_threads, thread_name_prefix="kvtool-io")

        def safe(item: Any) -> Any:
            try:
                return call(item)
            except (MediumError, CorruptChunk, ValueError) as exc:
                return exc

        return list(self._pool.map(safe, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
