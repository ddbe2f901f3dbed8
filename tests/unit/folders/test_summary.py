import time

from kvtool.folders.summary import AGES, Group, Summary, _merge, age_bucket, last_use
from kvtool.folders.walk import Seen, Walk


def _seen(folder, name, size=100, used=0.0):
    return Seen(tuple(folder), name, size, size, used, used, 1)


def test_last_use_follows_the_mount():
    s = Seen((), "f", 1, 1, atime=200.0, mtime=100.0, ino=1)
    assert last_use(s, "relatime") == 200.0
    assert last_use(s, "noatime") == 100.0
    assert last_use(s._replace(atime=50.0), "strictatime") == 100.0


def test_age_buckets():
    assert [age_bucket(x) for x in (0, 3599, 3600, 86400 * 2, 86400 * 8, 86400 * 31)] == [
        0,
        0,
        1,
        2,
        3,
        4,
    ]
    assert len(AGES) == 5


def test_groups_ages_temporaries_and_unknown():
    now = 10_000_000.0
    key = "a" * 64
    s = Summary(now=now, mode="relatime")
    s.add(_seen((), f"{key}_m-x_0_2.bin", 10, now - 60))
    s.add(_seen((), f"{key}_m-x_1_2.bin", 20, now - 2 * 86400))
    s.add(_seen((), f"{'b' * 64}_m-y_0_1.bin", 5, now - 60))
    s.add(_seen((), f".{'c' * 32}.tmp", 7, now - 30))
    s.add(_seen((), "README", 3, now))
    s.finish(model="m/x", world=2)
    groups = {g.model: g for g in s.groups.values()}
    x, y = groups["m-x"], groups["m-y"]
    assert (x.files, x.bytes, x.ranks, x.world) == (2, 30, {0, 1}, 2)
    assert x.ages == [10, 0, 20, 0, 0]
    assert x.oldest == now - 2 * 86400
    assert x.newest == now - 60
    assert x.orphan == ""
    assert y.orphan == "another model"
    assert (s.temp_files, s.temp_bytes, s.unknown_files, s.unknown_examples) == (
        1,
        7,
        1,
        ["README"],
    )
    assert (s.chunk_files, s.chunk_bytes) == (3, 35)


def test_another_world_size_is_an_orphan_but_mla_is_not():
    s = Summary(now=0.0, mode="relatime")
    s.add(_seen((), f"{'a' * 64}_m-x_0_4.bin"))
    s.add(_seen((), f"{'a' * 64}_m-x.bin"))  # MLA: one copy for every TP size
    s.finish(world=8)
    orphans = {g.layout: g.orphan for g in s.groups.values()}
    assert orphans == {
        "tp 4": "another world size (4 ranks, not 8)",
        "MLA (one copy for every TP rank)": "",
    }


def test_vllm_groups_are_named_from_their_config(tmp_path, made):
    made(tmp_path, "vllm-0.33.0.json")
    from kvtool.folders.inspect import inspect_folder

    found = inspect_folder(tmp_path, mode="relatime")
    s = found.summary
    by_model = {g.model: g for g in s.groups.values()}
    assert set(by_model) == {"meta-llama/Llama-3.1-8B-Instruct", "google/gemma-3-27b-it"}
    assert by_model["meta-llama/Llama-3.1-8B-Instruct"].layout == "tp 2"
    assert by_model["meta-llama/Llama-3.1-8B-Instruct"].ranks == {0, 1}
    assert (s.config_files, s.temp_files) == (2, 1)
    # a rank folder whose config.json is gone is still counted, and says so
    (tmp_path / "google_gemma-3-27b-it_dd9fa7979fb5" / "config.json").unlink()
    again = Summary(now=time.time(), mode="relatime").add_all(Walk(tmp_path)).finish()
    assert any(g.layout == "no config.json beside it" for g in again.groups.values())


