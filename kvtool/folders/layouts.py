"""The engines' KV folder layouts: which engine wrote a file, for which model, dtype and
parallel layout, and which files make up one chunk. Pure: names in, records out.

Each rule is the engine's own naming, read from its released code:

* ``lmcache-disk``: LMCache's LocalDiskBackend (in-process mode), ``<key>.pt`` with the key's
  "/" written as "-" (lmcache 0.5.6 ``v1/storage_backend/local_disk_backend.py:224``); the key
  is ``model@world_size@worker_id@chunk_hash@dtype[@layer][@tag%value...]``
  (``lmcache/utils.py`` ``CacheEngineKey.to_string``); keys before dtype was added were
  ``fmt@model@world_size@worker_id@chunk_hash``. Written in place, no temporary.
* ``lmcache-fs``: LMCache's MP-mode file L2 adapters, ``fs_native`` (C++ ``LMCacheFSClient``)
  and ``fs``: ``model@0x<kv_rank>@<group>@<chunk_hash>[@salt].data`` with "/" written as
  "-SEP-"; kv_rank packs ``world_size<<24 | rank<<16 | local_world<<8 | local_rank``
  (``v1/distributed/l2_adapters/fs_l2_adapter.py`` ``_object_key_to_filename``); the
  temporary is the name with ``.tmp`` (or in ``relative_tmp_dir``).
* ``sglang``: HiCacheFile, one flat folder of
  ``<key>[.<pool>]_<model>[_<tp_rank>_<tp_size>][_<pp_size>_<pp_rank>][_cp<r>_<n>]
  [_tp<n>_dcp<r>_<n>_page<n>].bin``, the TP part left out for MLA KV, "/" in the model
  written as "-"; temporaries ``.<uuid hex>.tmp`` (sglang 0.5.23
  ``srt/mem_cache/hicache_storage.py`` ``HiCacheFile``).
* ``vllm``: the FS offload tier, ``<root>/<model>_<sha256[:12]>/config.json`` and
  ``<root>/<model>_<sha256[:12]>_r<rank>/<hhh>/<hh>_g<group>/<hash>.bin``, "/" in the model
  written as "_"; temporaries ``<file>_<n>.tmp`` (vllm 0.33.0 ``v1/kv_offload/file_mapper.py``,
  ``tiering/fs/io.py``).
* ``llm-d``: the llm-d FS backend, ``<root>/<model>/block_size_<b>_blocks_per_file_<n>/
  tp_<tp>_pp_size_<pp>_pcp_size_<pcp>/rank_<r>/<dtype>/<hhh>/<hh>/<hash>.bin``; temporaries
  ``<file>_<n>.tmp`` (llm-d-kv-cache ``llmd_fs_backend/file_mapper.py`` @04ef2db,
  ``csrc/storage/backends/fs_io/file_io.cpp``).
* ``kvtool``: kvtool's own T3, ``ab/cd/<key>.kv``, temporaries ``.<key>.<pid>.<hex>.tmp``,
  damaged chunks moved to ``quarantine/`` (``kvtool/engine/chunkfile.py``, ``mediums.py``).

A chunk that spans several files (every TP rank's shard, every KV cache group, every layer of
a layerwise LMCache key, SGLang's extra pools) has one ``chunk`` id: they are removed together
or not at all.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

# what a file is
CHUNK = "chunk"
TEMP = "temp"  # an in-flight temporary: never removed, never counted as cached
CONFIG = "config"  # an engine's own description of its folder: never removed

ENGINES = ("lmcache-disk", "lmcache-fs", "sglang", "vllm", "llm-d", "kvtool")
ENGINE_NAMES = {
    "lmcache-disk": "LMCache local disk",
    "lmcache-fs": "LMCache fs / fs_native (MP mode)",
    "sglang": "SGLang HiCacheFile",
    "vllm": "vLLM FS offload",
    "llm-d": "llm-d FS backend",
    "kvtool": "kvtool T3",
}

# torch dtypes as LMCache's TORCH_DTYPE_TO_STR_DTYPE names them (lmcache/utils.py)
_DTYPE_NAMES = "half bfloat16 float double int8 uint8 int16 int32 int64 bool"
LMCACHE_DTYPES = frozenset(
    [*_DTYPE_NAMES.split(" "), "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz"]
)
# SGLang's PoolName values (sglang 0.5.23 srt/mem_cache/hicache_storage.py), longest first so
# "deepseek_v4_c1_indexer_scale" is not read as "deepseek_v4_c1"
_V4_POOLS = [
    f"deepseek_v4_{c}{p}" for c in ("c1", "c2") for p in ("", "_indexer", "_indexer_scale")
]
SGLANG_POOLS = tuple(
    sorted(["kv", "mamba", "swa", "auxiliary_swa", "indexer", *_V4_POOLS], key=len, reverse=True)
)


class Match(NamedTuple):
    """What one file is, as its engine named it."""

    engine: str  # one of ENGINES
    kind: str  # CHUNK, TEMP or CONFIG
    model: str  # as the engine wrote it ("" where the name does not carry it)
    dtype: str  # "" where the name does not carry it
    layout: str  # the parallel layout every rank shares, e.g. "tp 8" ("" when not named)
    world: int  # ranks in that layout (0 when not named, or when every layout reads it: MLA)
    rank: int  # this file's rank (-1 when not named)
    chunk: str  # files with one chunk id are one chunk: removed together or not at all
    base: str = ""  # vLLM: the folder whose config.json describes this file


_HEX = re.compile(r"[0-9a-f]+")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ENGINE_TMP = re.compile(r"(?P<file>.+)_\d+\.tmp")  # vLLM's and llm-d's "<file>_<n>.tmp"
_SGLANG_TMP = re.compile(r"\.[0-9a-f]{32}\.tmp")
_KVTOOL_TMP = re.compile(r"\.(?P<key>[0-9a-f]{64})\.\d+\.[0-9a-f]+\.tmp")
_SGLANG = re.compile(r"(?P<key>[0-9a-f]{64})(?P<rest>[._].*)\.bin")
_SGLANG_DCP = re.compile(r"_tp(\d+)_dcp(\d+)_(\d+)_page(\d+)$")
_SGLANG_CP = re.compile(r"_cp(\d+)_(\d+)$")
_SGLANG_FOUR = re.compile(r"_(\d+)_(\d+)_(\d+)_(\d+)$")
_SGLANG_TWO = re.compile(r"_(\d+)_(\d+)$")
_VLLM_RANK = re.compile(r"(?P<base>.+_[0-9a-f]{12})_r(?P<rank>\d+)")
_VLLM_BASE = re.compile(r".+_[0-9a-f]{12}")
_VLLM_GROUP = re.compile(r"(?P<hh>[0-9a-f]{2})_g(?P<group>\d+)")
_LLMD_BLOCK = re.compile(r"block_size_(?P<block>\d+)_blocks_per_file_(?P<per_file>\d+)")
_LLMD_TP = re.compile(r"tp_(?P<tp>\d+)_pp_size_(?P<pp>\d+)_pcp_size_(?P<pcp>\d+)")
_LLMD_RANK = re.compile(r"rank_(?P<rank>\d+)")


def _is_hex(text: str, length: int = 0) -> bool:
    return bool(text) and (not length or len(text) == length) and bool(_HEX.fullmatch(text))


def classify(folder: tuple[str, ...], name: str) -> Match | None:
    """What the file ``name`` in ``folder`` (its path below the folder being read, as parts)
    is, or None for a name no known layout writes."""
    if name.endswith(".pt"):
        return _lmcache_disk(name)
    if name.endswith(".data"):
        return _lmcache_fs(name[:-5], CHUNK)
    if name.endswith(".bin"):
        deep = _deep(folder)
        if deep is not None:
            return _deep_file(deep, name, CHUNK)
        return _sglang(name)
    if name.endswith(".kv"):
        return _kvtool(folder, name)
    if name == "config.json" and folder and _VLLM_BASE.fullmatch(folder[-1]):
        return Match("vllm", CONFIG, "", "", "", 0, -1, "", "/".join(folder))
    if name.endswith(".tmp"):
        return _temporary(folder, name)
    if folder and folder[-1] == "quarantine" and ".kv." in name:
        key = name.split(".", 1)[0]
        if _is_hex(key, 64):
            return Match("kvtool", CHUNK, "", "", "", 0, -1, f"kvtool-q:{name}")
    return None


def _temporary(folder: tuple[str, ...], name: str) -> Match | None:
    engine_tmp = _ENGINE_TMP.fullmatch(name)
    if engine_tmp:
        inner = engine_tmp.group("file")
        if inner.endswith(".bin"):
            deep = _deep(folder)
            if deep is not None:
                found = _deep_file(deep, inner, TEMP)
                if found is not None:
                    return found
        if inner.startswith(".o_direct_probe") and folder and _VLLM_BASE.fullmatch(folder[-1]):
            return Match("vllm", TEMP, "", "", "", 0, -1, "", "/".join(folder))
    if _SGLANG_TMP.fullmatch(name):
        return Match("sglang", TEMP, "", "", "", 0, -1, "")
    if _KVTOOL_TMP.fullmatch(name):
        return Match("kvtool", TEMP, "", "", "", 0, -1, "")
    stem = name[:-4]
    if stem.endswith(".data"):
        stem = stem[:-5]
    return _lmcache_fs(stem, TEMP)


def _lmcache_disk(name: str) -> Match | None:
    parts = name[:-3].split("@")
    new = len(parts) >= 5 and parts[1].isdigit() and parts[2].isdigit() and _is_hex(parts[3])
    if new and parts[4] in LMCACHE_DTYPES:
        model, world, rank, digest, dtype = parts[0], int(parts[1]), int(parts[2]), *parts[3:5]
        rest = parts[5:]
        layer = rest[0] if rest and rest[0].isdigit() else None
        tags = rest[1:] if layer is not None else rest
        if all("%" in tag for tag in tags):
            # every layer of a layerwise key is one chunk, and so is every worker's shard
            chunk = "@".join(("lmcache-disk", model, str(world), digest, dtype, *tags))
            return Match("lmcache-disk", CHUNK, model, dtype, f"world {world}", world, rank, chunk)
    if len(parts) == 5 and parts[2].isdigit() and parts[3].isdigit() and _is_hex(parts[4]):
        # the older key, before dtype was added: fmt@model@world_size@worker_id@chunk_hash
        fmt, model, world, rank, digest = parts[0], parts[1], int(parts[2]), int(parts[3]), parts[4]
        chunk = "@".join(("lmcache-disk", fmt, model, str(world), digest))
        return Match("lmcache-disk", CHUNK, model, "", f"world {world}", world, rank, chunk)
    return None


def _lmcache_fs(stem: str, kind: str) -> Match | None:
    parts = stem.split("@")
    if len(parts) not in (4, 5):
        return None
    safe_model, kv_rank, group, digest = parts[:4]
    if not (
        len(kv_rank) == 10
        and kv_rank.startswith("0x")
        and _is_hex(kv_rank[2:])
        and _is_hex(group)
        and _is_hex(digest)
    ):
        return None
    packed = int(kv_rank, 16)
    world, rank = packed >> 24 & 0xFF, packed >> 16 & 0xFF
    model = safe_model.replace("-SEP-", "/")
    salt = parts[4] if len(parts) == 5 else ""
    chunk = "@".join(("lmcache-fs", model, digest, salt))
    return Match("lmcache-fs", kind, model, "", f"world {world}", world, rank, chunk)


def _sglang(name: str) -> Match | None:
    found = _SGLANG.fullmatch(name)
    if not found:
        return None
    key, rest = found.group("key"), found.group("rest")
    if rest.startswith("."):
        for pool in SGLANG_POOLS:
            if rest.startswith(f".{pool}_"):
                rest = rest[len(pool) + 1 :]
                break
        else:
            return None
    rest = rest[1:]  # the "_" before the model
    parts: list[str] = []
    tp = tp_rank = 0
    pp = 1
    dcp = _SGLANG_DCP.search(rest)
    if dcp:
        parts.append(f"dcp {dcp.group(3)}")
        rest = rest[: dcp.start()]
    cp = _SGLANG_CP.search(rest)
    if cp:
        parts.append(f"cp {cp.group(2)}")
        rest = rest[: cp.start()]
    four = _SGLANG_FOUR.search(rest)
    two = _SGLANG_TWO.search(rest)
    if four and int(four.group(1)) < int(four.group(2)) and int(four.group(3)) > int(four.group(4)):
        tp_rank, tp, pp = int(four.group(1)), int(four.group(2)), int(four.group(3))
        rest = rest[: four.start()]
    elif two and int(two.group(1)) < int(two.group(2)):  # _<tp_rank>_<tp_size>
        tp_rank, tp = int(two.group(1)), int(two.group(2))
        rest = rest[: two.start()]
    elif two and int(two.group(1)) > int(two.group(2)):  # MLA: _<pp_size>_<pp_rank>
        pp = int(two.group(1))
        rest = rest[: two.start()]
    if not rest:
        return None
    layout = ", ".join(
        [f"tp {tp}" if tp else "MLA (one copy for every TP rank)"]
        + ([f"pp {pp}"] if pp > 1 else [])
        + parts[::-1]
    )
    world = tp * pp if tp else 0
    return Match(
        "sglang", CHUNK, rest, "", layout, world, tp_rank if tp else -1, f"sglang:{rest}:{key}"
    )


class _Deep(NamedTuple):
    """What a folder path says for the nested layouts (vLLM's and llm-d's)."""

    engine: str
    model: str
    dtype: str
    layout: str
    world: int
    rank: int
    prefix: str  # the chunk id's prefix: the layout every rank shares
    fan: str  # the hex digits the file's hash must start with
    base: str


@functools.lru_cache(maxsize=65536)
def _deep(folder: tuple[str, ...]) -> _Deep | None:
    """The nested layout ``folder`` belongs to, cached: a folder holds many files."""
    if len(folder) >= 3:
        rank_dir, d1, d2 = folder[-3:]
        vllm = _VLLM_RANK.fullmatch(rank_dir)
        group = _VLLM_GROUP.fullmatch(d2)
        if vllm and group and _is_hex(d1, 3):
            base = "/".join((*folder[:-3], vllm.group("base")))
            return _Deep(
                "vllm",
                "",
                "",
                "",
                0,
                int(vllm.group("rank")),
                f"vllm:{base}",
                d1 + group.group("hh"),
                base,
            )
    if len(folder) >= 6:
        block, tp_dir, rank_dir, dtype, d1, d2 = folder[-6:]
        b, t, r = (
            _LLMD_BLOCK.fullmatch(block),
            _LLMD_TP.fullmatch(tp_dir),
            _LLMD_RANK.fullmatch(rank_dir),
        )
        if b and t and r and _is_hex(d1, 3) and _is_hex(d2, 2):
            model = "/".join(folder[:-6])
            tp, pp, pcp = int(t.group("tp")), int(t.group("pp")), int(t.group("pcp"))
            layout = (
                f"tp {tp}" + (f", pp {pp}" if pp > 1 else "") + (f", pcp {pcp}" if pcp > 1 else "")
            )
            layout += f", block {b.group('block')} x {b.group('per_file')} per file"
            prefix = "llm-d:" + "/".join((*folder[:-6], block, tp_dir, dtype))
            return _Deep(
                "llm-d",
                model,
                dtype,
                layout,
                tp * pp * pcp,
                int(r.group("rank")),
                prefix,
                d1 + d2,
                "",
            )
    return None


def _deep_file(deep: _Deep, name: str, kind: str) -> Match | None:
    digest = name[:-4]
    if not (_is_hex(digest) and digest.startswith(deep.fan)):
        return None
    return Match(
        deep.engine,
        kind,
        deep.model,
        deep.dtype,
        deep.layout,
        deep.world,
        deep.rank,
        f"{deep.prefix}:{digest}",
        deep.base,
    )


def _kvtool(folder: tuple[str, ...], name: str) -> Match | None:
    key = name[:-3]
    if (
        len(folder) >= 2
        and _HEX64.fullmatch(key)
        and folder[-2] == key[:2]
        and folder[-1] == key[2:4]
    ):
        return Match("kvtool", CHUNK, "", "", "", 0, -1, f"kvtool:{key}")
    return None


def vllm_description(config: dict[str, object]) -> tuple[str, str, str, int]:
    """(model, dtype, layout, world) from a vLLM FS tier's ``config.json`` (its FileMapper's
    fields: model_name, dtype, tp_size, pp_size, pcp_size, dcp_size, kv_cache_groups); world
    0 for a parallel-agnostic folder, which every layout reads. vLLM 0.33.0 writes
    ``"parallel_agnostic": false`` for every other folder and leaves the key out of an agnostic
    one, whose sizes it forces to 1 (file_mapper.py ``FileMapper.__init__``); an older
    FileMapper's tp-1 folder, written before the key existed, reads as agnostic too."""

    def number(key: str) -> int:
        value = config.get(key, 1)
        return value if isinstance(value, int) and value > 0 else 1

    tp, pp, pcp, dcp = (number(k) for k in ("tp_size", "pp_size", "pcp_size", "dcp_size"))
    groups = config.get("kv_cache_groups")
    parts = [f"tp {tp}"] + [
        f"{n} {v}" for n, v in (("pp", pp), ("pcp", pcp), ("dcp", dcp)) if v > 1
    ]
    if isinstance(groups, list) and len(groups) > 1:
        parts.append(f"{len(groups)} KV cache groups")
    world = tp * pp * pcp
    if "parallel_agnostic" not in config and world == dcp == 1:
        parts, world = ["parallel-agnostic"], 0
    dtype = str(config.get("dtype", "")).removeprefix("torch.")
    return str(config.get("model_name", "")), dtype, ", ".join(parts), world


def model_key(name: str) -> str:
    """A model name as every engine's spelling of it compares: "meta-llama/Llama-3.1-8B",
    LMCache's "meta-llama-Llama-3.1-8B" and vLLM's "meta-llama_Llama-3.1-8B" are one."""
    return name.lower().replace("-sep-", "-").replace("/", "-").replace("_", "-")
