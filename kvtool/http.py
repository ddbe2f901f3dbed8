"""One HTTP GET against an endpoint kvtool does not trust (an engine's ``/metrics``): the whole
call bounded by one deadline, no redirect to another origin, no credentials in the URL, a
bounded body. Side effects: the network."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from kvtool.errors import InputError, redact

MAX_BODY = 64 * 2**20
MAX_REDIRECTS = 3


class FetchError(OSError):
    """The endpoint did not give a body: unreachable, refused, too slow, redirected away,
    not 200. The message never quotes the body."""


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


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the origin (scheme, host, port) asked for, at most
    ``MAX_REDIRECTS`` times."""

    def __init__(self, origin: tuple[str, str, int | None]) -> None:
        self.origin = origin
        self.count = 0

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        self.count += 1
        if _origin(newurl) != self.origin:
            raise FetchError(
                f"redirected ({code}) to another origin, {redact(newurl)}: not followed"
            )
        if self.count > MAX_REDIRECTS:
            raise FetchError(f"more than {MAX_REDIRECTS} redirects")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def get_text(
    url: str,
    *,
    deadline_s: float,
    accept: str = "text/plain",
    headers: dict[str, str] | None = None,
) -> str:
    """The body of ``GET url`` as text, read within ``deadline_s`` from the call's start
    (connecting, redirects and every read included: a server that drips bytes is cut off at
    the deadline); FetchError otherwise. At most ``MAX_BODY`` bytes are read."""
    body = get_bytes(url, deadline_s=deadline_s, headers={"Accept": accept, **(headers or {})})
    return body.decode("utf-8", errors="replace")


def get_bytes(
    url: str,
    *,
    deadline_s: float,
    headers: dict[str, str] | None = None,
    max_bytes: int = MAX_BODY,
    byte_range: tuple[int, int] | None = None,
) -> bytes:
    """The body of ``GET url``, as ``get_text`` reads it, at most ``max_bytes`` of it. With
    ``byte_range`` (first, last; inclusive) a ``Range`` header is sent and a 206 answer is
    taken as well as a 200 (a server that ignores ranges: its first ``max_bytes``)."""
    end = time.monotonic() + deadline_s
    opener = urllib.request.build_opener(_SameOrigin(_origin(url)))
    sent = dict(headers or {})
    if byte_range is not None:
        sent["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        max_bytes = min(max_bytes, byte_range[1] - byte_range[0] + 1)
    request = urllib.request.Request(url, headers=sent)

    def left() -> float:
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise FetchError(f"no whole answer within {deadline_s:g} s")
        return remaining

    try:
        with opener.open(request, timeout=left()) as response:
            if response.status not in ((200, 206) if byte_range is not None else (200,)):
                raise FetchError(f"HTTP {response.status}")
            sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
            chunks: list[bytes] = []
            size = 0
            while size < max_bytes:
                if isinstance(sock, socket.socket):
                    sock.settimeout(left())
                chunk = response.read1(min(65536, max_bytes - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                left()
    except FetchError:
        raise
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, FetchError):
            raise reason from None
        raise FetchError(redact(str(reason))) from None
    except TimeoutError:
        raise FetchError(f"no whole answer within {deadline_s:g} s") from None
    except OSError as exc:
        raise FetchError(redact(str(exc.strerror or exc))) from None
    return b"".join(chunks)
