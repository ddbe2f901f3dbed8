"""A local checkpoint's exact weight bytes from its safetensors headers, written here by the
``safetensors`` library itself."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from kvtool.model.params import count_params, model_weights, replica_bytes
from kvtool.profiles.checkpoint import checkpoint_bytes
from kvtool.profiles.resolve import resolve_model

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
CONFIG = Path(__file__).parents[3] / "profiles" / "models" / "llama-3.1-8b" / "config.json"


def _checkpoint(folder: Path) -> int:
    """Two shards as a real checkpoint has them; returns the bytes of every tensor."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG, folder / "config.json")
    first = {"embed": np.ones((1000, 256), dtype=np.float16), "norm": np.ones(10, np.float32)}
    second = {"head": np.ones((512, 512), dtype=np.float16)}
    safetensors_numpy.save_file(first, str(folder / "model-00001-of-00002.safetensors"))
    safetensors_numpy.save_file(second, str(folder / "model-00002-of-00002.safetensors"))
    return sum(a.nbytes for shard in (first, second) for a in shard.values())


def test_the_headers_give_every_tensors_bytes_and_the_index_its_total(tmp_path: Path) -> None:
    expected = _checkpoint(tmp_path / "m")
    found = checkpoint_bytes(tmp_path / "m")
    assert found is not None
    assert (found.nbytes, found.source) == (expected, "the headers of 2 safetensors files")
    (tmp_path / "m" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 123_456}, "weight_map": {}})
    )
    indexed = checkpoint_bytes(tmp_path / "m")
    assert indexed == (123_456, "model.safetensors.index.json metadata.total_size")
    assert checkpoint_bytes(tmp_path) is None  # no checkpoint here


@pytest.mark.parametrize(
    "content",
    [b"", b"\x05\x00\x00\x00\x00\x00\x00\x00{}", struct.pack("<Q", 2**40) + b"{}",
     struct.pack("<Q", 7) + b"notjson", struct.pack("<Q", 30) + b'{"t": {"data_offsets": [9, 1]}}'],
    ids=["empty", "short", "huge length", "not json", "offsets backwards"],
)  # fmt: skip
def test_a_file_that_is_not_a_safetensors_header_is_passed_over(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "model.safetensors").write_bytes(content)
    assert checkpoint_bytes(tmp_path) is None


def test_a_checkpoint_folders_weights_are_its_bytes_in_size_and_plan(tmp_path: Path) -> None:
    expected = _checkpoint(tmp_path / "ckpt")
    resolved = resolve_model(str(tmp_path / "ckpt"))
    spec = resolved.spec
    assert spec.checkpoint_bytes == expected
    assert any(note.startswith(f"weights: {expected:,} B, read from the headers") for note in
               spec.notes)  # fmt: skip
    assert model_weights(spec).nbytes == expected
    arithmetic = model_weights(spec, "bf16").nbytes  # a dtype asked for: the arithmetic
    assert arithmetic > 10**10
    assert replica_bytes(spec, count_params(spec), "fp8") == arithmetic // 2
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(CONFIG, bare / "config.json")
    assert resolve_model(str(bare)).spec.checkpoint_bytes is None


# --- on the Hub: the same headers over HTTP (a real server on 127.0.0.1) --------------------


class _Hub:
    """A Hub-like server on 127.0.0.1 serving ``/{repo}/resolve/main/{file}`` from a folder,
    with Range requests as huggingface.co answers them (206), and ``redirect`` files sent to
    another origin as its LFS files are."""

    def __init__(self, folder: Path, repo: str, redirect: frozenset[str] = frozenset()) -> None:
        import http.server
        import threading

        hub = self
        self.requests: list[tuple[str, str | None, str | None]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub.requests.append((self.path, self.headers.get("Range"),
                                     self.headers.get("Authorization")))  # fmt: skip
                prefix = f"/{repo}/resolve/main/"
                name = self.path.removeprefix(prefix)
                path = folder / name
                if not self.path.startswith(prefix) or not path.is_file():
                    self.send_error(404)
                    return
                if name in redirect:
                    self.send_response(302)
                    self.send_header("Location", f"http://localhost:9/{name}")
                    self.end_headers()
                    return
                data = path.read_bytes()
                status = 200
                if (wanted := self.headers.get("Range")) is not None:
                    first, last = (int(x) for x in wanted.removeprefix("bytes=").split("-"))
                    data, status = data[first : last + 1], 206
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> _Hub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_hub_repositorys_index_gives_its_total_size(tmp_path: Path) -> None:
    """A sharded checkpoint as transformers' save_pretrained writes it (its index's
    total_size), served as the Hub serves it."""
    from kvtool.profiles.checkpoint import hub_checkpoint_bytes

    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4)  # fmt: skip
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(tmp_path / "tiny", max_shard_size="50KB")
    index = json.loads((tmp_path / "tiny" / "model.safetensors.index.json").read_text())
    weights = sum(p.numel() * p.element_size() for p in model.state_dict().values())
    assert index["metadata"]["total_size"] == weights  # what the writer says is what it holds
    with _Hub(tmp_path / "tiny", "org/tiny") as hub:
        found, why = hub_checkpoint_bytes("org/tiny", endpoint=hub.endpoint, token="hf_x")
    assert found == (weights, "the Hub's model.safetensors.index.json metadata.total_size")
    assert why == ""
    assert hub.requests == [("/org/tiny/resolve/main/model.safetensors.index.json", None,
                             "Bearer hf_x")]  # fmt: skip


