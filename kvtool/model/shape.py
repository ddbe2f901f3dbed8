"""A model's KV under one engine's rules, one element format and one tensor-parallel size. Pure.

``KvShape`` is what every command means by "the model's KV": ``kvtool size`` prices sessions
with it, ``bench``, ``doctor`` and ``engine smoke`` size their chunk files with it, and ``engine
replay`` sizes its blocks with it. The front door (``kvtool.inputs.shape``) builds one from what
the user typed; nothing else computes KV bytes from a model.

Sizes, each under the shape's engine, format and tp:

* ``size(ctx, sessions)``: the full ``SizeResult`` (per token, per session, per rank, notes);
* ``session_bytes(ctx)``: one session at ``ctx`` tokens, every rank's share (replicas
  included), padded to the engine's blocks;
* ``chunk_bytes(tokens)``: one rank's KV for ``tokens`` tokens, unpadded: the file or object an
  offloading connector writes per chunk (LMCache: 256 tokens);
* ``block_bytes(tokens)``: the same ``tokens`` summed over every rank, unpadded: what a trace
  block costs the whole engine (replay);
* ``pool(ctx, budget)``: what a fixed KV budget a rank holds in vLLM's terms (blocks, tokens,
  max concurrency: ``model.pool.vllm_pool``).
"""

from typing import TYPE_CHECKING

from kvtool.model.backends import ASSUMED_GPU, Gpu
from kvtool.model.engines import EngineRules
from kvtool.model.formats import KvFormat
from kvtool.model.kv import SizeResult, size_kv
from kvtool.model.spec import ModelSpec
from kvtool.record import Record

if TYPE_CHECKING:  # (imported by pool(): only a fixed KV budget needs it, not start-up)
    from kvtool.model.pool import Pool


class KvShape(Record):
    """``spec`` under ``rules`` and ``fmt`` at tensor-parallel size ``tp``; ``block_size``
    overrides the engine's page size in tokens (None: the engine's). ``tp_given`` says whether
    the user chose ``tp``; a planner that chooses the serving layout itself re-shapes with
    ``serving_tp``. ``pp``: the pipeline stages, whose batches in flight vLLM's admission
    charge counts."""

    spec: ModelSpec
    rules: EngineRules
    fmt: KvFormat
    tp: int = 1
    block_size: int | None = None
    tp_given: bool = False
    gpu: Gpu = ASSUMED_GPU
    pp: int = 1

    @property
    def name(self) -> str:
        return self.spec.name

    def on_gpu(self, gpu: Gpu) -> "KvShape":
        """The shape on ``gpu``: vLLM's attention backend there decides the block size."""
        return self._replace(gpu=gpu)

    def serving_tp(self, tp: int) -> "KvShape":
        """The shape under a serving layout of ``tp`` chips per engine: engines that do not
        shard over ranks (the textbook formula, transformers) price one copy whatever it is."""
        return self._replace(tp=tp if self.rules.shards_over_tp else 1)

    def size(
        self, ctx_tokens: int, sessions: int = 1, *, max_num_batched_tokens: int | None = None
    ) -> SizeResult:
        """The full sizing of ``sessions`` x ``ctx_tokens`` (``model.kv.size_kv``)."""
        return size_kv(
            self.spec,
            rules=self.rules,
            fmt=self.fmt,
            ctx_tokens=ctx_tokens,
            sessions=sessions,
            tp=self.tp,
            block_size=self.block_size,
            max_num_batched_tokens=max_num_batched_tokens,
            gpu=self.gpu,
            pp=self.pp,
        )

    def pool(
        self, ctx_tokens: int, budget: int, *, max_num_batched_tokens: int | None = None
    ) -> "Pool":
        """What ``budget`` bytes of KV a rank hold for requests of ``ctx_tokens``, as vLLM
        computes it (``model.pool.vllm_pool``); ValueError where the layers' pages differ."""
        from kvtool.model.pool import vllm_pool

        def size_at(tokens: int) -> SizeResult:
            return self.size(tokens, max_num_batched_tokens=max_num_batched_tokens)

        return vllm_pool(budget, size_at, ctx_tokens)

    def session_bytes(self, ctx_tokens: int) -> int:
        """One session at ``ctx_tokens``: every rank's share, padded to the engine's blocks."""
        return self.size(ctx_tokens).kv_bytes_per_session

    def _unpadded(self, tokens: int) -> SizeResult:
        return size_kv(
            self.spec,
            rules=self.rules,
            fmt=self.fmt,
            ctx_tokens=tokens,
            sessions=1,
            tp=self.tp,
            block_size=1,
            gpu=self.gpu,
        )

    def chunk_bytes(self, tokens: int) -> int:
        """One rank's KV for ``tokens`` tokens, unpadded by the engine's page size."""
        return self._unpadded(tokens).kv_bytes_per_rank_per_session

    def block_bytes(self, tokens: int) -> int:
        """Every rank's KV for ``tokens`` tokens, unpadded (a replay block's cost)."""
        return self._unpadded(tokens).kv_bytes_per_session

    def describe(self) -> str:
        """``llama-3.1-70b (fp8_e4m3, vllm, tp 8)``: the shape in one phrase, for notes."""
        return f"{self.spec.name} ({self.fmt.name}, {self.rules.name}, tp {self.tp})"
