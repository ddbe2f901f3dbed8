"""``kvtool size`` and ``kvtool models`` end to end, in-process and as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]

REQUIRED_KEYS = {
    "model",
    "engine",
    "kv_dtype",
    "ctx_tokens",
    "sessions",
    "kv_bytes_per_token",
    "kv_bytes_per_session",
    "kv_bytes_total",
    "fixed_bytes_per_session",
    "layer_groups",
}


def test_size_table_for_the_brief_example(kvtool: Run) -> None:
    result = kvtool("size", "deepseek-r1", "--ctx", "200k", "--sessions", "100")
    assert result.exit_code == 0, result.stderr
    assert "deepseek-r1" in result.stdout
    assert "200,000 tokens" in result.stdout  # the resolved count is always printed
    assert "70,272 B" in result.stdout
    assert "1.41 TB (1.28 TiB)" in result.stdout
    assert "vLLM 0.33.0" in result.stdout


def test_size_json_is_a_list_even_for_one_context(kvtool: Run) -> None:
    """One shape: a list of one object per context (it was a bare object for one)."""
    result = kvtool("size", "DeepSeek-R1", "--ctx", "200k", "--sessions", "100", "--json")
    [data] = json.loads(result.stdout)["results"]
    assert data.keys() >= REQUIRED_KEYS
    assert data["ctx_tokens"] == 200_000
    assert data["kv_bytes_per_token"] == 70_272
    assert data["kv_bytes_total"] == 1_405_440_000_000
    assert data["layer_groups"][0] == {
        "kind": "mla",
        "layers": 61,
        "window": None,
        "bytes_per_token": 70_272,
        "tokens_held": 200_000,
        "bytes_per_session": 14_054_400_000,
        "fixed_bytes_per_session": 0,
        "bytes_per_rank_per_session": 14_054_400_000,
    }


def test_size_json_several_contexts_is_a_list(kvtool: Run) -> None:
    result = kvtool("size", "gpt-oss-120b", "--ctx", "1k,128K", "--json", "--engine", "formula")
    data = json.loads(result.stdout)["results"]
    assert [item["ctx_tokens"] for item in data] == [1000, 131_072]
    # a token costs all 36 layers' bytes; the 18 sliding layers stop growing past their
    # 128-token window, which the mean per token at each context shows (issue 55)
    assert data[0]["kv_bytes_per_token"] == data[1]["kv_bytes_per_token"] == 36 * 8 * 64 * 2 * 2
    assert data[1]["kv_bytes_per_session"] == 18 * 2048 * (131_072 + 128)
    assert data[1]["kv_bytes_per_token_mean"] == round(18 * 2048 * (131_072 + 128) / 131_072)


def test_size_accepts_hf_ids_any_case_and_config_paths(kvtool: Run, tmp_path: Path) -> None:
    [by_id] = json.loads(kvtool("size", "deepseek-ai/deepseek-r1", "--json").stdout)["results"]
    config = Path(__file__).parents[2] / "profiles/models/deepseek-r1/config.json"
    (tmp_path / "config.json").write_bytes(config.read_bytes())
    [by_folder] = json.loads(kvtool("size", str(tmp_path), "--json").stdout)["results"]
    [by_file] = json.loads(kvtool("size", str(tmp_path / "config.json"), "--json").stdout)[
        "results"
    ]
    assert by_id["kv_bytes_per_session"] == by_folder["kv_bytes_per_session"]
    assert by_file["kv_bytes_per_session"] == by_folder["kv_bytes_per_session"]


def test_tp_table_shows_per_rank_column(kvtool: Run) -> None:
    result = kvtool("size", "llama-3.1-70b", "--ctx", "8k", "--tp", "16", "--kv-dtype", "fp8")
    assert result.exit_code == 0
    assert "one rank" in result.stdout
    assert "replicated on 2 ranks" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["size", "deepsek-r2"], "unknown model 'deepsek-r2' (did you mean deepseek-r1"),
        (["size", "deepseek-r1", "--ctx", "0"], "--ctx must be at least 1"),
        (["size", "deepseek-r1", "--ctx", "-5"], "--ctx '-5' is not a count"),
        (["size", "deepseek-r1", "--ctx", "lots"], "--ctx 'lots' is not a count"),
        (["size", "deepseek-r1", "--sessions", "0"], "--sessions must be at least 1"),
        (["size", "deepseek-r1", "--sessions", "ten"], "--sessions 'ten' is not a count"),
        (["size", "deepseek-r1", "--kv-dtype", "fp6"], "unknown --kv-dtype 'fp6'"),
        (["size", "deepseek-r1", "--engine", "tgi"], "unknown --engine 'tgi'"),
        (["size", "llama-3.1-8b", "--tp", "3"], "--tp 3 does not divide the model's 32 attention"),
        (["size", "llama-3.2-3b", "--tp", "12"], "--tp 12 is not a multiple of the model's 8 KV"),
        (["size", "nosuchorg/nosuchmodel-xyz"], ""),
    ],
)
def test_bad_input_is_one_line_exit_2(kvtool: Run, args: list[str], message: str) -> None:
    result = kvtool(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kvtool: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_malformed_config_names_file_and_position(kvtool: Run, tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "num_hidden_layers": 32,}')
    result = kvtool("size", str(bad))
    assert result.exit_code == 2
    assert f"{bad}: malformed JSON at line 1, column 49" in result.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [  # as a hostile or broken config.json writes them (Python's json reads NaN and Infinity)
        ('"max_position_embeddings": NaN', "'max_position_embeddings' must be a positive integer"),
        ('"max_position_embeddings": -Infinity', "got -inf"),
        ('"max_position_embeddings": "131072"', "got '131072'"),
        ('"max_position_embeddings": true', "got True"),  # was read as 1 token
        ('"max_position_embeddings": 0', "got 0"),
    ],
)
def test_a_hostile_config_value_is_one_line(
    kvtool: Run, tmp_path: Path, text: str, said: str
) -> None:
    config = (Path(__file__).parents[2] / "profiles/models/llama-3.1-8b/config.json").read_text()
    assert '"max_position_embeddings": 131072' in config
    (tmp_path / "config.json").write_text(config.replace('"max_position_embeddings": 131072', text))
    result = kvtool("size", str(tmp_path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert said in result.stderr


def test_null_kv_heads_are_sized_with_a_note(kvtool: Run, tmp_path: Path) -> None:
    config = json.loads(
        (Path(__file__).parents[2] / "profiles/models/llama-3.1-8b/config.json").read_text()
    )
    config["num_key_value_heads"] = None
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = kvtool("size", str(tmp_path), "--json")
    [row] = json.loads(result.stdout)["results"]
    assert row["kv_bytes_per_token"] == 32 * 32 * 128 * 2 * 2  # 32 KV heads, as transformers
    assert any("num_key_value_heads is null" in note for note in row["notes"])


def test_config_missing_a_field_names_it(kvtool: Run, tmp_path: Path) -> None:
    config = json.loads(
        (Path(__file__).parents[2] / "profiles/models/deepseek-v3/config.json").read_text()
    )
    del config["kv_lora_rank"]
    config["kv_lora_rank"] = 512
    del config["qk_nope_head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = kvtool("size", str(tmp_path))
    assert result.exit_code == 2
    assert "needs field 'qk_nope_head_dim'" in result.stderr


def test_models_lists_every_bundled_profile(kvtool: Run) -> None:
    result = kvtool("models", "--json")
    data = json.loads(result.stdout)["results"]
    by_name = {item["name"]: item for item in data}
    assert by_name["deepseek-r1"]["kv_bytes_per_token"] == 70_272
    assert by_name["llama-3.1-405b"]["kv_bytes_per_token"] == 516_096
    assert len(data) >= 20
    table = kvtool("models").stdout
    assert "deepseek-ai/DeepSeek-R1" in table


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvtool", *args],
        capture_output=True,
        text=True,
        check=False,
        env={"NO_COLOR": "1", "COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    )


def test_python_m_kvtool_runs_and_exits_2_on_bad_input() -> None:
    good = run_module("size", "deepseek-r1", "--ctx", "200k", "--sessions", "100", "--json")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["results"][0]["kv_bytes_total"] == 1_405_440_000_000
    bad = run_module("size", "deepseek-r1", "--ctx", "zero")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr


def test_size_imports_no_heavy_packages() -> None:
    code = (
        "import sys; from kvtool.cli.app import app\n"
        "try:\n"
        "    app(['size', 'deepseek-r1', '--ctx', '200k', '--sessions', '100'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = {'torch', 'transformers', 'boto3', 'numpy', 'tomllib', 'dataclasses',"
        " 'kvtool.profiles.hardware', 'kvtool.plan.deployment', 'secrets', 'json'}"
        " & set(sys.modules)\n"
        "print(sorted(heavy), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    # tomllib, dataclasses, the planners and the json package (kvtool.files reads JSON through
    # its C scanner) each cost milliseconds of start-up (benchmarks/startup)
    assert result.stderr.strip().splitlines()[-1] == "[]"


LEAN_LINES = [
    ["deepseek-r1", "--ctx", "200k", "--sessions", "100"],
    ["llama-3.1-70b", "--ctx=8k,32k,128K", "--kv-dtype", "fp8", "--tp", "8", "-q"],
    ["llama-3.1-8b,deepseek-r1", "--ctx", "32k", "--json", "--weights-dtype", "fp8"],
    ["qwen3-next-80b-a3b", "-e", "sglang", "--state-dtype", "bf16", "--block-tokens", "64"],
    ["llama-3.1-8b", "--ctx", "2**40"],  # a mistake: the same one line
    ["llama-3.1-8b", "--max-num-batched-tokens", "4096", "--engine", "vllm", "--json"],
]


def _size_commands():  # type: ignore[no-untyped-def]
    from typer.main import get_command

    from kvtool.cli.app import build_app

    lean = get_command(build_app(["size"], argv=LEAN_LINES[0])).commands["size"]  # type: ignore[attr-defined]
    whole = get_command(build_app(["size"])).commands["size"]  # type: ignore[attr-defined]
    return lean, whole


def test_the_lean_size_command_is_the_whole_one_without_its_hidden_options() -> None:
    from kvtool.cli.size import own_options

    lean, whole = _size_commands()
    assert len(whole.params) - len(lean.params) == 24  # kvtool plan's and the old spellings
    assert [(p.name, p.opts, getattr(p, "help", None), p.default) for p in lean.params] == [
        (p.name, p.opts, getattr(p, "help", None), p.default)
        for p in whole.params
        if not getattr(p, "hidden", False)
    ]
    assert lean.help == whole.help
    assert {o for p in lean.params for o in (*p.opts, *p.secondary_opts)} - {"model"} == (
        own_options()
    )


@pytest.mark.parametrize("args", LEAN_LINES)
def test_the_lean_size_command_answers_as_the_whole_one(args: list[str]) -> None:
    from typer.testing import CliRunner

    from kvtool.cli.app import build_app
    from kvtool.cli.size import command_for

    assert command_for(args) == ("size", "size")
    env = {"NO_COLOR": "1", "COLUMNS": "100"}
    lean = CliRunner().invoke(build_app(["size"], argv=args), ["size", *args], env=env)
    whole = CliRunner().invoke(build_app(["size"]), ["size", *args], env=env)
    assert (lean.exit_code, lean.stdout, lean.stderr) == (
        whole.exit_code, whole.stdout, whole.stderr
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [[], ["--help"], ["m", "--hardware", "p5en"], ["m", "--nodes=2"], ["m", "--node", "2"],
     ["m", "--block-size", "32"], ["m", "--ctx", "-5"]],
)  # fmt: skip
def test_help_and_any_option_not_the_lean_commands_get_the_whole_one(args: list[str]) -> None:
    from kvtool.cli.size import command_for

    assert command_for(args) == ("size_forwarded", "size")


def test_the_records_on_the_size_path_are_records() -> None:
    """A typing.NamedTuple class costs about 0.1 ms more to make than a kvtool.record.Record
    (typing checks each field's annotation, namedtuple evals its constructor): 17.5 M of the
    instructions of kvtool size's start-up (benchmarks/startup). Every record class the
    modules kvtool size imports define is a Record."""
    code = (
        "import sys\n"
        "from kvtool.cli.app import build_app\n"
        "from kvtool.record import Record\n"
        "argv = ['deepseek-r1', '--ctx', '200k', '--sessions', '100']\n"
        "try:\n"
        "    build_app(['size'], argv=argv)(['size', *argv])\n"
        "except SystemExit:\n"
        "    pass\n"
        "class Probe(Record):\n"
        "    x: int\n"
        "records = Probe.__mro__[1]  # what every Record class derives from\n"
        "named = sorted(f'{name}.{k}' for name, m in list(sys.modules.items())\n"
        "    if name.startswith('kvtool.') for k, v in vars(m).items()\n"
        "    if isinstance(v, type) and issubclass(v, tuple) and hasattr(v, '_fields')\n"
        "    and v.__module__ == name and not issubclass(v, records))\n"
        "print(named, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stderr.strip().splitlines()[-1] == "[]"


def test_import_kvtool_is_lazy() -> None:
    code = "import sys, kvtool; print(sorted(m for m in sys.modules if m.startswith('kvtool.')))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
    code = "import kvtool; print(kvtool.size_kv.__module__)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "kvtool.model.kv"


def test_hybrid_config_sizes_with_the_admission_figure(kvtool: Callable[..., CliResult]) -> None:
    config = str(Path(__file__).parents[1] / "fixtures" / "models" / "jamba-v0.1.json")
    done = kvtool("size", config, "--ctx", "128K", "--json")
    assert done.exit_code == 0, done.stderr
    [data] = json.loads(done.stdout)["results"]
    kinds = {g["kind"]: g["layers"] for g in data["layer_groups"]}
    assert kinds == {"full": 4, "mamba1": 28}
    assert data["admission_bytes_per_session"] > data["kv_bytes_per_session"]
    assert data["max_num_batched_tokens"] == 8192
    assert "assumed" in data["max_num_batched_tokens_source"]
    sliding = kvtool("size", "gemma-3-27b", "--ctx", "128K", "--max-num-batched-tokens", "2048")
    assert "vLLM admits at" in sliding.stdout
    assert "--max-num-batched-tokens 2,048, --max-num-batched-tokens" in sliding.stdout


def test_unknown_hybrid_family_is_refused_in_one_line(
    kvtool: Callable[..., CliResult], tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "architectures": ["NewHybridForCausalLM"], "model_type": "new_hybrid",
        "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512,
        "mamba_d_state": 16,
    }))  # fmt: skip
    done = kvtool("size", str(config))
    assert done.exit_code == 2
    assert "vLLM 0.33.0 builds NewHybridForCausalLM (model_type 'new_hybrid')" in done.stderr
    assert "mamba_d_state" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_batched_tokens_without_vllm_has_no_effect_and_says_so(
    kvtool: Callable[..., CliResult],
) -> None:
    done = kvtool("size", "llama-3.1-8b", "--engine", "sglang", "--max-num-batched-tokens", "4096")
    assert done.exit_code == 0
    assert "--max-num-batched-tokens has no effect with --engine sglang" in done.stderr


def test_a_windowed_models_mean_bytes_per_token_is_never_zero(kvtool: Run) -> None:
    """Phi-3's layers are all sliding: the marginal figure was '0 B' beside an 812 MB
    session. The table now shows the session's bytes over its tokens."""
    done = kvtool("size", "phi-3-mini-4k", "--ctx", "4k")
    row = next(line for line in done.stdout.splitlines() if line.startswith("4,000 tokens"))
    assert row.split()[2:4] == ["202,899", "B"]  # 811,597,824 B / 4,000 tokens
    assert "B/token at ctx" not in done.stdout


def test_at_tp_8_the_one_rank_figure_is_shown(kvtool: Run) -> None:
    """R1's latent is replicated on every rank: its familiar 70,272 B/token is one rank's."""
    done = kvtool("size", "deepseek-r1", "--tp", "8", "--ctx", "128K")
    mla = next(line for line in done.stdout.splitlines() if line.startswith("mla"))
    assert "562,176 B" in mla
    assert "70,272 B" in mla


def test_a_context_no_engine_can_hold_is_refused(kvtool: Run) -> None:
    done = kvtool("size", "llama-3.1-8b", "--ctx", "99999999999999999999")
    assert done.exit_code == 2
    assert "is past any engine's context" in done.stderr


def test_slow_fan_in_keeps_its_digits() -> None:
    from kvtool.cli.render.plan import _rate

    assert (_rate(0.0123), _rate(4.567), _rate(1234.5)) == ("0.0123", "4.57", "1,234")


def test_tp_gives_one_gpu_s_admission_charge_beside_the_whole_request(
    kvtool: Callable[..., CliResult],
) -> None:
    done = kvtool("size", "gemma-3-27b", "--ctx", "128K", "--tp", "2", "--json")
    assert done.exit_code == 0, done.stderr
    [data] = json.loads(done.stdout)["results"]
    assert data["admission_bytes_per_rank_per_session"] * 2 == data["admission_bytes_per_session"]
    assert (
        sum(g["bytes_per_rank_per_session"] for g in data["layer_groups"])
        == (data["kv_bytes_per_rank_per_session"])
    )
    text = kvtool("size", "gemma-3-27b", "--ctx", "128K", "--tp", "2")
    assert "admits at, one rank" in text.stdout


# --- several models side by side --------------------------------------------------------------

COMPARED = ("llama-3.1-405b", "deepseek-r1", "qwen3-235b-a22b")


def test_several_models_share_one_table_with_weights_and_the_kv_ratio(kvtool: Run) -> None:
    result = kvtool("size", ",".join(COMPARED), "--ctx", "128K", "--sessions", "100")
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.split()
            and line.split()[0] in COMPARED}  # fmt: skip
    assert set(rows) == set(COMPARED)
    # the published counts: 405 B dense; R1 671 B with 37 B active, in FP8 (one byte each)
    assert "405.8 B" in rows["llama-3.1-405b"]
    assert "812 GB bf16" in rows["llama-3.1-405b"]
    assert "671.0 B (36.6 B)" in rows["deepseek-r1"]
    assert "671 GB fp8" in rows["deepseek-r1"]
    assert "516,096 B" in rows["llama-3.1-405b"]
    assert "70,272 B" in rows["deepseek-r1"]
    assert "7.3x" in rows["llama-3.1-405b"]  # 516,096 / 70,272 = 7.34
    assert "1.0x" in rows["deepseek-r1"]
    assert "deepseek-r1 caches 7.3x less KV per session than llama-3.1-405b" in result.stdout
    assert "note: qwen3-235b-a22b: " in result.stdout  # each model's notes, named


