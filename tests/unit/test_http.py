"""One GET against an endpoint kvtool does not trust (``http.py``): refused credentials,
a same-origin redirect followed, another origin not, the whole call within its deadline."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from kvtool.errors import InputError
from kvtool.http import FetchError, check_url, get_text


@pytest.fixture
def server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/hop":
                self.send_response(301)
                self.send_header("Location", "/ok")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/away":
                self.send_response(302)
                self.send_header("Location", "http://127.0.0.2:1/")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/slow":
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                try:
                    for _ in range(100):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.1)
                except OSError:
                    pass
            else:
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_credentials_in_a_url_are_refused_redacted() -> None:
    with pytest.raises(InputError, match=r"http://\*\*\*@h:1/m carries credentials") as raised:
        check_url("http://u:secret@h:1/m", what="source")
    assert "secret" not in str(raised.value)
    check_url("http://h:1/m", what="source")  # none: fine


def test_redirects_within_the_origin_only_and_the_deadline_is_the_whole_call(server: str) -> None:
    assert get_text(f"{server}/hop", deadline_s=2) == "ok"
    away = r"to another origin, http://127\.0\.0\.2:1/: not followed"
    with pytest.raises(FetchError, match=away):
        get_text(f"{server}/away", deadline_s=2)
    start = time.monotonic()
    with pytest.raises(FetchError, match=r"no whole answer within 0\.5 s"):
        get_text(f"{server}/slow", deadline_s=0.5)
    assert time.monotonic() - start < 1.5
