"""The ``aws fsx`` lines ``kvtool plan --emit`` ends with (the AWS article's T4: the data
repository association's export policy, and the release) are what the AWS CLI and FSx accept.

Each emitted block is run by bash with its "fill in" variables set and ``aws``/``kvtool``
standing in as functions that print their arguments, so the shell's quoting is the one a user
gets; each ``aws fsx`` call is then read by the AWS CLI's own driver and checked against
botocore's ``fsx`` service model (tests/aws_cli.py: botocore 1.43.11, awscli 1.45.11;
the ``CreateDataRepositoryAssociationRequest`` input shape, its ``S3`` member
``S3DataRepositoryConfiguration`` > ``AutoExportPolicy`` > ``Events`` (``EventType`` enum
NEW, CHANGED, DELETED), ``FileSystemId`` (pattern ``^(fs-[0-9a-f]{8,})$``),
``FileSystemPath`` and ``DataRepositoryPath``; ``CreateDataRepositoryTaskRequest`` for the
release task ``kvtool gc --release --emit fsx-task`` prints). A misspelled option, a wrong
shorthand structure or an event FSx does not know fails the check (tested below).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable

import pytest

from tests.aws_cli import aws_request, validate
from tests.conftest import CliResult

Run = Callable[..., CliResult]
FS_ID = "fs-0a0a63dea8324225b"
BUCKET = "kv-export-bucket"
FILLED = {"FSX_ID": FS_ID, "BUCKET": BUCKET, "FSX_PATH": "/lustre/kv"}
PB = ["plan", "llama-3.1-405b", "--hardware", "trn3-ultraserver", "--ctx", "1M",
      "--sessions", "500", "--set", "mean_idle=30m"]  # fmt: skip
S3_PATH = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[A-Za-z0-9._-]+/$")


def t4_block(text: str) -> str:
    """The shell lines of the emitted T4 block, uncommented, the fill-in values set."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# T4, the AWS article"))
    shell = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        if line.startswith("#   "):
            shell.append(line[4:])
    script = "\n".join(shell)
    names = re.findall(r"^(\w+)=\S+ +# fill in: ", script, flags=re.MULTILINE)
    assert names, script
    assert set(names) <= set(FILLED), names
    return re.sub(r"^(\w+)=\S+ +# fill in: .*$", lambda m: f"{m[1]}={FILLED[m[1]]}", script,
                  flags=re.MULTILINE)  # fmt: skip


def run_block(script: str) -> list[list[str]]:
    """Each command of ``script`` as bash passes it on: ``aws`` and ``kvtool`` print their
    arguments as one JSON list a line."""
    bash = shutil.which("bash")
    assert bash is not None
    echo = "python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    prelude = f'aws() {{ {echo} aws "$@"; }}\nkvtool() {{ {echo} kvtool "$@"; }}\n'
    done = subprocess.run([bash, "-euc", prelude + script], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def emitted(kvtool: Run, *args: str) -> list[list[str]]:
    result = kvtool(*PB, *args)
    assert result.exit_code == 0, result.stderr
    return run_block(t4_block(result.stdout))


@pytest.mark.parametrize(
    ("target", "extra"),
    [("lmcache", []), ("vllm", []), ("sglang", ["--set", "block_tokens=64"])],
)
def test_the_emitted_association_is_one_fsx_accepts(kvtool: Run, target: str,
                                                     extra: list[str]) -> None:  # fmt: skip
    """--t3-dir /fsx/kvcache (the default): on the file system /kvcache, exported to
    s3://BUCKET/kvcache/ on every change; the release below a day is gc from a client."""
    association, release = emitted(kvtool, "--emit", target, *extra)
    operation, params = aws_request(association)
    assert operation == "CreateDataRepositoryAssociation"
    validate(operation, params)
    assert params == {
        "FileSystemId": FS_ID,
        "FileSystemPath": "/kvcache",
        "DataRepositoryPath": f"s3://{BUCKET}/kvcache/",
        "S3": {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}},
    }
    assert S3_PATH.match(params["DataRepositoryPath"])
    assert release == ["kvtool", "gc", "/fsx/kvcache", "--max-age", "10m", "--release"]


def test_a_folder_outside_fsx_leaves_its_path_on_the_file_system_to_fill_in(
    kvtool: Run,
) -> None:
    """A day-scale threshold: the release is FSx's task, printed by kvtool gc --emit
    fsx-task with the same file system id."""
    result = kvtool(*PB, "--emit", "lmcache", "--t3-dir", "/mnt/lustre/kv",
                    "--set", "release_after=2d")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Set the 3 variables marked 'fill in' first" in text
    assert "FSX_PATH=/... # fill in: /mnt/lustre/kv below the file system's mount point" in text
    association, release = run_block(t4_block(result.stdout))
    operation, params = aws_request(association)
    validate(operation, params)
    assert params["FileSystemPath"] == FILLED["FSX_PATH"]
    assert params["DataRepositoryPath"] == f"s3://{BUCKET}/kv/"
    assert release == ["kvtool", "gc", "/mnt/lustre/kv", "--max-age", "2d", "--release",
                       "--emit", "fsx-task", "--fsx-id", FS_ID]  # fmt: skip


@pytest.mark.parametrize(
    ("right", "wrong", "why"),
    [
        ("--file-system-path", "--file-system-pth", "Unknown options: --file-system-pth"),
        ("{Events=[", "{Event=[", 'Unknown parameter in S3.AutoExportPolicy: "Event"'),
        ("AutoExportPolicy={Events=[NEW,CHANGED,DELETED]}", "AutoExportPolicy=[NEW,CHANGED]",
         "Invalid type for parameter S3.AutoExportPolicy"),
        ("CHANGED", "CHANGE", "'CHANGE' not in ['NEW', 'CHANGED', 'DELETED']"),
        (FS_ID, "fs-0123", "Invalid length for parameter FileSystemId"),
        (FS_ID, "fs-0123456789ABCDEF", "!~ ^(fs-[0-9a-f]{8,})$"),
        ("/kvcache", "", "Invalid length for parameter FileSystemPath"),
    ],
)  # fmt: skip
def test_the_check_fails_a_wrong_line(kvtool: Run, right: str, wrong: str, why: str) -> None:
    """The check can fail: each mistake, put into the emitted line, is refused by the AWS CLI
    or by FSx's model, for its own reason."""
    association, _ = emitted(kvtool, "--emit", "lmcache")
    broken = [word.replace(right, wrong) for word in association]
    assert broken != association
    with pytest.raises(AssertionError, match=re.escape(why)):
        validate(*aws_request(broken))