def test_several_models_json_is_each_models_own_record(kvtool: Run) -> None:
    """One record per model (and context), each the record its single-model run prints."""
    result = kvtool("size", ",".join(COMPARED), "--ctx", "32k,128K", "--sessions", "10", "--json")
    assert result.exit_code == 0, result.stderr
    records = json.loads(result.stdout)["results"]
    assert [(r["model"], r["ctx_tokens"]) for r in records] == [
        (m, c) for m in COMPARED for c in (32000, 131072)
    ]
    for model in COMPARED:
        alone = kvtool("size", model, "--ctx", "32k,128K", "--sessions", "10", "--json")
        assert [r for r in records if r["model"] == model] == json.loads(alone.stdout)["results"]
    r1 = next(r for r in records if r["model"] == "deepseek-r1")
    assert (r1["parameters"], r1["weights_dtype"], r1["weights_bytes"]) == (
        671_025_397_760, "fp8", 671_025_397_760,
    )  # fmt: skip


def test_several_models_with_hardware_show_nodes_and_the_tier_split(kvtool: Run) -> None:
    args = ("--ctx", "128K", "--sessions", "100", "--hardware", "p5en")
    result = kvtool("size", ",".join(COMPARED), *args)
    assert result.exit_code == 0, result.stderr
    assert "nodes, all in HBM" in result.stdout
    for model in COMPARED:  # the same plan as the model's own run
        (plan,) = json.loads(kvtool("size", model, *args, "--json").stdout)["results"]
        split = "/".join(str(t["sessions"]) for t in plan["tiers"])
        row = next(line for line in result.stdout.splitlines() if line.startswith(model + " "))
        assert row.split()[-2:] == [str(plan["plan"]["nodes_for_all_in_t1"]), split]


