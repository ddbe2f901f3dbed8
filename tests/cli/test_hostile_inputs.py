"""The hostile-input corpus: every command, every option that takes a value and every input
file, fed what a careless script or a hostile customer would give it. The rule for each case:
no traceback, no hang, an exit status kvtool documents, and a value that means nothing is
refused (exit 2, one ``kvtool: error:`` line) unless ``ACCEPTED`` says why the command may take
it. Options are found by walking the command tree, so a new option is in the corpus the day it
is added.

Three parts: every option x ``HOSTILE`` value (and each positional argument); every input slot
x ``FILE_KINDS`` (deep nesting, endless and special files, wrong top-level types, a path past
the system's limit); and hypothesis over option text and over the example files, one leaf
replaced at a time. Each case runs in-process in its own folder, with a SIGALRM guard."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvtool.cli.app import build_app
from tests.mutation import WRONG, leaves, replaced

ROOT = Path(__file__).parents[2]
HEAD = ROOT / "tests" / "fixtures" / "traces" / "conversation_trace_head.jsonl"
SNAPSHOT = ROOT / "examples" / "doctor-snapshot"
FOLDER = ROOT / "tests" / "fixtures" / "folders" / "tiny"  # two SGLang HiCacheFile pages
CHECK = ROOT / "examples" / "check"
PLAN = CHECK / "plan-pass.yaml"
HANG_S = 60
EXAMPLES_N = int(os.environ.get("KVTOOL_HOSTILE_EXAMPLES", "150"))  # more: a longer hunt

HOSTILE = {
    "nan": "nan",
    "inf": "inf",
    "-inf": "-inf",
    "negative": "-1",
    "zero": "0",
    "5,000 digits": "9" * 5000,
    "1e30": "1e30",
    "tiny": "1e-300",
    "empty": "",
    "a word": "abc",
    "newline": "\n",
    "lone surrogate": "\udcff",
}

SCRAPE = Path(__file__).parents[1] / "fixtures" / "metrics" / "vllm-0.33.0-llama-3.1-8b-t60.prom"
# each command as run by the corpus (in its own empty folder): the options come on top
BASES: dict[str, list[str]] = {
    "size": ["size", "llama-3.1-8b"],
    "plan": ["plan", "llama-3.1-8b", "--hardware", "p5en"],
    "advise": ["advise", "-m", "llama-3.1-8b", "--hardware", "p5en"],
    "doctor": ["doctor", "--snapshot", str(SNAPSHOT), "/mnt/lustre/kvcache"],
    "check": ["check", str(PLAN)],
    "bench": ["bench", "--tier", "t3", "--t3-dir", "t3", "--duration", "1", "--size", "1MiB"],
    "capacity": [
        "capacity",
        "--t3-dir",
        "t3",
        "--model",
        "llama-3.2-1b",
        "--ctx",
        "1k",
        "--sessions",
        "1",
        "--duration",
        "1",
        "--no-fio-check",
    ],
    "engine smoke": ["engine", "smoke", "--chunk-tokens", "1", "--sessions", "3", "--chunks", "2"],
    "engine replay": ["engine", "replay", str(HEAD), "--t1", "1M"],
    "engine sweep": ["engine", "sweep", str(HEAD), "--t1", "1M,2M", "-j", "1"],
    "engine gen": ["engine", "gen", "--requests", "20", "-o", "g.jsonl"],
    "inspect": ["inspect", str(FOLDER)],
    # a dry run: the fixture folder stays as it is
    "gc": ["gc", str(FOLDER), "--max-age", "30d", "--dry-run"],
    "metrics": ["metrics", str(SCRAPE), "--model", "llama-3.1-8b", "--hardware", "p5", "--tp", "1"],
}
# options left out, and why: they would reach the network, or name a file the base needs
SKIPPED = {
    ("bench", "--hosts"): "fio servers by host name: a word would be looked up on the network",
    ("bench", "--t4-url"): "base runs t3 only: the URL is checked by tests/unit/engine",
}

# (command, option) -> the hostile values it may take, and why; exit 0 or 1 is expected then
TIER = {"inf": "unbounded", "zero": "the tier off"}
# plain names, and a name with a byte that is not UTF-8 (argv's lone surrogate): Linux allows it
PATHS = {"nan", "inf", "-inf", "negative", "zero", "1e30", "tiny", "a word", "lone surrogate"}
ACCEPTED: dict[tuple[str, str], set[str]] = {
    **{(c, o): set(TIER) for c in ("engine replay", "engine sweep") for o in ("--t2", "--t3")},
    ("engine replay", "--t1"): set(TIER),
    ("engine replay", "--t4"): set(TIER),
    ("engine sweep", "--t4"): set(TIER),
    # a positive number of seconds; 1e30 never demotes (the error suggests 1e9 for that)
    **{
        (c, o): {"tiny", "1e30"}
        for c in ("engine replay", "engine sweep")
        for o in ("--t2-idle", "--t3-idle")
    },
    ("engine sweep", "--t1"): set(TIER),
    ("engine gen", "--seed"): {"negative", "zero"},  # any whole number seeds the generator
    ("engine gen", "--arrival-rate"): {"tiny"},
    ("engine gen", "--turns"): {"tiny"},
    ("engine gen", "--think"): {"tiny"},
    ("engine gen", "--rag-share"): {"zero", "tiny"},  # a share in [0, 1]
    ("engine gen", "--output"): PATHS,  # a new file of that name
    ("advise", "--shared-prefix"): {"zero", "tiny"},
    ("advise", "--idle"): {"zero"},  # 0 is read as 0s, with a note; 1e-300 is no duration
    ("doctor", "--junit"): PATHS,
    ("check", "--junit"): PATHS,
    ("engine replay", "--plot"): set(),  # a name without .png/.svg is refused
    ("doctor", "--capture"): set(),  # with --snapshot: refused
    # a model name is any text: one no layout here is of is said so (inspect), or leaves
    # nothing in scope (gc); an empty one or a line break is refused
    **{(c, "--model"): set(HOSTILE) - {"empty", "newline"} for c in ("inspect", "gc")},
    ("gc", "--log"): PATHS,  # a new file of that name
    ("gc", "--max-size"): {"zero"},  # nothing may stay
    # a bare 0 is no time in any unit (issue 55): no grace, and every chunk is past age 0
    ("gc", "--grace"): {"zero"},
    ("gc", "--max-age"): {"zero"},
}
# options that have no effect in their command's base: any value is taken, with a note saying so
NOTED = {
    ("plan", "--t3-dir"): "--t3-dir has no effect without --emit",
    ("plan", "--prices"): "--prices has no effect without --cost",
    **{("advise", o): f"{o} has no effect without --cost" for o in ("--prices", "--region")},
}  # fmt: skip


class Hang(Exception):
    """A case ran past ``HANG_S``."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"no answer in {HANG_S} s")


