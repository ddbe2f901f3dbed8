"""Words a user meets: the AWS article kvtool follows is named as such, never "the brief" (a
word from kvtool's own making that no user knows), and a file a help example reads is shipped
under examples/, even where the example needs a real node to run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from kvtool.inputs.metrics import source_list
from tests.cli.test_help_examples import EXAMPLES

ROOT = Path(__file__).parents[1]
BRIEF = re.compile(r"\bbrief\b|\bbrief's\b", re.IGNORECASE)  # ("briefly" is a plain word)


def _user_facing_files() -> list[Path]:
    files = [ROOT / "README.md"]
    folders = (("docs", "*.md"), ("kvtool", "*.py"), ("profiles", "*"), ("examples", "*"),
               ("benchmarks", "*"), ("tests", "*.py"))  # fmt: skip
    for folder, pattern in folders:
        files += [p for p in sorted((ROOT / folder).rglob(pattern)) if p.is_file()]
    checks = {Path(__file__), ROOT / "tests" / "test_readme.py"}  # they test for the word
    return [p for p in files if p not in checks and "__pycache__" not in p.parts]


def test_no_text_a_user_reads_says_the_brief() -> None:
    found = []
    for path in _user_facing_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if BRIEF.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "name the AWS Storage Blog article instead:\n" + "\n".join(found)


def test_the_word_check_finds_the_brief(tmp_path: Path) -> None:
    assert BRIEF.search("placement follows the brief's rules")
    assert BRIEF.search("see shared/BRIEF.md")
    assert not BRIEF.search("T2 briefly holds more")


OUTPUTS = {"-o", "--output", "--junit", "--plot", "--log"}  # options that write, not read
FILE = re.compile(r"\.(txt|json|jsonl|yaml|yml|prom|toml|csv)$")


def _files_read(example: str) -> list[str]:
    args = shlex.split(example.split(" > ")[0])[1:]
    return [
        arg
        for before, arg in zip(["", *args], args, strict=False)
        if FILE.search(arg) and "://" not in arg and before not in OUTPUTS
    ]


@pytest.mark.parametrize("example", [e for _, e, _ in EXAMPLES if _files_read(e)])
def test_each_file_a_help_example_reads_is_shipped(example: str) -> None:
    for name in _files_read(example):
        assert name.startswith("examples/"), (example, name)
        assert (ROOT / name).is_file(), (example, name)


def test_the_hosts_example_lists_sources_as_metrics_reads_them() -> None:
    listed = source_list([], str(ROOT / "examples/metrics/hosts.txt"))
    assert len(listed) == 4
    assert "http://vllm-0:8000/metrics" in listed