def test_a_model_whose_parameters_are_not_counted_is_still_sized(kvtool: Run) -> None:
    config = Path(__file__).parents[1] / "fixtures" / "models" / "deepseek-v4-flash.json"
    result = kvtool("size", f"llama-3.1-8b,{config}", "--ctx", "8k")
    assert result.exit_code == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("deepseek-v4-flash"))
    assert row.split()[1:3] == ["-", "-"]  # no parameters, no weights: not guessed
    assert "deepseek-v4-flash: kvtool does not count its parameters" in result.stdout
    records = json.loads(kvtool("size", f"llama-3.1-8b,{config}", "--json").stdout)["results"]
    assert records[1]["parameters"] is None
    assert records[1]["weights_bytes"] is None


def test_weights_dtype_changes_the_compared_weights_and_says_nothing_of_no_effect(
    kvtool: Run,
) -> None:
    result = kvtool("size", "llama-3.1-8b,qwen3-8b", "--weights-dtype", "fp8")
    assert result.exit_code == 0, result.stderr
    assert "8.03 GB fp8" in result.stdout
    assert "no effect" not in result.stderr
    alone = kvtool("size", "llama-3.1-8b", "--weights-dtype", "fp8")  # not shown: it says so
    assert "--weights-dtype has no effect without --hardware" in alone.stderr


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ("llama-3.1-8b,,deepseek-r1", (), "empty name between commas"),
        ("deepseek-r1,deepseek-r1", (), "names 'deepseek-r1' twice"),
        ("llama-3.1-8b,no-such-model", (), "unknown model 'no-such-model'"),
        ("llama-3.1-8b,deepseek-r1", ("--hardware", "p5en", "--emit", "vllm"), "one model"),
    ],
)
def test_a_bad_model_list_is_one_line_and_exit_2(
    kvtool: Run, model: str, extra: tuple[str, ...], message: str
) -> None:
    result = kvtool("size", model, *extra)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_config_path_with_a_comma_is_one_model(kvtool: Run, tmp_path: Path) -> None:
    source = Path(__file__).parents[1] / "fixtures" / "models" / "deepseek-v4-flash.json"
    odd = tmp_path / "v4,flash.json"
    odd.write_text(source.read_text())
    result = kvtool("size", str(odd), "--ctx", "8k")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("v4,flash  ")  # a file other than config.json: its stem