def test_a_single_file_is_read_by_its_header_in_two_ranges(tmp_path: Path) -> None:
    from kvtool.profiles.checkpoint import hub_checkpoint_bytes

    tensors = {"embed": np.ones((1000, 256), dtype=np.float16), "norm": np.ones(10, np.float32)}
    (tmp_path / "repo").mkdir()
    safetensors_numpy.save_file(tensors, str(tmp_path / "repo" / "model.safetensors"))
    with _Hub(tmp_path / "repo", "org/one") as hub:
        found, _ = hub_checkpoint_bytes("org/one", endpoint=hub.endpoint)
    assert found == (sum(a.nbytes for a in tensors.values()),
                     "the header of the Hub's model.safetensors")  # fmt: skip
    ranges = [r for _, r, _ in hub.requests if r is not None]
    assert ranges[0] == "bytes=0-7"
    assert len(ranges) == 2  # never the weights themselves


def test_a_file_sent_to_another_origin_is_not_followed_and_the_arithmetic_stays(
    tmp_path: Path,
) -> None:
    """huggingface.co hands LFS files to a CDN on another origin: kvtool does not follow, and
    says so; no request reaches the other origin (it would refuse the connection)."""
    from kvtool.profiles.checkpoint import hub_checkpoint_bytes

    (tmp_path / "repo").mkdir()
    file = tmp_path / "repo" / "model.safetensors"
    safetensors_numpy.save_file({"w": np.ones(8, np.float32)}, str(file))
    with _Hub(tmp_path / "repo", "org/lfs", redirect=frozenset({"model.safetensors"})) as hub:
        found, why = hub_checkpoint_bytes("org/lfs", endpoint=hub.endpoint)
        missing, nothing = hub_checkpoint_bytes("org/none", endpoint=hub.endpoint)
    assert found is None
    assert "model.safetensors.index.json: HTTP 404" in why
    assert "redirected (302) to another origin" in why
    assert missing is None
    assert nothing.endswith("model.safetensors: HTTP 404")


def test_a_hub_that_drips_bytes_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    import socket
    import threading
    import time

    from kvtool.profiles.checkpoint import hub_checkpoint_bytes

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        while not stop.is_set():
            try:
                listener.settimeout(0.2)
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b"{")
                except OSError:
                    break
                time.sleep(0.05)
            conn.close()

    threading.Thread(target=drip, daemon=True).start()
    start = time.monotonic()
    try:
        found, why = hub_checkpoint_bytes(
            "org/slow", endpoint=f"http://127.0.0.1:{listener.getsockname()[1]}", deadline_s=1.0
        )
    finally:
        stop.set()
    assert time.monotonic() - start < 3
    assert found is None
    assert "within 1 s" in why


def test_a_hub_models_weights_note_says_where_they_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvtool.profiles.resolve import _with_hub_weights

    spec = resolve_model(str(CONFIG)).spec._replace(checkpoint_bytes=None, notes=())
    offline = _with_hub_weights(spec, "org/x", online=False)
    assert offline.checkpoint_bytes is None
    assert offline.notes == ("weights from the parameter arithmetic: the Hub cannot be reached",)
    (tmp_path / "repo").mkdir()
    tensors = {"w": np.ones((4, 4), np.float16)}
    safetensors_numpy.save_file(tensors, str(tmp_path / "repo" / "model.safetensors"))
    with _Hub(tmp_path / "repo", "org/x") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        online = _with_hub_weights(spec, "org/x", online=True)
    assert online.checkpoint_bytes == 32
    assert online.notes[-1] == (
        "weights: 32 B, read from the header of the Hub's model.safetensors (not the parameter"
        " arithmetic)"
    )
