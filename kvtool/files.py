"""Read the user's and the bundled data files: text, TOML, JSON and YAML. The I/O edge.

Every file kvtool reads goes through one of these functions, so that a missing, unreadable,
binary or malformed file always becomes one ``InputError`` line naming the file (and where
it could tell, the line and column), never a traceback. ``write_text`` is the one way kvtool
writes a whole file (reports, JUnit, traces): atomically, so a reader never sees half of one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kvtool.errors import InputError, has_control_character

REPORT_SCHEMA_VERSION = 1  # every --json kvtool prints: {"schema_version": 1, "command": ...}
MAX_INPUT_BYTES = 64 * 1024**2  # far past any config, plan or report; short of a MemoryError


def read_text(
    path: Path, *, what: str = "file", limit: int = MAX_INPUT_BYTES, dir_fd: int | None = None
) -> str:
    """The file's text as UTF-8. InputError for a missing, unreadable or binary file, for
    anything but a regular file (a FIFO would block, ``/dev/zero`` never ends) and for a
    file over ``limit`` bytes. With ``dir_fd``, ``path`` is a name in that open folder and a
    link there is not followed."""
    data = read_bytes(path, what=what, limit=limit, dir_fd=dir_fd)
    if b"\x00" in data:
        raise InputError(f"{path} is a binary file, not a {what}", "pass the text file itself")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} is not UTF-8 text (byte {exc.start}), not a {what}",
            "pass the text file itself",
        ) from None


def read_bytes(
    path: Path, *, what: str = "file", limit: int = MAX_INPUT_BYTES, dir_fd: int | None = None
) -> bytes:
    """The file's bytes, read only from a regular file of at most ``limit`` bytes (a FIFO
    would block, ``/dev/zero`` never ends); InputError naming ``path`` otherwise. With
    ``dir_fd``, ``path`` is a name in that open folder and a link there is not followed."""
    import os
    import stat

    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO opens, unread
    if dir_fd is not None:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a {what}") from None
    except ValueError:  # a NUL byte, or a lone surrogate from a "\ud800" escape in YAML
        raise InputError(
            f"{str(path)!r:.200} is no file name: it holds a character no path can", "fix the path"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{path} is a directory, not a {what}")
        if not stat.S_ISREG(mode):
            raise InputError(
                f"{path} is a {file_kind(mode)}, not a {what}: kvtool reads regular files only",
                "save the input to a file first",
            )
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise InputError(
            f"{path} is larger than {limit // 1024**2} MiB, the most kvtool reads as a {what}",
            "pass the file itself, not a log or an archive",
        )
    return data


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words (from an ``lstat``'s mode)."""
    import stat

    for test, name in (
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "folder"),
    ):
        if test(mode):
            return name
    return "special file"


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict; malformed TOML raises InputError with the parser's position."""
    import tomllib

    text = read_text(path, what="TOML file")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InputError(f"{path}: TOML nested too deeply to be a settings file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None


def read_json_object(
    path: Path, *, what: str = "JSON object", dir_fd: int | None = None
) -> dict[str, Any]:
    """A JSON file that must hold one object; errors name the line and column, and a key given
    twice in one object (JSON readers keep the last silently). ``dir_fd`` as for
    ``read_bytes``."""

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for key, value in pairs:
            if key in data:
                raise _TwiceKey(key, 0, 0)
            data[key] = value
        return data

    text = read_text(path, what="JSON file", dir_fd=dir_fd)
    try:
        data = _loads_json(text, once)
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a {what}") from None
    except _TwiceKey as exc:
        raise InputError(f"{path}: the key {str(exc.key)[:80]!r} is given twice in one object",
                         "keep one: kvtool does not guess which was meant") from None  # fmt: skip
    except ValueError as exc:  # json's errors, and a number past int's 4,300 digits
        from json import JSONDecodeError  # (the json package is imported on this path only)

        where = (
            f" at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            if isinstance(exc, JSONDecodeError)
            else f": {exc}"
        )
        raise InputError(f"{path}: malformed JSON{where}", "fix the file or pass another") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a {what} must be a JSON object")
    _no_surrogates(data, path)
    return data


_JSON_SPACE = " \t\n\r"
_JSON_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


def _loads_json(text: str, pairs_hook: Any) -> Any:
    """``json.loads(text, object_pairs_hook=pairs_hook)``, read by json's C scanner alone when
    the text is well formed. Importing the json package costs ``kvtool size`` 1.7 ms (its
    pure-Python fallback's regular expressions, compiled at import), a twelfth of the ~21 ms
    its start-up may add to typer's and rich's ~70 ms (docs/architecture.md, "Start-up"); the
    C scanner is
    what json.loads runs anyway. Anything the scanner does not take whole (malformed text, a
    byte order mark, text after the value, a Python without ``_json``) is read again by
    json.loads, so every error is json's own."""
    value = _scan_json(text, pairs_hook)
    if value is not _UNREAD:
        return value
    import json

    return json.loads(text, object_pairs_hook=pairs_hook)


_UNREAD: Any = object()


def _scan_json(text: str, pairs_hook: Any) -> Any:
    """The value json's C scanner reads from the whole of ``text``, or ``_UNREAD``."""
    try:
        import _json
    except ImportError:  # pragma: no cover - every CPython has it
        return _UNREAD
    context: Any = SimpleNamespace(strict=True, object_hook=None, object_pairs_hook=pairs_hook,
                                   parse_float=float, parse_int=int,
                                   parse_constant=_JSON_CONSTANTS.__getitem__)  # fmt: skip
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        value, end = _json.make_scanner(context)(text, start)
    except (StopIteration, ValueError):  # json's errors are ValueErrors: json.loads says them
        return _UNREAD
    return value if not text[end:].strip(_JSON_SPACE) else _UNREAD


def read_report(path: Path, *, command: str, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """A report ``kvtool COMMAND --json`` (or one of ``also``'s) wrote (one from before the
    envelope, without ``schema_version``, is read as version 1). InputError for another
    command's report, or one a newer kvtool wrote in a shape this one does not know."""
    data = read_json_object(path, what=f"kvtool {command} --json report")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"{path}: schema_version {version!r} is not a kvtool report's")
    if version > REPORT_SCHEMA_VERSION:
        raise InputError(
            f"{path}: written by a newer kvtool (schema_version {version}; this one reads"
            f" {REPORT_SCHEMA_VERSION})",
            "upgrade kvtool, or write the report again with this one",
        )
    written_by = data.get("command", command)
    if written_by != command and written_by not in also:
        raise InputError(
            f"{path} is kvtool {str(written_by)[:40]}'s report, not kvtool {command}'s",
            f"pass the file kvtool {command} --json wrote",
        )
    return data


def read_yaml_mapping(
    path: Path, *, what: str = "workload file", tags_as_values: bool = False
) -> dict[str, Any]:
    """A YAML file that must hold one mapping; errors name the line and column.
    ``tags_as_values`` reads any ``!Tag`` (CloudFormation's ``!Ref``, ``!Sub``...) as
    ``{"Fn": "Tag"}``, so a property set by an intrinsic function counts as undeclared. A key
    given twice in one mapping is refused (YAML readers keep the last silently: ``nodes: 8``
    then ``nodes: 9999`` would plan 9999 nodes); a key a merge (``<<: *base``) brings in may be
    set again, as merges mean."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            lines: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = lines.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:
                    continue  # an unhashable key: the constructor names it
                if first != key_node.start_mark.line + 1:
                    raise _TwiceKey(key, first, key_node.start_mark.line + 1)
            return super().construct_mapping(node, deep=deep)

    if tags_as_values:

        def any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> object:
            return {"Fn": suffix}

        Loader.add_multi_constructor("!", any_tag)
    text = read_text(path, what=what)
    _few_aliases(text, path, what)
    try:
        data = yaml.load(text, Loader=Loader)
    except RecursionError:
        raise InputError(f"{path}: YAML nested too deeply to be a {what}") from None
    except _TwiceKey as exc:
        raise InputError(
            f"{path}: the key {str(exc.key)[:80]!r} is given twice in one mapping (lines"
            f" {exc.lines[0]} and {exc.lines[1]})",
            "keep one: kvtool does not guess which was meant",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"{path}: malformed YAML{where}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a {what} must be a YAML mapping")
    _no_surrogates(data, path)
    return data


class _TwiceKey(Exception):
    """A key given twice in one YAML mapping."""

    def __init__(self, key: object, first: int, second: int) -> None:
        super().__init__(key)
        self.key, self.lines = key, (first, second)


YAML_NODE_BUDGET = 1_000_000  # nodes once aliases are expanded: far past any workload or plan


def _few_aliases(text: str, path: Path, what: str) -> None:
    """InputError for a YAML file whose aliases (``*a``) would expand past
    ``YAML_NODE_BUDGET`` nodes: counted on the composed node graph, where an alias is the node
    it names (not a copy), each node's expanded size computed once, so ten levels of ten
    aliases (10^10 nodes, a "billion laughs") are refused in microseconds."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return  # the load below names the mistake (or the nesting)
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        sizes[id(node)] = total
        return total

    try:
        expanded = 0 if root is None else size(root)
    except RecursionError:
        return
    if expanded > YAML_NODE_BUDGET:
        raise InputError(
            f"{path}: its YAML aliases (*name) expand past {YAML_NODE_BUDGET:,} nodes: not a"
            f" {what}",
            "write the values out; a workload or plan needs no aliases",
        )


def _no_surrogates(data: Any, path: Path) -> None:
    """InputError when a string in ``data`` holds a lone surrogate: an escape such as
    ``"\\ud800"`` that names half a character, which no file name, message or output can
    carry."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in item):
            raise InputError(
                f"{path}: {item.encode('utf-8', 'backslashreplace').decode()!r:.80} holds half"
                " a character (a lone surrogate escape such as \\ud800)",
                "write the character itself, or its pair of escapes in JSON",
            )


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def path_option(text: str | Path, *, option: str) -> Path:
    """A path as typed for ``option``: InputError when it is empty (which would mean the
    current folder) or holds a control character (a pasted line break; such a name is
    never what was meant, and would break the lines kvtool prints and writes)."""
    raw = str(text)
    if not raw.strip():
        raise InputError(f"{option} is empty", "give a path")
    if has_control_character(raw):
        raise InputError(
            f"{option} {raw!r} holds a control character (a line break?)",
            "give the path without it",
        )
    return Path(text)


def output_file(path: Path, *, option: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Check, before any work starts, that ``path`` can be written as a whole file: its
    folder exists and is writable, it is not a folder or a device, and (with ``suffixes``) its
    extension names a format kvtool writes. Returns ``path``; InputError naming the option,
    the path and the fix otherwise."""

    path_option(path, option=option)
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder", "name a file, e.g. " + str(path / "out"))
    named = path
    try:
        path = _final(path)
    except InputError as exc:
        raise InputError(f"{option} {exc.message}", exc.hint) from None
    _writable_folder(path.parent, option, path, named="the folder ")
    if suffixes and path.suffix.lower() not in suffixes:
        shown = f"'{path.suffix}'" if path.suffix else "no extension"
        raise InputError(
            f"{option} {path}: {shown} is not a format kvtool writes",
            "name a " + ", ".join(suffixes[:-1]) + f" or {suffixes[-1]} file",
        )
    sweep_temporaries(path)  # what a SIGKILLed write of it left (before a free-space check)
    return named


def _temporary_prefix(path: Path, pid: int | None = None) -> str:
    """``.<name>.<host>-<pid>-<start>.``: a temporary names its target and its writer (this
    host's hash, the pid and the process's start time), so a later run can tell one a killed
    writer left from one a live writer (here or on another node) is still writing."""
    import hashlib
    import os
    import socket

    from kvtool.scratch import process_start

    pid = os.getpid() if pid is None else pid
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f".{path.name}.{host}-{pid}-{process_start(pid) or 0}."


def sweep_temporaries(path: Path) -> int:
    """Remove the temporaries beside ``path`` that writes of it by processes of this host that
    no longer run left (SIGKILL runs no clean-up: ``engine gen -o`` left its whole trace so far
    for ever); returns the bytes freed. Another host's, and a live writer's, stay."""
    import contextlib
    import os
    import re

    mine = _temporary_prefix(path).rsplit("-", 2)[0]  # ``.<name>.<host>``
    pattern = re.compile(re.escape(mine) + r"-(\d+)-(\d+)\.[^/]*\.tmp")
    freed = 0
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            found = pattern.fullmatch(entry.name)
            if found is None or not entry.is_file(follow_symlinks=False):
                continue
            if _temporary_prefix(path, int(found[1])) == f"{mine}-{found[1]}-{found[2]}.":
                continue  # that writer still runs
            with contextlib.suppress(OSError):
                freed += entry.stat(follow_symlinks=False).st_size
                os.unlink(entry.path)
    return freed


def _final(path: Path) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself. InputError for a symbolic link
    there (whatever it names: in a shared folder another user's link to ``/etc/passwd`` would
    have had root's report written into it) and for anything that is not a regular file (a
    device, a FIFO, a folder): those are never replaced."""
    import os
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(mode):
        try:
            shown = os.readlink(path)
        except OSError:
            shown = "?"
        raise InputError(
            f"{path} is a symbolic link (to {shown}): kvtool never writes through a link",
            "name the file itself, or remove the link",
        )
    if not stat.S_ISREG(mode):
        raise InputError(
            f"{path} is a {file_kind(mode)}, not a regular file",
            "name a file kvtool may replace",
        )
    return path


def output_folder(path: Path, *, option: str) -> Path:
    """Check, before any work starts, that ``path`` can become a folder of kvtool's files: a
    new folder in a writable one, or an empty folder. InputError naming the option otherwise."""
    path_option(path, option=option)
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} {path} is a file", "name a new or empty folder")
    if path.is_dir() and any(path.iterdir()):
        raise InputError(f"{option} {path} is not empty", "name a new or empty folder")
    _writable_folder(path if path.is_dir() else path.parent, option, path, named="")
    return path


def _writable_folder(folder: Path, option: str, path: Path, *, named: str) -> None:
    """InputError naming ``option`` and ``path`` unless ``folder`` exists and this user can
    write in it (saying so when the mount is read-only)."""
    import os

    if not folder.is_dir():
        raise InputError(
            f"{option} {path}: the folder {folder} does not exist",
            "create it first, or pick another",
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(
            f"{option} {path}: {named}{folder} is not writable"
            + (" (a read-only mount)" if read_only_mount(folder) else ""),
            "pick a folder this user can write",
        )


def read_only_mount(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (False when it cannot tell)."""
    import os

    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def write_bytes(path: Path, data: bytes) -> None:
    """``write_text`` for bytes (a chart): whole or not at all."""
    _write_atomic(path, lambda f: f.write(data), binary=True)


def write_text(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (a string, or pieces streamed one after another) to ``path`` whole or
    not at all: a temporary file in the same folder, flushed to disk, then renamed over
    ``path``; the temporary is removed on any failure (and on a signal: it is registered with
    the clean-up door's rules, removed before the error leaves). InputError naming the path
    when it cannot be written. The one way kvtool writes a file."""

    def put(f: Any) -> None:
        if isinstance(text, str):
            f.write(text)
        else:
            f.writelines(text)

    _write_atomic(path, put, binary=False)


def _write_atomic(path: Path, put: Any, *, binary: bool) -> None:
    import contextlib
    import os
    import tempfile

    path = _final(path)  # through a link to its file; never over a device, FIFO or folder
    tmp = None
    try:
        fd, name = tempfile.mkstemp(prefix=_temporary_prefix(path), suffix=".tmp", dir=path.parent)
        tmp = Path(name)
        os.chmod(tmp, _mode_for(path))  # mkstemp makes 0600: keep what a plain open would give
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as f:
            put(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # replaces a link put there since the check, never its target
        tmp = None
        _sync_folder(path.parent)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _sync_folder(folder: Path) -> None:
    """fsync a folder, so that a rename into it survives a crash (where the file system lets
    a folder be synced: some network mounts refuse, and the write stands)."""
    import contextlib
    import os

    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _mode_for(path: Path) -> int:
    """The permissions ``path`` keeps when it exists, else what ``open(path, "w")`` would give
    it (0666 less the umask)."""
    import os
    import stat

    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


class AppendLog:
    """A log kvtool appends whole lines to while it works (``kvtool gc --log``): the one
    exception to ``write_text``'s whole-or-nothing, because a log must keep what was done
    when the run is killed. Opened ``O_APPEND`` (never truncated: runs add to it) and
    ``O_NOFOLLOW``; each ``write`` is one ``write(2)`` of whole lines, in the kernel at once,
    so a SIGKILL loses nothing written and lines of two runs never interleave."""

    def __init__(self, path: Path) -> None:
        import os
        import stat

        path = _final(path)  # through a link the user made to its file, as write_text does
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self._fd = os.open(path, flags | os.O_NONBLOCK, 0o666)
            mode = os.fstat(self._fd).st_mode
        except OSError as exc:
            raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            os.close(self._fd)
            raise InputError(
                f"{path} is a {file_kind(mode)}, not a regular file", "name a log file"
            )

    def write(self, lines: Iterable[str]) -> None:
        """Append ``lines`` (each ending in a newline) with one write."""
        import os

        data = "".join(lines).encode("utf-8", "surrogateescape")
        try:
            while data:
                done = os.write(self._fd, data)
                data = data[done:]
        except OSError as exc:
            raise InputError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        import os

        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> AppendLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