def test_a_parallel_agnostic_vllm_folder_is_read_by_every_layout():
    from kvtool.folders.layouts import vllm_description

    # FileMapper.get_run_config() of vllm 0.33.0 (file_mapper.py), run from the wheel:
    # parallel_agnostic=True forces the sizes to 1 and leaves the key out
    agnostic = {"model_name": "m/x", "tokens_per_hash": 16, "blocks_per_file": 1, "tp_size": 1,
                "pp_size": 1, "pcp_size": 1, "dcp_size": 1, "dtype": "torch.bfloat16",
                "kv_cache_groups": [], "inference_engine": "vllm"}  # fmt: skip
    tp8 = {**agnostic, "tp_size": 8, "parallel_agnostic": False}
    tp1 = {**agnostic, "parallel_agnostic": False}
    assert vllm_description(agnostic) == ("m/x", "bfloat16", "parallel-agnostic", 0)
    assert vllm_description(tp8) == ("m/x", "bfloat16", "tp 8", 8)
    assert vllm_description(tp1) == ("m/x", "bfloat16", "tp 1", 1)
    s = Summary(now=0.0, mode="relatime")
    for base, config in (("m_x_aaaaaaaaaaaa", agnostic), ("m_x_bbbbbbbbbbbb", tp8)):
        s.configs[base] = config
        s.add(_seen((f"{base}_r0", "abc", "de_g0"), "abcde" + "0" * 59 + ".bin"))
    s.finish(world=4)
    orphans = {g.layout: g.orphan for g in s.groups.values()}
    assert orphans == {"parallel-agnostic": "", "tp 8": "another world size (8 ranks, not 4)"}


def test_lmcache_world_1_files_of_an_mla_model_are_every_worlds():
    """LMCache saves an MLA latent from the first rank only, keyed world 1 (0.5.6
    v1/token_database.py:238-243): a TP-8 deployment of that model reads them."""
    from kvtool.folders.summary import Group, orphan

    mla_files = Group("lmcache-disk", "deepseek-ai-DeepSeek-V3", "bfloat16", "world 1", 1)
    names = ("deepseek-ai/DeepSeek-V3",)
    assert orphan(mla_files, names, 8, mla=True) == ""
    assert orphan(mla_files, names, 8, mla=False) == "another world size (1 ranks, not 8)"
    gqa = Group("lmcache-disk", "deepseek-ai-DeepSeek-V3", "bfloat16", "world 4", 4)
    assert orphan(gqa, names, 8, mla=True) == "another world size (4 ranks, not 8)"
    sglang = Group("sglang", "deepseek-ai-DeepSeek-V3", "", "tp 1", 1)
    assert orphan(sglang, names, 8, mla=True).startswith("another world size")
    assert orphan(mla_files, ("other/model",), 8, mla=True) == "another model"


def test_hsm_states_are_summed_per_group_and_merged_with_it():
    """inspect's HSM columns: files and bytes per state kind, per group, kept when groups
    merge (vLLM's rank folders); a file whose state was not read is in no column."""
    s = Summary(now=1000.0, mode="strictatime")
    s.add(_seen((), f"{'a' * 64}_m-x_0_2.bin", size=10), "archived")
    s.add(_seen((), f"{'a' * 64}_m-x_1_2.bin", size=20), "released")
    s.add(_seen((), f"{'b' * 64}_m-x_0_2.bin", size=40), "released")
    s.add(_seen((), f"{'b' * 64}_m-x_1_2.bin", size=80))
    s.finish()
    (group,) = s.groups.values()
    assert group.hsm == {"archived": [1, 10], "released": [2, 60]}
    assert group.as_dict()["hsm"] == {
        "archived": {"files": 1, "bytes": 10},
        "released": {"files": 2, "bytes": 60},
    }
    other = Group("sglang", "m-x", "", "tp 2", 2, hsm={"released": [1, 5], "dirty": [1, 7]})
    _merge(group, other)
    assert group.hsm == {"archived": [1, 10], "released": [3, 65], "dirty": [1, 7]}
    plain = Summary(now=1000.0, mode="strictatime")
    plain.add(_seen((), f"{'a' * 64}_m-x_0_2.bin"))
    assert next(iter(plain.finish().groups.values())).as_dict()["hsm"] is None
