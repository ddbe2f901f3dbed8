"""The places where kvtool used to give a confident wrong answer without a word.

Each test fails on the behaviour the "Trustworthy answers" issue describes: a context past the
model's limit, configs without ``model_type``, tensor-parallel sizes vLLM refuses, ``--emit``
ignoring the longest context and ``--tp``, options that did nothing, the documented workload
file, binary files, and small things a new user hits.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvtool.cli.app import app
from kvtool.errors import ConfigError
from kvtool.model.config import spec_from_config
from kvtool.model.spec import AttentionLayers
from tests.conftest import CliResult
from tests.unit.model.test_config import bundled_config, bundled_spec

Run = Callable[..., CliResult]
ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(
    ("model", "ctx", "limit"), [("deepseek-r1", "200k", "163,840"), ("gemma-2-9b", "128K", "8,192")]
)
def test_context_past_the_models_limit_gets_a_note(
    kvtool: Run, model: str, ctx: str, limit: str
) -> None:
    text = kvtool("size", model, "--ctx", ctx).stdout
    assert f"past the model's limit of {limit}" in text
    [data] = json.loads(kvtool("size", model, "--ctx", ctx, "--json").stdout)["results"]
    assert any(f"limit of {limit}" in note for note in data["notes"])
    assert data["max_context_tokens"] == int(limit.replace(",", ""))


def test_context_within_the_limit_has_no_such_note(kvtool: Run) -> None:
    assert "past the model's limit" not in kvtool("size", "deepseek-r1", "--ctx", "128K").stdout


def without(config: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in keys}


def kv_heads(config: dict[str, Any]) -> set[int]:
    spec = spec_from_config(config, name="x")
    return {g.num_kv_heads for g in spec.groups if isinstance(g, AttentionLayers)}


def test_gemma2_without_model_type_is_read_from_its_architectures() -> None:
    config = without(bundled_config("gemma-2-9b"), "model_type")
    spec = spec_from_config(config, name="g")
    assert spec.groups == bundled_spec("gemma-2-9b").groups  # the full layers are kept
    assert any("read as gemma2 (Gemma2ForCausalLM)" in note for note in spec.notes)


def test_gemma2_without_model_type_or_architectures_is_refused_not_4x_too_small() -> None:
    config = without(bundled_config("gemma-2-9b"), "model_type", "architectures")
    with pytest.raises(ConfigError, match="names neither model_type nor architectures"):
        spec_from_config(config, name="g")


def test_falcon_without_model_type_honours_multi_query() -> None:
    """Today's 71x error: 71 KV heads instead of Falcon-7B's one."""
    config = without(bundled_config("falcon-7b"), "model_type", "architectures")
    assert kv_heads(config) == {1}
    spec = spec_from_config(config, name="f")
    assert any("Falcon's rules because it has multi_query" in note for note in spec.notes)


def test_falcon_40b_without_model_type_keeps_its_kv_heads() -> None:
    assert kv_heads(without(bundled_config("falcon-40b"), "model_type")) == {8}


def test_unknown_architecture_is_refused_by_name_not_sized_as_attention() -> None:
    config = {**without(bundled_config("llama-3.1-8b"), "model_type"), "architectures": ["Foo"]}
    with pytest.raises(ConfigError, match=r"has not checked how vLLM 0\.33\.0 builds Foo,"):
        spec_from_config(config, name="foo")


@pytest.mark.parametrize(
    ("model", "tp", "message"),
    [
        ("falcon-7b", "2", "does not divide the model's 71 attention heads"),
        ("deepseek-r1", "3", "does not divide the model's 128 attention heads"),
    ],
)
def test_tp_vllm_refuses_is_refused(kvtool: Run, model: str, tp: str, message: str) -> None:
    result = kvtool("size", model, "--tp", tp)
    assert result.exit_code == 2
    assert message in result.stderr


def emit(kvtool: Run, *args: str) -> list[str]:
    result = kvtool(
        "size", "llama-3.1-70b", "--sessions", "64", "--hardware", "p5en", "--emit", "vllm", *args
    )
    assert result.exit_code == 0, result.stderr
    return shlex.split(result.stdout.splitlines()[-1])


def test_emit_uses_the_longest_context_and_the_given_tp(kvtool: Run) -> None:
    words = emit(kvtool, "--ctx", "128k,8k")
    assert words[words.index("--max-model-len") + 1] == "128000"
    words = emit(kvtool, "--ctx", "8k", "--tp", "4")
    assert words[words.index("--tensor-parallel-size") + 1] == "4"


def test_a_t3_dir_cannot_inject_keys_into_the_emitted_config(kvtool: Run) -> None:
    """--t3-dir with a line break wrote 'remote_url: "lm://evil:1"' into LMCache's config."""
    result = kvtool(
        "size", "llama-3.1-8b", "--hardware", "p5en", "--emit", "lmcache",
        "--t3-dir", '/fsx/kv\nremote_url: "lm://evil:1"',
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--t3-dir '/fsx/kv\\nremote_url" in result.stderr
    assert "holds a control character" in result.stderr
    assert "remote_url" not in result.stdout


def test_emit_with_json_is_refused_clearly(kvtool: Run) -> None:
    result = kvtool("size", "llama-3.1-8b", "--hardware", "p5en", "--emit", "vllm", "--json")
    assert result.exit_code == 2
    assert "--emit prints an engine configuration, not JSON" in result.stderr


@pytest.mark.parametrize(
    ("args", "note"),
    [
        (["--nodes", "4"], "--nodes has no effect without --hardware"),
        (["--fsx-capacity", "4800GiB"], "--fsx-capacity has no effect without --hardware"),
        (["--hardware", "p5en", "--posture", "eager"], "--posture has no effect without --emit"),
    ],
)
def test_options_without_effect_say_so(kvtool: Run, args: list[str], note: str) -> None:
    result = kvtool("size", "llama-3.1-8b", *args)
    assert result.exit_code == 0
    assert f"kvtool: note: {note}" in result.stderr


def test_the_workload_file_in_docs_runs_as_written(kvtool: Run, tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "planning.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", doc, re.DOTALL)
    assert block is not None
    workload = tmp_path / "workload.yaml"
    workload.write_text(block.group(1))
    result = kvtool("advise", str(workload), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    text = block.group(1)
    if "tp:" in text:  # every key the schema accepts is used
        assert f"tp: {data['tp']}" in text
    if "weights_dtype:" in text:
        assert f"weights_dtype: {data['weights_dtype']}" in text


def test_advise_uses_tp_and_weights_dtype(kvtool: Run) -> None:
    base = ["advise", "--model", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "32k", "--json"]
    a = json.loads(kvtool(*base, "--tp", "4", "--weights-dtype", "fp8").stdout)
    b = json.loads(kvtool(*base, "--tp", "8").stdout)
    assert (a["tp"], a["weights_dtype"], b["tp"], b["weights_dtype"]) == (4, "fp8", 8, "bf16")


@pytest.mark.parametrize(
    "args",
    [
        ["advise", "{file}"],
        ["size", "llama-3.1-8b", "--hardware", "{file}"],
        ["size", "llama-3.1-8b", "--hardware", "p5en", "--t3-storage", "{file}"],
        ["size", "llama-3.1-8b", "--hardware", "p5en", "--t4-storage", "{file}"],
        ["size", "{file}"],
    ],
)
def test_binary_files_get_one_line_and_exit_2(kvtool: Run, tmp_path: Path, args: list[str]) -> None:
    garbage = tmp_path / "garbage.toml"
    garbage.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary")
    result = kvtool(*(a.replace("{file}", str(garbage)) for a in args))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "is a binary file" in result.stderr


def test_a_folder_or_a_bare_config_json_is_named_after_its_folder(
    kvtool: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(bundled_config("llama-3.1-8b")))
    monkeypatch.chdir(folder)
    for ref in (".", "config.json"):
        assert (
            json.loads(kvtool("size", ref, "--json").stdout)["results"][0]["model"] == "my-finetune"
        )


def test_version(kvtool: Run) -> None:
    from kvtool import __version__

    result = kvtool("--version")
    assert result.exit_code == 0
    assert result.stdout == f"kvtool {__version__}\n"


def test_one_session_is_singular(kvtool: Run) -> None:
    out = kvtool("size", "llama-3.1-8b", "--ctx", "8k").stdout
    assert "total (1 session)" in out
    advice = kvtool("advise", "--model", "llama-3.1-8b", "--hardware", "p5en").stdout
    assert ", 1 session (peak" in advice
    assert "1 sessions" not in advice


def help_examples(columns: int = 200) -> list[tuple[str, list[str]]]:
    """Every ``kvtool ...`` example line of every command's help at ``columns``, continuations
    joined."""
    from typer.testing import CliRunner

    found = []
    commands = [[c.name or ""] for c in app.registered_commands]
    for group in app.registered_groups:  # kvtool engine smoke, ...
        assert group.typer_instance is not None
        commands += [
            [group.name or "", c.name or ""] for c in group.typer_instance.registered_commands
        ]
    for names in commands:
        text = CliRunner().invoke(app, [*names, "--help"], env={"COLUMNS": str(columns)})
        body = text.stdout.partition("Example")[2].partition("╭")[0].splitlines()[1:]
        for above, line in itertools.pairwise(body):  # rich wrapped no example onto a line
            if above.startswith("   ") and above.strip() and line.strip():  # of prose's indent
                assert line.startswith("   "), (names, columns, above, line)
        logical, current = [], ""  # as a shell reads pasted lines: a line ending " \\" goes on
        for raw in (line for line in body if line.startswith("   ") or not line.strip()):
            current = f"{current} {raw.strip()}".strip()
            if current.endswith("\\"):
                current = current[:-1].rstrip()
                continue
            logical.append(current)
            current = ""
        for line in filter(None, logical):
            if line.startswith("# "):
                continue  # a comment on its own line, before its example
            # anything else is a command a paste runs alone: it must be a whole example
            assert line.startswith("kvtool "), (names, columns, line)
            command = line.partition("  #")[0]
            found.append((" ".join(names), shlex.split(command)[1:]))
    return found


@pytest.mark.parametrize("columns", [200, 80])
def test_help_examples_paste_and_run(columns: int) -> None:
    """Each example, copied from the help as a terminal shows it (continuations joined), is
    the very command tests/cli/test_help_examples.py runs to exit 0 (or to the 1 of a check
    that finds problems), or one marked as needing a node: pasting one runs what was tested.
    At 80 columns rich broke examples mid-command (issue 54): they are cut at words into
    continuation lines instead, and still paste."""
    from tests.cli.test_help_examples import EXAMPLES

    tested = {
        (command, tuple(shlex.split(example.split(" > ")[0])[1:]))  # as the runner splits it
        for command, example, _ in EXAMPLES
    }
    examples = help_examples(columns)
    assert len(examples) >= 8
    for command, argv in examples:
        argv = argv[: argv.index(">")] if ">" in argv else argv  # a redirection is the shell's
        assert (command, tuple(argv)) in tested, (command, argv)


def test_root_help_promises_only_commands_that_exist(kvtool: Run) -> None:
    text = kvtool("--help").stdout
    description = text.split("Options")[0].lower()
    registered = {c.name for c in app.registered_commands}
    registered |= {g.name for g in app.registered_groups}
    for promise, command in (("benchmark", "bench"), ("replay", "engine"), ("checklist", "check")):
        if command not in registered:
            assert promise not in description, promise
    panel = text.split("Commands")[1]
    listed = {m.group(1) for m in re.finditer(r"^│ (\w+)\s", panel, re.MULTILINE)}
    assert listed == registered


def test_a_usage_mistake_is_one_line_like_every_other_error() -> None:
    """No framed box for an unknown option or a missing value: one line, exit 2."""
    import subprocess
    import sys

    for argv in (["size", "llama-3.1-8b", "--nope"], ["size", "llama-3.1-8b", "--ctx"],
                 ["nosuch"]):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "kvtool", *argv], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("kvtool: error: "), done.stderr
        assert done.stderr.count("\n") == 1
        assert "╭" not in done.stderr


def test_names_resolve_as_users_type_them(kvtool: Run) -> None:
    [data] = json.loads(kvtool("size", "meta-llama/Llama-3.1-8B-Instruct", "--json").stdout)[
        "results"
    ]
    assert data["model"] == "llama-3.1-8b"  # offline: the published Instruct id is bundled
    h100 = kvtool("size", "llama-3.1-8b", "--hardware", "h100")
    assert "did you mean p5.48xlarge?" in h100.stderr
    missing = kvtool("size", "./no/such/config.json")
    assert missing.stderr.startswith("kvtool: error: ./no/such/config.json: no such file")


def test_every_help_example_names_a_file_that_exists() -> None:
    import re

    from kvtool.cli.check import check

    for path in re.findall(r"kvtool check (\S+\.yaml)", check.__doc__ or ""):
        assert (ROOT / path).is_file(), path


def test_one_of_a_thing_is_singular_in_advice_and_replays(kvtool: Run, tmp_path: Path) -> None:
    advice = kvtool("advise", "--model", "llama-3.1-8b", "--hardware", "p5en", "--sessions", "1")
    assert "(1 node would hold" in advice.stdout
    trace = tmp_path / "trace.jsonl"
    good = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}'
    trace.write_text(good + "\nnot json\n")
    replayed = kvtool("engine", "replay", str(trace), "--skip-bad")
    assert "1 bad line skipped" in replayed.stdout