def invoke(args: list[str]) -> tuple[int, str]:
    """``kvtool ARGS`` in-process: (exit status, stderr). A traceback fails the test (the
    exception propagates); so does a hang."""
    runner = CliRunner()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        result = runner.invoke(
            build_app(),
            args,
            env={"NO_COLOR": "1", "COLUMNS": "100", "HF_HUB_OFFLINE": "1",
                 "AWS_EC2_METADATA_DISABLED": "true"},
            catch_exceptions=False,
        )  # fmt: skip
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return result.exit_code, result.stderr


def _commands() -> Iterator[tuple[str, Any]]:
    import typer.main

    def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, (*path, name))
        else:
            yield " ".join(path), command

    yield from walk(typer.main.get_command(build_app()), ())


def option_cases() -> list[tuple[str, str]]:
    """(command, option) for every option that takes a value, of every command with a base."""
    cases = []
    for name, command in _commands():
        if name not in BASES:
            continue
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag or param.hidden:
                continue
            option = max(param.opts, key=len)
            if (name, option) not in SKIPPED:
                cases.append((name, option))
    return cases


OPTIONS = option_cases()
CASES = [(c, o, v) for c, o in OPTIONS for v in HOSTILE]


def test_the_corpus_covers_every_command_and_option() -> None:
    names = {name for name, _ in _commands()}
    assert names - set(BASES) == {"models", "hardware"}  # they take no values
    assert len(OPTIONS) >= 120
    assert len(CASES) == len(OPTIONS) * len(HOSTILE)
    stale = {key for key in (*ACCEPTED, *NOTED) if key not in set(OPTIONS)}
    assert not stale, f"ACCEPTED names options that no longer exist: {stale}"


