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

ENGINES = ("lmcache-disk", "lmcache-fs", "lmcache-gds", "sglang", "vllm", "llm-d", "kvtool")
ENGINE_NAMES = {
    "lmcache-disk": "LMCache local disk",
    "lmcache-fs": "LMCache fs (connector, MP mode)",
    "lmcache-gds": "LMCache GDS backend",
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
# SGLang's PoolName values, the whole enum (sglang 0.5.23 srt/mem_cache/hicache_storage.py:85-118;
# tests/fixtures/folders/sglang-0.5.23-pools.json is read from the wheel), longest first so
# "deepseek_v4_c1_indexer_scale" is not read as "deepseek_v4_c1"
_V4_POOLS = [
    *(f"deepseek_v4_{c}{p}" for c in ("c1", "c2", "c4") for p in ("", "_indexer",
                                                                 "_indexer_scale")),
    "deepseek_v4_c128", "deepseek_v4_c4_rope", "deepseek_v4_c128_rope", "deepseek_v4_c4_state",
    "deepseek_v4_c4_indexer_state", "deepseek_v4_c128_state",
]  # fmt: skip
SGLANG_POOLS = tuple(
    sorted(
        ["kv", "mamba", "swa", "auxiliary_swa", "indexer", *_V4_POOLS, "draft", "draft_indexer",
         "draft_swa"],
        key=len,
        reverse=True,
    )
)  # fmt: skip


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
# LMCache prints its chunk hash with f"{h:x}" (utils.py CacheEngineKey.to_string): Python's
# builtin hash, its default (v1/config.py pre_caching_hash_algorithm), is negative half the time
_SIGNED_HEX = re.compile(r"-?[0-9a-f]+")
_GDS_DATA = (".kvcache.safetensors", ".weka1")  # gds_backend.py _DATA_FILE_SUFFIX, Weka's
_GDS_TMP = re.compile(r"(?P<file>.+)\.tmp[0-9a-f]{8}")  # gds_backend.py: path + ".tmp" + 8 hex
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
        return _lmcache_fs(name[:-5], CHUNK) or _lmcache_connector(name[:-5], CHUNK)
    if name.endswith((*_GDS_DATA, ".metadata")) or (".tmp" in name and _GDS_TMP.fullmatch(name)):
        found = _lmcache_gds(folder, name)
        if found is not None:
            return found
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
    return _lmcache_fs(stem, TEMP) or _lmcache_connector(stem, TEMP)


class _Key(NamedTuple):
    """A CacheEngineKey as LMCache prints it (``to_string``)."""

    fmt: str  # "" in 0.5.x keys, which dropped it
    model: str
    world: int
    rank: int
    digest: str  # the chunk hash as printed: hex, signed
    dtype: str
    tags: tuple[str, ...]


def parse_lmcache_key(text: str) -> _Key | None:
    """``model@world@worker@hash@dtype[@layer][@tag%value...]`` (lmcache 0.5.6 ``utils.py``
    ``CacheEngineKey.to_string``), ``fmt@model@world@worker@hash@dtype[@layer][@tags]``
    (0.3.12 ``utils.py:385-388``), or the oldest ``fmt@model@world@worker@hash``; the hash is
    signed hex (Python's builtin hash, LMCache's default, is negative half the time)."""
    parts = text.split("@")

    def signed_hex(value: str) -> bool:
        return bool(_SIGNED_HEX.fullmatch(value)) and value != "-"

    for offset in (0, 1):  # 0.5.x, then 0.3.x (a leading fmt)
        if len(parts) < offset + 5:
            continue
        model, world, rank, digest, dtype = parts[offset : offset + 5]
        if not (world.isdigit() and rank.isdigit() and signed_hex(digest)):
            continue
        if dtype not in LMCACHE_DTYPES:
            continue
        rest = parts[offset + 5 :]
        layer = rest[0] if rest and rest[0].isdigit() else None
        tags = tuple(rest[1:] if layer is not None else rest)
        if all("%" in tag for tag in tags):
            fmt = parts[0] if offset else ""
            return _Key(fmt, model, int(world), int(rank), digest, dtype, tags)
    if len(parts) == 5 and parts[2].isdigit() and parts[3].isdigit() and signed_hex(parts[4]):
        # the oldest key, before dtype was added: fmt@model@world_size@worker_id@chunk_hash
        return _Key(parts[0], parts[1], int(parts[2]), int(parts[3]), parts[4], "", ())
    return None


_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def _unquote(text: str) -> str:
    """``urllib.parse.unquote`` (which the GDS backend's ``quote(key, safe="")`` undoes), kept
    here: a pure module imports nothing that reaches a network."""
    raw = _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def _lmcache_match(engine: str, kind: str, key: _Key) -> Match:
    """Every worker's shard and every layer of a layerwise key is one chunk."""
    chunk = "@".join((engine, key.fmt, key.model, str(key.world), key.digest, key.dtype,
                      *key.tags))  # fmt: skip
    return Match(
        engine, kind, key.model, key.dtype, f"world {key.world}", key.world, key.rank, chunk
    )


def _lmcache_disk(name: str) -> Match | None:
    """LocalDiskBackend: ``key.to_string().replace("/", "-") + ".pt"`` (0.5.6
    ``local_disk_backend.py:224``, 0.3.12 ``:178``)."""
    key = parse_lmcache_key(name[:-3])
    return None if key is None else _lmcache_match("lmcache-disk", CHUNK, key)


def _lmcache_connector(stem: str, kind: str) -> Match | None:
    """The in-process ``fs://`` remote connector: ``key.to_string().replace("/", "-SEP-")``
    plus ``.data``, its temporary ``with_suffix(".tmp")`` (0.5.6
    ``connector/fs_connector.py:149-167``)."""
    key = parse_lmcache_key(stem)
    if key is None:
        return None
    key = key._replace(model=key.model.replace("-SEP-", "/"))
    return _lmcache_match("lmcache-fs", kind, key)


def _lmcache_gds(folder: tuple[str, ...], name: str) -> Match | None:
    """The GDS backend: ``<str(hash)[:2]>/<str(hash)[2:4]>/<url-quoted key>`` plus
    ``.kvcache.safetensors`` (Weka: ``.weka1``), its metadata beside it with ``.metadata``,
    temporaries ``<file>.tmp<8 hex>`` (0.5.6 ``gds_backend.py:46-48, 584-600, 678``)."""
    kind = CHUNK
    temp = _GDS_TMP.fullmatch(name)
    if temp:
        kind, name = TEMP, temp.group("file")
    name = name.removesuffix(".metadata")
    suffix = next((s for s in _GDS_DATA if name.endswith(s)), None)
    if suffix is None:
        return None
    key = parse_lmcache_key(_unquote(name[: -len(suffix)]))
    if key is None or len(folder) < 2:
        return None
    decimal = str(int(key.digest, 16))  # the directories take the hash in decimal
    if (folder[-2], folder[-1]) != (decimal[:2], decimal[2:4]):
        return None
    return _lmcache_match("lmcache-gds", kind, key)


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


# keys only llm-d-kv-cache's FileMapper writes into the config.json beside its folders (since PR
# #585, 2026-05-18; llmd_fs_backend/file_mapper.py @7be76e1): the same folder layout as vLLM's
# (vLLM's names the same facts tokens_per_hash and blocks_per_file)
LLMD_CONFIG_KEYS = ("hash_block_size", "gpu_blocks_per_file")


def folder_config_engine(config: dict[str, object]) -> str:
    """Whose FileMapper wrote a ``<model>_<sha12>/config.json``: ``llm-d`` or ``vllm``."""
    return "llm-d" if any(key in config for key in LLMD_CONFIG_KEYS) else "vllm"


def vllm_description(config: dict[str, object]) -> tuple[str, str, str, int]:
    """(model, dtype, layout, world) from a FileMapper's ``config.json`` (vLLM's FS tier or
    llm-d's: model_name, dtype, tp_size, pp_size, pcp_size, dcp_size, kv_cache_groups); world 0
    where every layout reads the files. vLLM 0.33.0 writes ``"parallel_agnostic": false`` for
    every folder that is not agnostic and leaves the key out of an agnostic one, whose sizes it
    forces to 1 (file_mapper.py ``FileMapper.__init__``); an older FileMapper's tp-1 folder,
    written before the key existed, reads as agnostic too. llm-d's FileMapper (@7be76e1) never
    writes the key: an all-1 folder of its is either, and is said to be, not claimed."""

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
        if folder_config_engine(config) == "llm-d":
            parts, world = ["tp 1, or parallel-agnostic (llm-d's config does not say)"], 0
        else:
            parts, world = ["parallel-agnostic"], 0
    dtype = str(config.get("dtype", "")).removeprefix("torch.")
    return str(config.get("model_name", "")), dtype, ", ".join(parts), world


def model_matches(written: str, names: tuple[str, ...] | list[str]) -> bool:
    """Whether a model as an engine wrote it is one of ``names`` (every name the model asked
    for goes by): compared by ``model_key``; a local path (vLLM's ``model_name`` is the path or
    Hub id it was started with, never its served name) also by its last part, the name a
    model folder is given (``/models/Llama-3.1-8B`` is ``Llama-3.1-8B``)."""
    keys = {model_key(name) for name in names}
    if model_key(written) in keys:
        return True
    if written.startswith(("/", "./", "../")) and not written.endswith("/"):
        return model_key(written.rsplit("/", 1)[-1]) in keys
    return False


def model_key(name: str) -> str:
    """A model name as every engine's spelling of it compares: "meta-llama/Llama-3.1-8B",
    LMCache's "meta-llama-Llama-3.1-8B" and vLLM's "meta-llama_Llama-3.1-8B" are one."""
    return name.lower().replace("-sep-", "-").replace("/", "-").replace("_", "-")