# --- --calibrate: the engine's measured KV pool in place of kvtool's estimate ------------------

SCRAPE = Path(__file__).parents[1] / "fixtures" / "metrics" / "vllm-0.33.0-llama-3.1-8b-t60.prom"
PLAN = ("llama-3.1-8b", "--ctx", "128K", "--sessions", "40", "--hardware", "p5", "--tp", "1")


def test_calibrate_plans_t1_with_the_engines_own_pool(kvtool: Run) -> None:
    estimate = json.loads(kvtool("size", *PLAN, "--json").stdout)["results"][0]["plan"]
    result = kvtool("size", *PLAN, "--calibrate", str(SCRAPE), "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)["results"][0]["plan"]
    # 454,896 tokens an engine (vLLM's kv_cache_size_tokens) x 131,072 B x 8 engines a node
    assert plan["kv_space_bytes_per_node"] == 454_896 * 131_072 * 8
    assert plan["kv_space_bytes_per_node"] != estimate["kv_space_bytes_per_node"]
    assert any("the engine's own pool" in note for note in plan["notes"])
    assert plan["best_layout"] is None  # a measured pool is one layout's: no others are priced
    assert "T1 is vllm's own KV pool, 454,896 tokens an engine instance" in result.stderr
    assert "hit ratio, 75.2%, is not used by the plan" in result.stderr


def test_calibrate_without_a_plan_says_it_has_no_effect(kvtool: Run) -> None:
    result = kvtool("size", "llama-3.1-8b", "--calibrate", str(SCRAPE))
    assert result.exit_code == 0
    assert "--calibrate has no effect without --hardware" in result.stderr


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("gpt-oss-20b", "has windowed or state layers"),
        ("llama-3.1-8b,qwen3-8b", "--calibrate reads one engine"),
    ],
)
def test_calibrate_refuses_what_a_token_pool_cannot_plan(
    kvtool: Run, model: str, message: str
) -> None:
    result = kvtool("size", model, "--hardware", "p5", "--calibrate", str(SCRAPE))
    assert result.exit_code == 2
    assert message in result.stderr


