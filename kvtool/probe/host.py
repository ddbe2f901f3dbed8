"""The one door to the machine: every file, command, probe I/O, metadata and AWS call the doctor
makes goes through a ``Host``, and comes back as plain data.

Each observation has a **key** (``lfs_df``, ``lnet_before``, ``aws_fsx``...) so that three hosts
can stand behind the same interface:

* ``LocalHost`` reads this machine: /proc, subprocesses (with timeouts), an O_DIRECT probe file
  it always removes, IMDSv2 with a short timeout, boto3 (imported only here).
* ``SnapshotHost`` reads a folder written by ``--capture`` (or assembled by hand, see
  docs/doctor.md): ``<key>.txt`` for text, ``<key>.json`` for structured results. A key with no
  file was not captured, and the checks that need it say SKIP.
* ``CapturingHost`` wraps a host and writes every observation into such a folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from kvtool.errors import InputError
from kvtool.files import write_text
from kvtool.scratch import signals_held


class CommandResult(NamedTuple):
    """A finished command: ``returncode`` 127 when the program is not installed."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """The command ran and succeeded."""
        return self.returncode == 0


NOT_INSTALLED = 127


class Host(Protocol):
    """What the doctor may ask of a machine. Every method returns plain data and never raises
    for a missing file, command or service: absence is part of the answer."""

    def read(self, key: str, path: str) -> str | None:
        """The text of ``path``, or None when it is missing or unreadable."""
        ...

    def run(self, key: str, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        """Run ``argv`` (no shell) with a timeout (the host's default when None)."""
        ...

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        """``exists``, ``is_dir``, ``writable``, ``realpath``, ``entries`` (files directly in
        the folder, counted up to a limit), ``files``/``files_free`` (statvfs inodes) and
        ``free_bytes``."""
        ...

    def odirect_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        """Write then read ``size_mib`` MiB with O_DIRECT in a scratch file in ``directory``,
        always removed: ``ok``, ``errno``, ``error``, ``write_s``, ``read_s``, ``bytes``."""
        ...

    def cufile_read_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        """Read a scratch file of ``size_mib`` MiB with cuFile (``gdsio -x 0``) on GPU 0 and
        return the nvidia-fs statistics before and after, so the doctor can see whether the
        read went direct. ``ran`` False (with ``reason``) when no GPU or no gdsio."""
        ...

    def imds(self, key: str, path: str) -> str | None:
        """An EC2 instance-metadata value (IMDSv2), or None off EC2 or when disabled."""
        ...

    def aws(self, key: str, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """A boto3 call's response, or ``{"error": "..."}`` (no credentials, unreachable)."""
        ...

    def computed(self, key: str, produce: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """A fact that takes work on the machine itself (a folder's walk): ``produce()`` on a
        live host, the recorded answer of a snapshot (None when it was not captured)."""
        ...


ENTRY_COUNT_LIMIT = 200_000
SCRATCH_PREFIX = ".kvtool-doctor-probe-"


def _stop(process: subprocess.Popen[str]) -> None:
    """Ask a child to stop (SIGINT: fio then ends its job processes and closes its files),
    and kill it when it has not within 10 s."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


class _Late(Exception):
    """A whole-call deadline passed while a child still wrote (the caller stops it)."""


def _chunks(
    process: subprocess.Popen[str], deadline: float, size: int
) -> Iterator[tuple[bool, bytes]]:
    """What the child writes, as it comes: (from stdout?, bytes), until both its pipes close;
    ``_Late`` past ``deadline`` (``time.monotonic``). ``stream`` and ``records`` read through it."""
    import selectors

    assert process.stdout is not None
    assert process.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, True)
        selector.register(process.stderr, selectors.EVENT_READ, False)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Late
            for ready, _ in selector.select(timeout=min(left, 1.0)):
                chunk = os.read(ready.fd, size)
                if chunk:
                    yield ready.data, chunk
                else:
                    selector.unregister(ready.fileobj)


def _start(
    argv: Sequence[str], *, pass_fds: Sequence[int] = (), errors: str = "replace"
) -> subprocess.Popen[str] | CommandResult:
    """``argv`` started (no shell; output read as text, bytes that are not UTF-8 replaced, or
    kept as ``surrogateescape`` gives them), or why it could not be: 127 when the program is not
    installed, 126 when it cannot run. ``pass_fds`` stay open in the child under their numbers
    (``lfs`` reaches a file through ``/proc/self/fd/N/name``: from a folder kvtool holds open)."""
    try:
        return subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            errors=errors, pass_fds=tuple(pass_fds),
        )  # fmt: skip
    except FileNotFoundError:
        return CommandResult(NOT_INSTALLED, "", f"{argv[0]}: command not found")
    except OSError as exc:
        return CommandResult(126, "", f"{argv[0]}: {exc.strerror or exc}")


class Spawned:
    """A command running beside the caller's own work (``LocalHost.spawn``), or the one
    ``LocalHost.run`` waits for: ``finish`` waits within a deadline, ``stop`` ends it (SIGINT,
    then a kill after 10 s)."""

    def __init__(
        self, argv: Sequence[str], *, pass_fds: Sequence[int] = (), errors: str = "replace"
    ) -> None:
        self.argv = list(argv)
        started = _start(self.argv, pass_fds=pass_fds, errors=errors)
        self.process = None if isinstance(started, CommandResult) else started
        self.failed = started if isinstance(started, CommandResult) else None

    def finish(self, timeout_s: float) -> CommandResult:
        """Its output once it ends; 124 (and stopped) when it runs past ``timeout_s``."""
        if self.process is None:
            assert self.failed is not None
            return self.failed
        try:
            out, err = self.process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(self.process)
            return CommandResult(124, "", f"{self.argv[0]}: timed out after {timeout_s:g} s")
        except BaseException:  # Ctrl-C or SIGTERM: stop the child before anything cleans up
            _stop(self.process)
            raise
        return CommandResult(self.process.returncode, out, err)

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)


class LocalHost:
    """This machine. ``timeout_s`` bounds each command; ``aws_timeout_s`` each AWS or IMDS
    call, so a node without network answers SKIP in seconds."""

    def __init__(self, *, timeout_s: float = 20.0, aws_timeout_s: float = 3.0) -> None:
        self.timeout_s = timeout_s
        self.aws_timeout_s = aws_timeout_s
        self._imds_token: str | None = None

    def read(self, key: str, path: str) -> str | None:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def run(self, key: str, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        return Spawned(argv).finish(timeout_s or self.timeout_s)

    def run_in_folders(
        self, key: str, argv: Sequence[str], folders: Sequence[int], timeout_s: float | None = None
    ) -> CommandResult:
        """``run``, with the open folder handles ``folders`` passed to the command under their
        numbers (it names a file ``/proc/self/fd/N/name``: looked up in that very folder, never
        through a path that could be swapped for a link), and names in its output kept byte
        for byte (``surrogateescape``)."""
        spawned = Spawned(argv, pass_fds=folders, errors="surrogateescape")
        return spawned.finish(timeout_s or self.timeout_s)

    def spawn(self, key: str, argv: Sequence[str]) -> Spawned:
        """Start ``argv`` (no shell) and return at once; the caller finishes or stops it."""
        return Spawned(argv)

    def stream(
        self,
        key: str,
        argv: Sequence[str],
        on_stdout: Callable[[str], None],
        timeout_s: float | None = None,
    ) -> CommandResult:
        """``run``, with ``on_stdout`` called with all of stdout so far each time more comes
        (a live status line reads it), within the same whole-call deadline."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        process = _start(argv)
        if isinstance(process, CommandResult):
            return process
        out: list[str] = []
        err: list[str] = []
        try:
            for is_out, chunk in _chunks(process, deadline, 65536):
                (out if is_out else err).append(chunk.decode("utf-8", errors="replace"))
                if is_out:
                    on_stdout("".join(out))
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except (_Late, subprocess.TimeoutExpired):
            _stop(process)
            return CommandResult(124, "", f"{argv[0]}: timed out")
        except BaseException:  # Ctrl-C or SIGTERM: stop the child before anything cleans up
            _stop(process)
            raise
        return CommandResult(process.returncode, "".join(out), "".join(err))

    def records(
        self,
        key: str,
        argv: Sequence[str],
        folders: Sequence[int] = (),
        *,
        sep: bytes = b"\0",
        timeout_s: float | None = None,
    ) -> Generator[bytes, None, CommandResult]:
        """Run ``argv`` (with ``folders`` as ``run_in_folders`` passes them) and yield its
        stdout split at ``sep``, as it comes: a listing of millions of names is never held
        whole. The generator's return value is the finished command (stdout left empty)."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        process = _start(argv, pass_fds=folders)
        if isinstance(process, CommandResult):
            return process
        err: list[bytes] = []
        rest = b""
        try:
            for is_out, chunk in _chunks(process, deadline, 1 << 20):
                if not is_out:
                    err.append(chunk[: 65536 - sum(map(len, err))])
                    continue
                *whole, rest = (rest + chunk).split(sep)
                yield from whole
            if rest:
                yield rest
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except (_Late, subprocess.TimeoutExpired):
            _stop(process)
            return CommandResult(124, "", f"{argv[0]}: timed out")
        except BaseException:  # Ctrl-C, or a consumer that stops early: stop the child
            _stop(process)
            raise
        return CommandResult(process.returncode, "", b"".join(err).decode("utf-8", "replace"))

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        target = Path(path)
        info: dict[str, Any] = {
            "path": path,
            "exists": target.exists(),
            "is_dir": target.is_dir(),
            "writable": os.access(path, os.W_OK | os.X_OK) if target.is_dir() else False,
            "realpath": os.path.realpath(path),
        }
        if info["is_dir"]:
            count = 0
            try:
                with os.scandir(path) as entries:
                    for _ in entries:
                        count += 1
                        if count >= ENTRY_COUNT_LIMIT:
                            break
            except OSError:
                count = -1
            info["entries"] = count
            try:
                st = os.statvfs(path)
                info["files"], info["files_free"] = st.f_files, st.f_ffree
                info["free_bytes"] = st.f_bavail * st.f_frsize
            except OSError:
                pass
        return info

    def odirect_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        return odirect_probe(directory, size_mib)

    def cufile_read_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        import shutil

        gdsio = shutil.which("gdsio") or next(
            (str(p) for p in sorted(Path("/usr/local").glob("cuda*/gds/tools/gdsio"))), None
        )
        if gdsio is None:
            return {"ran": False, "reason": "gdsio (the GDS tools) is not installed"}
        stats = "/proc/driver/nvidia-fs/stats"
        result: dict[str, Any] = {"ran": False, "nvfs_before": self.read(key, stats)}
        scratch = odirect_probe(directory, size_mib, keep=True)
        try:
            if not scratch.get("ok"):
                result["reason"] = f"could not write the scratch file: {scratch.get('error')}"
                return result
            done = self.run(
                key,
                [
                    gdsio,
                    "-f",
                    scratch["path"],
                    "-d",
                    "0",
                    "-w",
                    "1",
                    "-s",
                    f"{size_mib}M",
                    "-i",
                    "1M",
                    "-x",
                    "0",
                    "-I",
                    "0",
                ],
            )
            result.update(
                ran=done.ok, rc=done.returncode, output=(done.stdout + done.stderr)[-2000:]
            )
            result["nvfs_after"] = self.read(key, stats)
        finally:
            if scratch.get("path"):
                with signals_held():  # a second signal must not leave the probe file
                    Path(scratch["path"]).unlink(missing_ok=True)
        return result

    def imds(self, key: str, path: str) -> str | None:
        import urllib.error
        import urllib.request

        if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
            return None
        base = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254")
        base = base.rstrip("/")
        try:
            if self._imds_token is None:
                request = urllib.request.Request(
                    f"{base}/latest/api/token",
                    method="PUT",
                    headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"},
                )
                with urllib.request.urlopen(request, timeout=self.aws_timeout_s) as response:
                    self._imds_token = response.read().decode()
            request = urllib.request.Request(
                f"{base}/latest/meta-data/{path}",
                headers={"X-aws-ec2-metadata-token": self._imds_token},
            )
            with urllib.request.urlopen(request, timeout=self.aws_timeout_s) as response:
                value: str = response.read().decode().strip()
                return value
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def aws(self, key: str, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            return {"error": "boto3 is not installed (pip install 'kvtool[aws]')"}
        config = Config(
            connect_timeout=self.aws_timeout_s,
            read_timeout=self.aws_timeout_s * 2,
            retries={"total_max_attempts": 1, "mode": "standard"},  # one attempt, no retry
        )
        region = params.pop("_region", None)
        try:
            client = boto3.client(service, region_name=region, config=config)
            response: dict[str, Any] = getattr(client, operation)(**params)
        except ClientError as exc:
            return {"error": str(exc)}
        except BotoCoreError as exc:
            return {"error": type(exc).__name__ + ": " + str(exc)}
        response.pop("ResponseMetadata", None)
        plain: dict[str, Any] = json.loads(json.dumps(response, default=str))
        return plain

    def computed(self, key: str, produce: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        return produce()


def file_ops_probe(directory: str, *, count: int = 2000) -> dict[str, Any]:
    """What an engine pays per chunk file before any byte moves: ``open`` + ``fstat`` +
    ``close`` of the regular files directly in ``directory`` (round robin, at most 1,024 of
    them, ``*.fio`` job files left out), each timed alone, ``count`` times, relative to the
    folder's handle and never through a link. ``ok``, ``files``, ``count``, ``p50_us``,
    ``p99_us``, ``p999_us``, ``ops_per_s``; ``ok`` False with ``error`` when there are none or
    an operation fails."""
    result: dict[str, Any] = {"ok": False, "error": ""}
    try:
        folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        result["error"] = exc.strerror or str(exc)
        return result
    try:
        with os.scandir(folder) as entries:
            names = sorted(
                e.name
                for e in entries
                if e.is_file(follow_symlinks=False) and not e.name.endswith(".fio")
            )
        names = names[:1024]  # fmt: skip
        if not names:
            result["error"] = "no files to open"
            return result
        took = []
        began = time.perf_counter()
        for index in range(count):
            start = time.perf_counter_ns()
            fd = os.open(names[index % len(names)], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
            os.fstat(fd)
            os.close(fd)
            took.append(time.perf_counter_ns() - start)
        elapsed = time.perf_counter() - began
    except OSError as exc:
        result["error"] = exc.strerror or str(exc)
        return result
    finally:
        os.close(folder)
    took.sort()

    def at(q: float) -> float:
        return took[min(len(took) - 1, int(q * len(took)))] / 1e3

    result.update(ok=True, files=len(names), count=count, p50_us=at(0.50), p99_us=at(0.99),
                  p999_us=at(0.999), ops_per_s=count / max(elapsed, 1e-9))  # fmt: skip
    return result


def odirect_probe(directory: str, size_mib: int, *, keep: bool = False) -> dict[str, Any]:
    """Write and read back ``size_mib`` MiB with O_DIRECT through a page-aligned buffer, in a
    scratch file that is removed whatever happens (even when ``open`` creates the file and then
    fails, as ramfs does). Returns plain data for the O_DIRECT and EFA checks. With ``keep``
    a successful file stays for the caller (the cuFile probe), which must remove ``path``."""
    import errno
    import mmap
    import secrets

    path = os.path.join(directory, f"{SCRATCH_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    chunk = 1 << 20
    buffer = mmap.mmap(-1, chunk)  # anonymous maps are page aligned, as O_DIRECT needs
    buffer.write(os.urandom(chunk))
    result: dict[str, Any] = {"ok": False, "errno": None, "error": "", "bytes": 0}
    flags = os.O_CREAT | os.O_RDWR | getattr(os, "O_DIRECT", 0)
    fd = -1
    try:
        if not hasattr(os, "O_DIRECT"):
            result.update(errno=errno.ENOTSUP, error="O_DIRECT is not available on this OS")
            return result
        fd = os.open(path, flags, 0o600)
        start = time.perf_counter()
        for _ in range(size_mib):
            os.write(fd, buffer)
        os.fsync(fd)
        result["write_s"] = time.perf_counter() - start
        os.lseek(fd, 0, os.SEEK_SET)
        start = time.perf_counter()
        for _ in range(size_mib):
            os.readv(fd, [buffer])
        result["read_s"] = time.perf_counter() - start
        result.update(ok=True, bytes=size_mib * chunk)
    except OSError as exc:
        result.update(errno=exc.errno, error=exc.strerror or str(exc))
    finally:
        with signals_held():  # a second signal must not leave the probe file
            if fd >= 0:
                os.close(fd)
            if keep and result["ok"]:
                result["path"] = path
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    result["cleanup_error"] = exc.strerror or str(exc)
            buffer.close()
    return result


class SnapshotHost:
    """A folder of observations (``--snapshot DIR``): text in ``<key>.txt``, structured
    results in ``<key>.json``; a failed command as ``<key>.error.txt`` (first line ``rc=N``,
    then its stderr). Nothing on this machine is read or run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _bytes(self, name: str) -> bytes | None:
        """A recorded file's bytes, None when it was not captured. A snapshot comes from
        elsewhere: a FIFO, a device or a huge file in it is refused (InputError), not read."""
        from kvtool.files import read_bytes

        path = self.folder / name
        if not os.path.lexists(path):
            return None
        return read_bytes(path, what="recorded observation")

    def _text(self, key: str) -> str | None:
        data = self._bytes(f"{key}.txt")
        return None if data is None else data.decode("utf-8", errors="replace")

    def _json(self, key: str) -> dict[str, Any] | None:
        """``<key>.json`` in the shape the live host gives it (``probe.recorded``); InputError
        naming the file and the field for anything else, so no check meets a wrong type."""
        from kvtool.probe.recorded import check_recorded

        data = self._bytes(f"{key}.json")
        if data is None:
            return None
        source = str(self.folder / f"{key}.json")
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise InputError(
                f"{source} is not JSON", "capture the snapshot again with kvtool doctor --capture"
            ) from None
        return check_recorded(key, parsed, source=source)

    def read(self, key: str, path: str) -> str | None:
        return self._text(key)

    def run(self, key: str, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        text = self._text(key)
        if text is not None:
            return CommandResult(0, text, "")
        error = self._text(f"{key}.error")
        if error is not None:
            first, _, rest = error.partition("\n")
            recorded = first[3:].removeprefix("-")
            code = int(first[3:]) if first.startswith("rc=") and recorded.isdigit() else 1
            return CommandResult(code, "", rest)
        return CommandResult(NOT_INSTALLED, "", f"{key} was not captured in the snapshot")

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        return self._json(key) or {"path": path, "captured": False}

    def odirect_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        return self._json(key) or {"captured": False}

    def cufile_read_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        return self._json(key) or {"ran": False, "reason": f"{key} was not captured"}

    def imds(self, key: str, path: str) -> str | None:
        text = self._text(key)
        return text.strip() or None if text else None

    def aws(self, key: str, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self._json(key) or {"error": f"{key} was not captured in the snapshot"}

    def computed(self, key: str, produce: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        return self._json(key)


class CapturingHost:
    """Wraps a host and writes each observation into ``folder`` in ``SnapshotHost``'s layout,
    so ``--snapshot`` can evaluate it later on any machine."""

    def __init__(self, inner: Host, folder: Path) -> None:
        self.inner = inner
        self.folder = folder

    def _put_text(self, key: str, text: str) -> None:
        write_text(self.folder / f"{key}.txt", text)

    def _put_json(self, key: str, data: dict[str, Any]) -> None:
        write_text(self.folder / f"{key}.json", json.dumps(data, indent=1))

    def read(self, key: str, path: str) -> str | None:
        text = self.inner.read(key, path)
        if text is not None:
            self._put_text(key, text)
        return text

    def run(self, key: str, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult:
        result = self.inner.run(key, argv, timeout_s)
        if result.ok:
            self._put_text(key, result.stdout)
        else:
            self._put_text(f"{key}.error", f"rc={result.returncode}\n{result.stderr}")
        return result

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        info = self.inner.path_info(key, path)
        self._put_json(key, info)
        return info

    def odirect_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        result = self.inner.odirect_probe(key, directory, size_mib)
        self._put_json(key, result)
        return result

    def cufile_read_probe(self, key: str, directory: str, size_mib: int) -> dict[str, Any]:
        result = self.inner.cufile_read_probe(key, directory, size_mib)
        self._put_json(key, result)
        return result

    def imds(self, key: str, path: str) -> str | None:
        value = self.inner.imds(key, path)
        if value is not None:
            self._put_text(key, value + "\n")
        return value

    def aws(self, key: str, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        response = self.inner.aws(key, service, operation, dict(params))
        self._put_json(key, response)
        return response

    def computed(self, key: str, produce: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        result = self.inner.computed(key, produce)
        if result is not None:
            self._put_json(key, result)
        return result


def s3_client(
    *, connect_timeout_s: float = 3.0, read_timeout_s: float = 30.0, attempts: int = 2
) -> Any:
    """A boto3 S3 client with short timeouts and ``attempts`` tries in all (one retry by
    default), honouring ``AWS_ENDPOINT_URL``, ``AWS_REGION`` and the credential chain;
    InputError when boto3 is missing."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        from kvtool.errors import InputError

        raise InputError("boto3 is not installed", "pip install 'kvtool[aws]'") from None
    config = Config(
        connect_timeout=connect_timeout_s,
        read_timeout=max(read_timeout_s, connect_timeout_s),
        # botocore's max_attempts counts retries; total_max_attempts counts them all
        retries={"total_max_attempts": attempts, "mode": "standard"},
        max_pool_connections=256,
    )
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    # a session of its own: the credential chain is read now, not cached from an earlier client
    return boto3.session.Session().client("s3", region_name=region, config=config)


def sigv4_headers(
    url: str, *, region: str, service: str, headers: dict[str, str]
) -> dict[str, str]:
    """``headers`` with a SigV4 signature for ``GET url``, from boto3's credential chain
    (Amazon Managed Service for Prometheus: service ``aps``); InputError when boto3 or
    credentials are missing."""
    from kvtool.errors import InputError

    try:
        import boto3
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
    except ImportError:
        raise InputError("signing needs boto3", "pip install 'kvtool[aws]'") from None
    credentials = boto3.session.Session().get_credentials()
    if credentials is None:
        raise InputError(f"{service} needs AWS credentials",
                         "set them as for the AWS CLI (environment, profile or role)")  # fmt: skip
    request = AWSRequest(method="GET", url=url, headers=dict(headers))
    SigV4Auth(credentials.get_frozen_credentials(), service, region).add_auth(request)
    return dict(request.headers.items())


def pricing_client() -> Any:
    """A boto3 client of AWS's Price List API (its endpoint is in us-east-1), short timeouts,
    one retry; InputError when boto3 is missing."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        from kvtool.errors import InputError

        raise InputError("--prices aws needs boto3", "pip install 'kvtool[aws]'") from None
    config = Config(connect_timeout=3, read_timeout=10,
                    retries={"total_max_attempts": 2, "mode": "standard"})  # fmt: skip
    return boto3.session.Session().client("pricing", region_name="us-east-1", config=config)


def engine_s3_client() -> Any:
    """The client the engine's T4 medium uses: one attempt each (``S3Medium`` retries, within
    its own deadline) and 10 s for a server that stops answering, so a frozen endpoint costs
    seconds per chunk, not minutes."""
    return s3_client(connect_timeout_s=3.0, read_timeout_s=10.0, attempts=1)


@contextlib.contextmanager
def on_cpus(cpus: frozenset[int]) -> Iterator[bool]:
    """Run the block on ``cpus`` (those of them this process may use), so memory it touches
    first is allocated on their NUMA node; yields False and changes nothing where the
    affinity cannot be set (no such CPUs allowed, or no ``sched_setaffinity``)."""
    getter = getattr(os, "sched_getaffinity", None)
    setter = getattr(os, "sched_setaffinity", None)
    allowed = frozenset(getter(0)) if getter is not None else frozenset()
    wanted = cpus & allowed
    if setter is None or not wanted:
        yield False
        return
    setter(0, wanted)
    try:
        yield True
    finally:
        setter(0, allowed)


def environment(name: str) -> str | None:
    """An environment variable of this process (``CUDA_VISIBLE_DEVICES``), or None."""
    return os.environ.get(name)


def installed_version(distribution: str) -> str | None:
    """The version of the Python distribution installed beside kvtool (its metadata only:
    nothing of it is imported), or None where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