def _judge(command: str, option: str, label: str, code: int, stderr: str) -> None:
    assert "Traceback" not in stderr
    if (command, option) in NOTED:
        assert code == 0, stderr
        assert NOTED[command, option] in stderr
        return
    if label in ACCEPTED.get((command, option), set()):
        assert code in (0, 1), stderr
        return
    assert code == 2, f"{command} {option} {label!r}: exit {code}, accepted silently"
    assert "kvtool: error:" in stderr or "Invalid value" in stderr or "Error" in stderr, stderr


@pytest.mark.parametrize(
    ("command", "option", "label"), CASES, ids=[f"{c} {o} {v}" for c, o, v in CASES]
)
def test_a_hostile_option_value_is_refused_in_one_line(
    command: str, option: str, label: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    (tmp_path / "t3").mkdir()
    code, stderr = invoke([*BASES[command], option, HOSTILE[label]])
    _judge(command, option, label, code, stderr)


# --- positional arguments ------------------------------------------------------------------------

ARGUMENTS = {  # the base with its positional argument replaced by "{}"
    "size MODEL": ["size", "{}"],
    "advise WORKLOAD": ["advise", "{}"],
    "check PLAN": ["check", "{}"],
    "doctor PATH": ["doctor", "--snapshot", str(SNAPSHOT), "{}"],
    "engine replay TRACE": ["engine", "replay", "{}", "--t1", "1M"],
    "engine sweep TRACE": ["engine", "sweep", "{}", "--t1", "1M,2M", "-j", "1"],
    "inspect DIR": ["inspect", "{}"],
    "gc DIR": ["gc", "{}", "--max-age", "1d", "--dry-run"],
}
ARGUMENT_CASES = [(a, v) for a in ARGUMENTS for v in HOSTILE]


@pytest.mark.parametrize(
    ("argument", "label"), ARGUMENT_CASES, ids=[f"{a} {v}" for a, v in ARGUMENT_CASES]
)
def test_a_hostile_argument_is_refused_in_one_line(
    argument: str, label: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [HOSTILE[label] if a == "{}" else a for a in ARGUMENTS[argument]]
    code, stderr = invoke(args)
    assert "Traceback" not in stderr
    # doctor reads a snapshot: any path is a string it looks up in the recorded mounts, but
    # an empty one (the current folder) is refused
    looked_up = argument == "doctor PATH" and label != "empty"
    assert code == 2 or (looked_up and code in (0, 1)), stderr


# --- input files ------------------------------------------------------------------------------


def _deep_json(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _deep_object(path: Path) -> None:
    path.write_text('{"a":' * 50_000 + "1" + "}" * 50_000)


def _deep_yaml(path: Path) -> None:
    path.write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _huge(path: Path) -> None:
    with path.open("wb") as f:  # sparse: 65 MiB of zeros on no disk
        f.truncate(65 * 2**20)


FILE_KINDS: dict[str, Callable[[Path], None]] = {
    "nested 100,000 deep": _deep_json,
    "objects 50,000 deep": _deep_object,
    "YAML 50,000 deep": _deep_yaml,
    "a FIFO": _fifo,
    "65 MiB of zeros": _huge,
    "a folder": lambda p: p.mkdir(),
    "empty": lambda p: p.write_text(""),
    "a list": lambda p: p.write_text("[1, 2]"),
    "a string": lambda p: p.write_text('"x"'),
    "a number": lambda p: p.write_text("1"),
    "null": lambda p: p.write_text("null"),
    "binary": lambda p: p.write_bytes(bytes(range(256)) * 8),
}
SPECIAL = {"/dev/zero": Path("/dev/zero"), "a path past the limit": Path("/x" * 3000)}

SLOTS = {  # where a file goes: the arguments around it ("{}")
    "size MODEL (a config)": ["size", "{}"],
    "plan --bench": ["plan", "llama-3.1-8b", "--hardware", "p5en", "--bench", "{}"],
    "plan --hardware (a profile)": ["plan", "llama-3.1-8b", "--hardware", "{}"],
    "advise WORKLOAD": ["advise", "{}"],
    "check PLAN": ["check", "{}"],
    "doctor --merge": ["doctor", "--merge", "{}", str(CHECK / "doctor-node-b.json")],
    "engine replay TRACE": ["engine", "replay", "{}", "--t1", "1M"],
    "metrics SOURCE": ["metrics", "{}"],
    "metrics --from": ["metrics", "--from", "{}"],
    "plan --calibrate": ["plan", "llama-3.1-8b", "--hardware", "p5", "--calibrate", "{}"],
    "plan --prices": ["plan", "llama-3.1-8b", "--hardware", "p5", "--cost", "--prices", "{}"],
}
FILE_CASES = [(s, k) for s in SLOTS for k in (*FILE_KINDS, *SPECIAL)]


@pytest.mark.parametrize(("slot", "kind"), FILE_CASES, ids=[f"{s}: {k}" for s, k in FILE_CASES])
def test_a_hostile_input_file_is_refused_in_one_line(
    slot: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    suffix = ".toml" if "hardware" in slot else ".yaml" if "YAML" in kind else ".json"
    if kind in SPECIAL:
        path = SPECIAL[kind]
    else:
        path = tmp_path / f"input{suffix}"
        FILE_KINDS[kind](path)
    args = [str(path) if a == "{}" else a for a in SLOTS[slot]]
    code, stderr = invoke(args)
    assert code == 2, (slot, kind, stderr)
    assert stderr.startswith("kvtool: error:"), stderr
    assert stderr.count("\n") == 1, stderr


@pytest.mark.parametrize("kind", [*FILE_KINDS, *SPECIAL])
def test_a_hostile_file_in_a_doctor_snapshot_is_refused_in_one_line(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots come from customers: each recorded observation may be anything."""
    import shutil

    monkeypatch.chdir(tmp_path)
    snapshot = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, snapshot)
    target = snapshot / "aws_fsx.json"
    target.unlink()
    if kind in SPECIAL:
        if kind == "a path past the limit":
            pytest.skip("a snapshot's names are kvtool's own")
        target.symlink_to(SPECIAL[kind])
    else:
        FILE_KINDS[kind](target)
    code, stderr = invoke(["doctor", "--snapshot", str(snapshot), "/mnt/lustre/kvcache"])
    assert code == 2, stderr
    assert stderr.startswith("kvtool: error:"), stderr


# --- hypothesis: any text, any example file with one leaf replaced ------------------------------

TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12
) | st.sampled_from(list(HOSTILE.values()))
QUICK = [  # (command's base, option): fast to run, so many examples fit
    (["size", "llama-3.1-8b"], "--ctx"),
    (["size", "llama-3.1-8b"], "--sessions"),
    (["plan", "llama-3.1-8b", "--hardware", "p5en"], "--fsx-capacity"),
    (["size", "llama-3.1-8b"], "--block-tokens"),
    (["advise", "-m", "llama-3.1-8b", "--hardware", "p5en"], "--peak-to-mean"),
    (["advise", "-m", "llama-3.1-8b", "--hardware", "p5en"], "--shared-prefix"),
    (["engine", "gen", "--requests", "5", "-o", "g.jsonl"], "--turns"),
    (["engine", "gen", "--requests", "5", "-o", "g.jsonl"], "--system-tokens"),
]


@settings(
    max_examples=EXAMPLES_N,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=st.sampled_from(QUICK), text=TEXT)
def test_any_option_text_ends_in_a_documented_exit(
    case: tuple[list[str], str], text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    base, option = case
    code, stderr = invoke([*base, option, text])
    assert code in (0, 1, 2)
    assert "Traceback" not in stderr


EXAMPLES = {  # file -> the command that reads it ("{}")
    "bench-t3.json": ["size", "llama-3.1-8b", "--hardware", "p5en", "--bench", "{}"],
    "doctor-node-a.json": ["doctor", "--merge", "{}", str(CHECK / "doctor-node-b.json")],
    "plan-pass.yaml": ["check", "{}"],
}


@settings(
    max_examples=EXAMPLES_N,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_an_example_file_with_any_leaf_replaced_ends_in_a_documented_exit(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    name = data.draw(st.sampled_from(sorted(EXAMPLES)))
    source = CHECK / name
    text = source.read_text()
    example = yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text)
    path = data.draw(st.sampled_from(list(leaves(example))))
    mutated = replaced(example, path, data.draw(WRONG))
    target = tmp_path / name
    if name.endswith(".yaml"):
        # the plan names its evidence by relative path: keep them beside it
        for other in CHECK.iterdir():
            if other.is_dir():  # the plan's t3_dir
                shutil.copytree(other, tmp_path / other.name, dirs_exist_ok=True)
            elif other.name != name:
                (tmp_path / other.name).write_bytes(other.read_bytes())
        target.write_text(json.dumps(mutated, allow_nan=True))  # JSON is YAML
    else:
        target.write_text(json.dumps(mutated, allow_nan=True))
    code, stderr = invoke([str(target) if a == "{}" else a for a in EXAMPLES[name]])
    assert code in (0, 1, 2), stderr
    assert "Traceback" not in stderr


# --- what the corpus still found (the issue "Nothing lost on any fault path", section 2) -------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
)


def _one_clear_line(code: int, stderr: str, match: str) -> None:
    assert code == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert match in lines[0], lines[0]


@pytest.mark.parametrize("command", ["advise", "check"])
def test_a_yaml_alias_bomb_is_refused_before_it_is_built(command: str, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("model: llama-3.1-8b\nhardware: p5en\n" + ALIAS_BOMB)
    start = time.monotonic()
    code, stderr = invoke([command, str(bomb)])
    assert time.monotonic() - start < 10
    _one_clear_line(code, stderr, "its YAML aliases (*name) expand past 1,000,000 nodes")


@pytest.mark.parametrize("command", ["advise", "check"])
def test_a_key_given_twice_is_refused_not_the_last_taken(command: str, tmp_path: Path) -> None:
    """``nodes: 8`` then ``nodes: 9999`` was read as 9999 nodes, silently (issue 53)."""
    plan = tmp_path / "plan.yaml"
    text = PLAN.read_text()
    plan.write_text(text + "nodes: 9999\n")
    code, stderr = invoke([command, str(plan)])
    first = text.splitlines().index("nodes: 8") + 1
    last = len(text.splitlines()) + 1
    _one_clear_line(code, stderr, f"the key 'nodes' is given twice in one mapping (lines {first}"
                    f" and {last})")  # fmt: skip


EMPTY_PATHS = {  # each a path that, empty, would be the current folder
    "doctor PATH": (["doctor", "", "--no-aws"], "PATH is empty"),
    "doctor --capture": (["doctor", ".", "--no-aws", "--capture", ""], "--capture is empty"),
    "doctor --snapshot": (["doctor", "--snapshot", ""], "--snapshot is empty"),
    "doctor --merge": (["doctor", "--merge", ""], "a --merge report is empty"),
    "inspect DIR": (["inspect", ""], "DIR is empty"),
    "gc DIR": (["gc", "", "--max-age", "1d"], "DIR is empty"),
    "engine smoke --t3-dir": (["engine", "smoke", "--t3-dir", ""], "--t3-dir is empty"),
    "engine replay --real": (["engine", "replay", str(HEAD), "--t1", "1M", "--real", ""],
                             "--real is empty"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(EMPTY_PATHS))
def test_an_empty_path_is_refused_never_the_current_folder(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``doctor ""`` checked the current folder (and ``--capture ""`` wrote into it)."""
    monkeypatch.chdir(tmp_path)
    args, message = EMPTY_PATHS[case]
    code, stderr = invoke(args)
    _one_clear_line(code, stderr, f"kvtool: error: {message} (give a path)")
    assert not any(tmp_path.iterdir())


def test_a_long_model_list_is_never_a_file_name() -> None:
    """300 names separated by commas were looked up as one file: 'File name too long'."""
    names = ",".join(f"model-{i}" for i in range(300))
    code, stderr = invoke(["size", names])
    _one_clear_line(code, stderr, "unknown model 'model-0'")
    code, stderr = invoke(["size", ",".join(["llama-3.1-8b"] * 300)])
    _one_clear_line(code, stderr, "MODEL names 'llama-3.1-8b' twice")
    code, stderr = invoke(["size", "llama-3.1-8b,org/" + "x" * 300])  # past the Hub's 96
    _one_clear_line(code, stderr, "is no Hugging Face repo id, nor a bundled model")


def test_a_real_replay_block_past_the_memory_here_is_refused(tmp_path: Path) -> None:
    code, stderr = invoke(
        ["engine", "replay", str(HEAD), "--real", str(tmp_path / "t3"), "--block-bytes", "10TiB"]
    )
    _one_clear_line(code, stderr, "of memory available here")


def test_nested_and_overflowing_files_are_one_line(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snapshot)
    (snapshot / "path.json").write_text("[" * 100_000 + "]" * 100_000)
    code, stderr = invoke(["doctor", "--snapshot", str(snapshot)])
    _one_clear_line(code, stderr, "is not a kvtool doctor --capture folder")
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    code, stderr = invoke(["plan", "llama-3.1-8b", "--hardware", "p5", "--cost", "--prices",
                           str(deep)])  # fmt: skip
    _one_clear_line(code, stderr, "nested too deeply")
    example = (ROOT / "profiles" / "prices").glob("*.toml")
    huge = tmp_path / "huge.toml"
    text = next(example).read_text()
    section = "[prices.instance_hour]"
    huge.write_text(text.replace(section, section + "\nhuge = 1e308", 1))
    code, stderr = invoke(["plan", "llama-3.1-8b", "--hardware", "p5", "--cost", "--prices",
                           str(huge)])  # fmt: skip
    _one_clear_line(code, stderr, "is past any AWS price")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda r: r.update(findings=["PASS"]), "finding 1 is not an object"),
        (lambda r: r["findings"][0].update(status="GREAT"), "status 'GREAT' is not PASS"),
        (lambda r: r.update(node=["n"]), "its node is not text"),
        (lambda r: r.update(summary="ok"), "its summary is not counts"),
        (lambda r: r["findings"][0].pop("id"), "has no id"),
    ],
)
def test_a_doctor_report_of_the_wrong_shape_is_refused_by_merge(
    tmp_path: Path, change: Callable[[dict], object], match: str
) -> None:
    report = json.loads((CHECK / "doctor-node-a.json").read_text())
    change(report)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(report))
    code, stderr = invoke(["doctor", "--merge", str(bad), str(CHECK / "doctor-node-b.json")])
    _one_clear_line(code, stderr, match)