def test_calibrate_from_a_scrape_without_a_pool_is_refused(kvtool: Run) -> None:
    lmcache = SCRAPE.parent / "lmcache-0.5.6-t60.prom"
    result = kvtool("size", *PLAN, "--calibrate", str(lmcache))
    assert result.exit_code == 2
    assert "no single engine reports its KV pool (lmcache)" in result.stderr


# --- --cost --------------------------------------------------------------------------------------


def test_cost_prices_the_plan_and_says_the_example_is_one(kvtool: Run) -> None:
    args = ("size", "llama-3.1-405b", "--ctx", "128K", "--sessions", "100", "--hardware", "p5en")
    result = kvtool(*args, "--cost", "--json")
    assert result.exit_code == 0, result.stderr
    (record,) = json.loads(result.stdout)["results"]
    cost = record["cost"]
    assert cost["prices"]["example"] is True
    nodes = cost["lines"][0]
    assert nodes["usd_per_month"] == pytest.approx(63.30 * 730)  # the example's p5en, 1 node
    assert cost["all_in_hbm_nodes"] == record["plan"]["nodes_for_all_in_t1"] == 34
    assert cost["usd_per_session_hour"] == pytest.approx(
        cost["usd_per_month"] / (100 * 730), abs=1e-4
    )
    text = kvtool(*args, "--cost")
    assert "note: EXAMPLE prices" in text.stdout
    assert "per served session-hour" in text.stdout


