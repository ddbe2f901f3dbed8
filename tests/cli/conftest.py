"""Fixtures the command tests share: real servers on 127.0.0.1 that stop themselves."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fio_servers(tmp_path: Path) -> Iterator[list[int]]:
    """Two ``fio --server`` processes on 127.0.0.1, stopped afterwards."""
    ports = [free_port(), free_port()]
    servers = [
        subprocess.Popen(
            ["fio", f"--server=ip:127.0.0.1,{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        for port in ports
    ]
    try:
        for port in ports:  # wait until each listens
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.05)
        yield ports
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
