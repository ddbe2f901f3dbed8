"""Start ``vllm serve`` (the tier's vLLM 0.32.0 CPU build) on 127.0.0.1 at a free port and stop
it: one server at a time, its whole process group stopped when the test is done."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


def engine_env(pythonpath: str, scratch: Path) -> dict[str, str]:
    """The environment vLLM runs in: its own PYTHONPATH, the CPU platform, caches and
    temporary files in ``scratch`` (vLLM's model-info cache and its temporary files stay out
    of the user's and the suite's folders)."""
    env = dict(os.environ)
    env.update(
        PYTHONPATH=pythonpath,
        VLLM_TARGET_DEVICE="cpu",
        VLLM_CACHE_ROOT=str(scratch / "vllm-cache"),
        TMPDIR=str(scratch),
        HF_HUB_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            return dict(json.loads(answer.read()))

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=30) as answer:
            return str(answer.read().decode())


@contextmanager
def serve(
    argv: Sequence[str], env: dict[str, str], log: Path, *, timeout: float = 400
) -> Iterator[Server]:
    """``vllm serve`` as ``argv`` (its words after ``vllm``; --host and --port added) until
    /health answers; RuntimeError with the log's tail when it exits first or times out."""
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.cli.main", *argv]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"vllm serve exited {process.returncode}:\n{tail(log)}")
            try:
                server.get("/health")
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve did not answer in {timeout:.0f} s:\n{tail(log)}")
            time.sleep(1)
        yield server
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (the API server and its engine core), SIGKILL
    after 30 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):  # an engine core that outlived its parent
        os.killpg(process.pid, signal.SIGKILL)


def tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