def test_cost_options_without_their_command_say_so(kvtool: Run) -> None:
    result = kvtool("size", "llama-3.1-8b", "--cost")
    assert "--cost has no effect without --hardware" in result.stderr
    result = kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--prices", "x.toml")
    assert "--prices has no effect without --cost" in result.stderr


def test_a_users_prices_file_is_used_and_a_missing_price_is_named(
    kvtool: Run, tmp_path: Path
) -> None:
    mine = tmp_path / "prices.toml"
    mine.write_text('[prices]\nsource = "our contract"\ndate = "2026-11"\nregion = "us-west-2"\n'
                    '[prices.instance_hour]\n"p5.48xlarge" = 40.0\n')  # fmt: skip
    args = ("size", "llama-3.1-8b", "--hardware", "p5", "--cost", "--prices", str(mine))
    result = kvtool(*args, "--json")
    assert result.exit_code == 0, result.stderr
    assert (
        json.loads(result.stdout)["results"][0]["cost"]["lines"][0]["usd_per_month"] == 40.0 * 730
    )
    result = kvtool("size", "llama-3.1-8b", "--hardware", "p5en", "--cost", "--prices", str(mine))
    assert result.exit_code == 0, result.stderr  # the plan prints; the cost names what lacks
    assert 'no total: instance_hour."p5en.48xlarge" missing from our contract' in " ".join(
        result.stdout.split()
    )


