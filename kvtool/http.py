"""One HTTP GET against an endpoint kvtool does not trust (an engine's ``/metrics``): the whole
call bounded by one deadline, the status line and headers included, no redirect to another
origin, no credentials in the URL, a bounded body. Side effects: the network."""

from __future__ import annotations

import http.client
import io
import select
import socket
import ssl
import time
import urllib.parse

from kvtool.errors import InputError, redact

MAX_BODY = 64 * 2**20
MAX_REDIRECTS = 3
MAX_HEADER_LINE = http.client._MAXLINE  # type: ignore[attr-defined]  # 64 KiB
MAX_HEADERS = http.client._MAXHEADERS  # type: ignore[attr-defined]  # 100
REDIRECTS = (301, 302, 303, 307, 308)


class FetchError(OSError):
    """The endpoint did not give a body: unreachable, refused, too slow, redirected away,
    not 200. The message never quotes the body."""


class TooLarge(FetchError):
    """The answer is longer than kvtool reads: refused whole, never cut."""


def check_url(url: str, *, what: str) -> None:
    """InputError (exit 2) for a URL that carries credentials (``http://user:pass@host``):
    they would be echoed in text and ``--json`` and kept in shell history; the message
    shows the URL redacted."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise InputError(
            f"{what} {redact(url)} carries credentials in the URL",
            "give the URL without user:password (an endpoint that needs them is not supported yet)",
        )


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


class _Deadline:
    """What is left of one call's time; FetchError once none is."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise FetchError(f"no whole answer within {self.seconds:g} s")
        return remaining


class _TimedReads(io.RawIOBase):
    """A socket's reads, each given what is left of the deadline: the status line, the
    headers and the body alike, so a server that drips a byte at a time anywhere is cut off."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        self.sock.settimeout(self.deadline.left())
        return self.sock.recv_into(buffer)


class _TimedSocket:
    """What ``http.client`` asks of a socket (``sendall``, ``makefile``, ``close``), every
    operation within the deadline."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self.sock, self.deadline = sock, deadline

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.left())
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_TimedReads(self.sock, self.deadline))

    def close(self) -> None:
        """Nothing: ``http.client`` closes a connection whose answer is still to be read (the
        answer holds it); ``_Connection.shut`` closes the socket once the call is over."""


class _Connection(http.client.HTTPConnection):
    """One connection, plain or TLS, whose every step (connect, handshake, each read and
    write) gets what is left of one deadline."""

    def __init__(self, host: str, port: int, deadline: _Deadline, *, tls: bool) -> None:
        super().__init__(host, port, timeout=deadline.left())
        self.deadline, self.tls = deadline, tls
        self.default_port = 443 if tls else 80  # (the Host header omits the scheme's port)
        self.raw: socket.socket | None = None

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.deadline.left())
        try:
            if self.tls:
                sock = _handshake(sock, self.host, self.deadline)
        except BaseException:
            sock.close()
            raise
        self.raw = sock
        self.sock = _TimedSocket(sock, self.deadline)

    def shut(self) -> None:
        self.close()
        if self.raw is not None:
            self.raw.close()


def _handshake(sock: socket.socket, host: str, deadline: _Deadline) -> ssl.SSLSocket:
    """A TLS client handshake, verified against the system's CAs, within the deadline (a
    handshake that drips is cut off like a body)."""
    wrapped = ssl.create_default_context().wrap_socket(
        sock, server_hostname=host, do_handshake_on_connect=False
    )
    wrapped.setblocking(False)
    while True:
        try:
            wrapped.do_handshake()
            return wrapped
        except ssl.SSLWantReadError:
            select.select([wrapped], [], [], deadline.left())
        except ssl.SSLWantWriteError:
            select.select([], [wrapped], [], deadline.left())


def get_text(
    url: str,
    *,
    deadline_s: float,
    accept: str = "text/plain",
    headers: dict[str, str] | None = None,
) -> str:
    """The body of ``GET url`` as text, read within ``deadline_s`` from the call's start
    (connecting, redirects, headers and every read included: a server that drips bytes is
    cut off at the deadline); FetchError otherwise, TooLarge for a body over ``MAX_BODY``."""
    body = _fetch(url, deadline_s, {"Accept": accept, **(headers or {})}, MAX_BODY, None)
    return body.decode("utf-8", errors="replace")