# --- --pp and the layout holding the most sessions ---------------------------------------------


def test_the_plan_names_the_layout_that_holds_the_most_and_pp_runs_it(kvtool: Run) -> None:
    args = ("size", "llama-3.1-405b", "--ctx", "200k", "--sessions", "100",
            "--hardware", "trn3-ultraserver")  # fmt: skip
    text = kvtool(*args)  # no --tp/--pp: the plan takes the layout that holds the most
    assert text.exit_code == 0, text.stderr
    assert "tp 8 x pp 18: weights" in text.stdout
    assert "--tp/--pp not given: tp 8 x pp 18, 1 engine instance(s) per node, the layout that" \
        " holds the most sessions of 200,000 tokens in T1 (159 a node)" in text.stdout  # fmt: skip
    assert "all in HBM: 1 node(s) of this type (fits now)" in text.stdout
    (record,) = json.loads(kvtool(*args, "--json").stdout)["results"]
    assert (record["plan"]["tp"], record["plan"]["pp"]) == (8, 18)
    assert record["plan"]["fits_in_t1"] is True
    best = record["plan"]["best_layout"]
    assert (best["tp"], best["pp"], best["engine_instances_per_node"]) == (8, 18, 1)
    # the user's --tp rules: tp 8 alone runs 18 engines, and the plan names the better layout
    given = kvtool(*args, "--tp", "8")
    assert "most in T1: tp 8 x pp 18, 1 engine (1 copy of the weights) a node hold" in given.stdout
    assert "(--tp 8 --pp 18)" in given.stdout
    (alone,) = json.loads(kvtool(*args, "--tp", "8", "--json").stdout)["results"]
    assert (alone["plan"]["tp"], alone["plan"]["pp"], alone["plan"]["fits_in_t1"]) == (8, 1, False)


def test_pp_without_a_plan_says_so_and_emit_runs_it(kvtool: Run) -> None:
    assert (
        "--pp has no effect without --hardware"
        in kvtool("size", "llama-3.1-8b", "--pp", "2").stderr
    )
    result = kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--pp", "2", "--emit", "vllm")
    assert result.exit_code == 0, result.stderr  # (issue 55: it was refused)
    assert "--pipeline-parallel-size 2" in result.stdout


def test_dp_attention_in_the_plan_and_refused_where_it_cannot_run(kvtool: Run) -> None:
    args = ("size", "deepseek-r1", "--ctx", "128K", "--sessions", "100", "--hardware", "p5en")
    (record,) = json.loads(kvtool(*args, "--dp-attention", "--json").stdout)["results"]
    assert record["plan"]["dp_attention"] is True
    assert record["plan"]["sessions_per_node_in_t1"] > 5 * 4  # 4 at tp 8 without it
    assert kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--dp-attention").exit_code == 2
    emitted = kvtool(*args, "--dp-attention", "--emit", "vllm")
    assert emitted.exit_code == 2
    assert "vLLM 0.33.0 has no data-parallel attention inside one tensor-parallel" in (
        emitted.stderr
    )


def test_a_comparison_counts_one_copy_and_shows_the_hbm_replicas_beside_it(kvtool: Run) -> None:
    """The article counts unique KV per token: DeepSeek R1's 70 KB against Llama 3.1 70B's
    328 KB, 4.7x less. At tp 8 vLLM keeps R1's latent on all 8 ranks (562 KB a token in HBM);
    that is shown beside the one copy, never in its place, so the ratio does not flip."""
    args = ("plan", "llama-3.1-70b,deepseek-r1", "--ctx", "128k", "--hardware", "p5en",
            "--nodes", "2", "--tp", "8")  # fmt: skip
    result = kvtool(*args)
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()
            if line.split() and line.split()[0] in ("llama-3.1-70b", "deepseek-r1")}  # fmt: skip
    assert "70,272 B      1.0x  562,176 B (x8)" in rows["deepseek-r1"]
    assert "327,680 B      4.7x       327,680 B" in rows["llama-3.1-70b"]
    assert "deepseek-r1 caches 4.7x less KV per session than llama-3.1-70b (one copy each" in (
        result.stdout
    )
    assert "note: deepseek-r1: at tp 8 the engine keeps 8x one copy of the KV in HBM" in (
        result.stdout
    )
    plain = kvtool("size", "llama-3.1-70b,deepseek-r1", "--ctx", "128k").stdout
    assert "in HBM/token" not in plain  # tp 1: nothing replicated, no column


def test_engine_hf_follows_the_transformers_installed_and_says_so(kvtool: Run) -> None:
    """5.25.0 caches Falcon-40B's 8 KV heads, 5.24.0 broadcast them to 128: the answer must be
    the installed release's, named in a note; ``hf==5.24`` asks for the other."""
    from kvtool.model.engines import _release
    from kvtool.probe.host import installed_version

    installed = installed_version("transformers")
    result = kvtool("size", "falcon-40b", "--engine", "hf", "--ctx", "2k", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)["results"][0]
    notes = " ".join(doc["notes"])
    if installed is None:
        assert "transformers is not installed here" in notes
    else:
        assert f"sized as transformers {installed} (installed here)" in notes
    broadcast = installed is not None and (5, 15) <= (_release(installed) or (0,)) < (5, 25)
    assert doc["kv_bytes_per_token"] == 60 * 8 * 64 * 2 * 2 * (16 if broadcast else 1)
    older = kvtool("size", "falcon-40b", "--engine", "hf==5.24", "--ctx", "2k")
    assert older.exit_code == 0, older.stderr
    assert "1,966,080 B" in older.stdout
    assert "transformers 5.24 holds it (asked for)" in " ".join(older.stdout.split())
    bad = kvtool("size", "falcon-40b", "--engine", "hf==abc")
    assert bad.exit_code == 2
    assert "not a transformers release" in bad.stderr


@pytest.mark.parametrize("command", ["size", "plan"])
def test_a_context_with_thousands_separators_says_commas_separate_contexts(
    kvtool: Run, command: str
) -> None:
    """``--ctx 200,000`` said "--ctx must be at least 1, got '000'" (issue 54)."""
    done = kvtool(command, "deepseek-r1", "--ctx", "200,000", "--hardware", "p5en")
    assert done.exit_code == 2
    assert done.stderr == (
        "kvtool: error: --ctx '200,000': commas separate values (--ctx 8k,32k is two), not"
        " thousands (write 200000 or 200k)\n"
    )
    assert done.stdout == ""