def get_bytes(
    url: str,
    *,
    deadline_s: float,
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BODY,
    byte_range: tuple[int, int] | None = None,
) -> bytes:
    """The body of ``GET url``, as ``get_text`` reads it: TooLarge when it is longer than
    ``max_bytes`` (never cut). With ``byte_range`` (first, last; inclusive) a ``Range`` header
    is sent and a 206 answer is taken as well as a 200 (a server that ignores ranges: its
    first ``max_bytes``)."""
    return bytes(_fetch(url, deadline_s, dict(headers or {}), max_bytes, byte_range))


def _fetch(
    url: str,
    deadline_s: float,
    headers: dict[str, str],
    max_bytes: int,
    byte_range: tuple[int, int] | None,
) -> bytearray:
    deadline = _Deadline(deadline_s)
    if byte_range is not None:
        headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        max_bytes = min(max_bytes, byte_range[1] - byte_range[0] + 1)
    try:
        return _get(url, deadline, headers, max_bytes, cut=byte_range is not None)
    except FetchError:
        raise
    except TimeoutError:
        raise FetchError(f"no whole answer within {deadline_s:g} s") from None
    except http.client.HTTPException as exc:
        raise FetchError(_broken(exc)) from None
    except OSError as exc:
        raise FetchError(redact(str(exc.strerror or exc))) from None
    except ValueError as exc:  # a URL http.client refuses (a port out of range)
        raise FetchError(redact(str(exc))) from None


def _get(
    url: str, deadline: _Deadline, headers: dict[str, str], max_bytes: int, *, cut: bool
) -> bytearray:
    origin = _origin(url)
    for _hop in range(MAX_REDIRECTS + 1):
        scheme, host, port = _origin(url)
        if scheme not in ("http", "https") or not host or port is None:
            raise FetchError(f"{redact(url)} is not an http(s) URL")
        parts = urllib.parse.urlsplit(url)
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        connection = _Connection(host, port, deadline, tls=scheme == "https")
        try:
            connection.request("GET", target, headers={**headers, "Connection": "close"})
            response = connection.getresponse()
            if response.status in REDIRECTS and response.getheader("Location"):
                url = urllib.parse.urljoin(url, response.getheader("Location", ""))
                if _origin(url) != origin:
                    raise FetchError(f"redirected ({response.status}) to another origin,"
                                     f" {redact(url)}: not followed")  # fmt: skip
                continue
            if response.status not in ((200, 206) if cut else (200,)):
                raise FetchError(f"HTTP {response.status}")
            if not cut and response.length is not None and response.length > max_bytes:
                raise _too_large(max_bytes)
            return _body(response, max_bytes, cut=cut)
        finally:
            connection.shut()
    raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def _body(response: http.client.HTTPResponse, max_bytes: int, *, cut: bool) -> bytearray:
    """At most ``max_bytes`` of the body (with ``cut``), else all of it, TooLarge past that."""
    body = bytearray()
    while len(body) <= max_bytes:
        chunk = response.read1(min(1 << 20, max_bytes + 1 - len(body)))
        if not chunk:
            break
        body += chunk
    if len(body) > max_bytes:
        if not cut:
            raise _too_large(max_bytes)
        del body[max_bytes:]
    elif response.length:  # the connection closed before the Content-Length it announced
        raise FetchError(f"the answer ended {response.length:,} bytes short of its length")
    return body


def _too_large(limit: int) -> TooLarge:
    size = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit:,} bytes"
    return TooLarge(f"the answer is larger than {size}, the most kvtool reads: refused, not cut")


def _broken(exc: http.client.HTTPException) -> str:
    """One line for an answer that is not HTTP kvtool reads (``http.client``'s words are
    a traceback's)."""
    if isinstance(exc, http.client.LineTooLong):
        part = str(exc).rsplit("reading ", 1)[-1]
        return f"a {part} of the answer is over {MAX_HEADER_LINE // 1024} KiB: not read"
    if "more than" in str(exc) and "headers" in str(exc):
        return f"the answer has more than {MAX_HEADERS} headers: not read"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    if isinstance(exc, http.client.BadStatusLine):
        return "not an HTTP answer"
    if isinstance(exc, http.client.IncompleteRead):
        return "the answer ended before its body did"
    return f"not an HTTP answer kvtool reads ({type(exc).__name__})"
