"""What reading a session back asks of a store, request by request. Pure.

A restore is not one large read. An engine saves one file or object per chunk **per worker**:
every one of an engine's tp x pp ranks stores its own share of each chunk (LMCache's keys carry
the worker id: ``model@world_size@worker_id@chunk_hash@dtype``, lmcache 0.5.6 utils.py:467-475),
except an MLA latent saved from one rank (one object a chunk). So a 256-token chunk of Llama 3.1
405B at tp 8 x pp 18 is 144 objects of 917 kB, not one of 132 MB. Reading N sessions back takes
two phases, each as long as its slowest term (``RestoreTerms``):

* **the lookup**: before it reads, the engine asks whether each chunk is there, one chunk
  after another (LMCache's S3 connector waits for each HEAD in turn, s3_connector.py:603-630
  and, on the default synchronous lookup, ``exists_sync`` 280-292 from
  abstract_backend.py:288-293; for the fs connector the backend checks one key after another,
  abstract_backend.py:272-293, remote_backend.py:163-186). Each worker checks its own keys
  at once with the others, but an engine looks sessions up one at a time: the scheduler asks
  for each request in turn and waits (vllm_v1_adapter.py:1431, lmcache_lookup_client.py:140),
  and each worker's lookup server answers on one thread (lmcache_lookup_client.py:197-276).
  So the lookup takes ``max(ceil(N / lookups at once) x chunks x first byte, lookup requests /
  the node's share of the rate)``: its HEADs count against the store's rate like any read.
  The lookup's HEAD is paid there once: the connector keeps the size it read and its GET does
  not ask again (``object_size_cache``, s3_connector.py:341-358, 280-292). LMCache waits
  ``lookup_timeout_ms`` (3,000 by default, config.py:457-461) for one session's lookup and
  then answers 0 hits, so vLLM recomputes (factory.py:226, zmq_transport.py:119-126): a
  session whose own lookup (chunks x first byte, 30 x 100 ms) takes longer is not restored
  (``RestoreTerms.lookup_times_out``; ``lookup_limit_chunks``);
* **the reads** then take the longest of three things:

  - **the bytes**: N x a session's bytes in the tier / the node's bandwidth to it;
  - **the requests in flight**: every object costs its first-byte latency once per read
    request (the GET) plus its size over one connection's rate; ``connections`` requests run
    at once;
  - **the request rate**: the store serves at most so many requests a second and the nodes
    restoring at once share it: S3 general purpose buckets at least 5,500 GET/HEAD per second
    per partitioned prefix (AWS S3 User Guide, optimizing-performance.html), S3 Express One
    Zone 200,000 reads per second per directory bucket (s3-express-performance.html); FSx for
    Lustre opens and closes at its Metadata IOPS (``plan/metadata.py``).

Worked number (docs/planning.md works it by hand): 16 sessions of 200,000 tokens of Llama 3.1
405B on a Trn3 UltraServer from S3 Standard through LMCache's S3 connector are 16 x 782 x 144 =
1,801,728 objects of 917 kB, each a HEAD in the lookup and a GET. The lookup: 16 sessions one
at a time x 782 HEADs in turn x 100 ms = 1,251.2 s, latency-bound (its 1,801,728 HEADs would
take 327.6 s at 5,500 a second). The reads: 1,801,728 GETs at 5,500 a second = 327.6 s, rate-
bound (2,304 connections at 100 ms a GET and 10.8 ms a transfer would take 87 s, the bytes 3.7 s
over 3,600 Gbps). 1,578.9 s in all, with 101 ms of overhead and first byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Requests:
    """How a path reads one object back: a chunk is ``objects_per_chunk`` files or objects;
    each costs ``requests_per_object`` requests (the read, plus lookups) of ``first_byte_s``
    each and its size over ``per_connection_bytes_per_s`` (0: no per-connection bound);
    ``connections`` requests run at once; the node may issue ``rate_per_s`` requests a second
    (its share of the store's limit; inf: none modelled), ``rate_what`` says what sets it."""

    objects_per_chunk: int = 1
    requests_per_object: int = 1
    first_byte_s: float = 0.0
    per_connection_bytes_per_s: float = 0.0
    connections: int = 1
    rate_per_s: float = math.inf
    rate_what: str = ""
    noun: str = "object"  # "object" (S3) or "file" (FSx)
    lookup_s_per_chunk: float = 0.0  # the engine's lookup, one chunk after another
    # sessions the engines on a node look up at once (0: every session side by side); LMCache
    # looks one session up at a time per engine instance
    lookups_at_once: int = 0
    # of ``requests_per_object``, those the lookup makes: waited for in the lookup, one after
    # another, so not in flight again with the reads (they still count against the rate)
    lookup_requests: int = 0
    # how long the engine waits for one session's lookup before it gives up and recomputes
    # (LMCache's lookup_timeout_ms); inf: it waits as long as the lookup takes
    lookup_timeout_s: float = math.inf


class RestoreTerms(NamedTuple):
    """One restore of N sessions, term by term (seconds), in two phases: the lookup (its
    latency-bound time and its requests at the rate) and then the reads (the bytes, the
    requests in flight and the reads' requests at the rate); ``total_s`` adds the fixed
    overhead and first-byte latency to the two phases."""

    objects: int
    object_bytes: float
    requests: int  # all of them: the lookup's and the reads'
    transfer_s: float
    in_flight_s: float
    rate_s: float  # the reads' requests at the rate
    fixed_s: float
    lookup_latency_s: float = 0.0  # the lookup a chunk at a time, sessions as the engine does
    lookup_rate_s: float = 0.0  # the lookup's requests at the rate
    lookup_requests: int = 0
    lookup_session_s: float = 0.0  # one session's lookup, its chunks one after another
    lookup_timeout_s: float = math.inf  # the engine gives a session's lookup up past this

    @property
    def lookup_times_out(self) -> bool:
        """Whether one session's lookup outlasts the engine's lookup timeout: the engine then
        finds no hits and recomputes, so nothing is restored."""
        return times_out(self.lookup_session_s, self.lookup_timeout_s)

    @property
    def read_requests(self) -> int:
        """The reads' requests (the GETs): all but the lookup's."""
        return self.requests - self.lookup_requests

    @property
    def lookup_s(self) -> float:
        """The lookup phase: the slower of its latency and its requests at the rate."""
        return max(self.lookup_latency_s, self.lookup_rate_s)

    @property
    def lookup_bound(self) -> str:
        """Which term decides the lookup: ``latency`` or ``request rate``."""
        return "request rate" if self.lookup_rate_s > self.lookup_latency_s else "latency"

    @property
    def reads_s(self) -> float:
        """The reads phase: the longest of its three terms."""
        return max(self.transfer_s, self.in_flight_s, self.rate_s)

    @property
    def total_s(self) -> float:
        """Overhead + latency + the lookup + the reads."""
        return self.fixed_s + self.lookup_s + self.reads_s

    def lookup_needs_per_s(self) -> float:
        """Requests a second the lookup issues when only its latency holds it back."""
        if not self.lookup_requests:
            return 0.0
        return self.lookup_requests / self.lookup_latency_s if self.lookup_latency_s else math.inf

    def reads_need_per_s(self) -> float:
        """Requests a second the reads issue when only the bytes or flight hold them back."""
        unbound = max(self.transfer_s, self.in_flight_s)
        return self.read_requests / unbound if unbound else math.inf

    @property
    def bound(self) -> str:
        """Which term decides the reads: ``bytes``, ``requests in flight`` or ``request
        rate``."""
        terms = {
            "bytes": self.transfer_s,
            "requests in flight": self.in_flight_s,
            "request rate": self.rate_s,
        }
        return max(terms, key=lambda k: terms[k])

    def rate_needed_per_s(self, deadline_s: float) -> float:
        """Requests a second this restore needs to finish within ``deadline_s``."""
        return self.requests / deadline_s if deadline_s > 0 else math.inf


def restore_terms(
    r: Requests,
    *,
    sessions: int,
    tier_bytes_per_session: float,
    tokens: int,
    chunk_tokens: int,
    bytes_per_s: float,
    fixed_s: float,
) -> RestoreTerms:
    """The terms of restoring ``sessions`` sessions of ``tokens`` tokens
    (``tier_bytes_per_session`` each in the tier) over a path of ``bytes_per_s``: the lookup's
    two, then the reads' three."""
    chunks = -(-tokens // chunk_tokens)
    per_session = chunks * r.objects_per_chunk
    objects = sessions * per_session
    size = tier_bytes_per_session / per_session if per_session else 0.0
    requests = objects * r.requests_per_object
    lookup_requests = objects * r.lookup_requests
    at_once = r.lookups_at_once or max(sessions, 1)
    rounds = max(1, -(-sessions // at_once))
    per_object = (r.requests_per_object - r.lookup_requests) * r.first_byte_s
    if r.per_connection_bytes_per_s:
        per_object += size / r.per_connection_bytes_per_s
    in_flight = objects * per_object / max(r.connections, 1)
    limited = r.rate_per_s < math.inf

    def at_rate(count: int) -> float:
        return count / r.rate_per_s if limited else 0.0

    return RestoreTerms(
        objects=objects,
        object_bytes=size,
        requests=requests,
        transfer_s=sessions * tier_bytes_per_session / bytes_per_s,
        in_flight_s=in_flight,
        rate_s=at_rate(requests - lookup_requests),
        fixed_s=fixed_s,
        lookup_latency_s=rounds * chunks * r.lookup_s_per_chunk,
        lookup_rate_s=at_rate(lookup_requests),
        lookup_requests=lookup_requests,
        lookup_session_s=chunks * r.lookup_s_per_chunk,
        lookup_timeout_s=r.lookup_timeout_s,
    )


def times_out(lookup_s: float, timeout_s: float) -> bool:
    """``lookup_s`` past ``timeout_s`` (30 chunks x 100 ms is within 3 s, whatever the
    floating point says)."""
    return lookup_s > timeout_s * (1 + 1e-9)


def lookup_limit_chunks(r: Requests) -> int | None:
    """The most chunks one session's lookup may check before the engine gives it up (3 s /
    100 ms = 30); None where no timeout holds it or the lookup costs nothing."""
    if r.lookup_timeout_s == math.inf or r.lookup_s_per_chunk <= 0:
        return None
    return math.floor(r.lookup_timeout_s / r.lookup_s_per_chunk * (1 + 1e-9))


class KeyScheme(NamedTuple):
    """How an offload stack names its S3 objects, read in its released code, and so how many
    S3 prefixes its keys spread over before S3 partitions them itself."""

    connector: str
    scheme: str
    prefixes: int
    lookups: int  # requests before the GET, per object, on a node that did not write it
    source: str
    # how long the stack's lookup client waits for one session before it recomputes (inf:
    # none read), and where that is set
    lookup_timeout_s: float = math.inf
    timeout_source: str = ""
    timeout_effect: str = ""  # what the engine does when the lookup times out


LMCACHE_S3 = KeyScheme(
    connector="LMCache's S3 connector",
    scheme="every key begins with the model's name (model@world_size@worker@hash@dtype,"
    " '/' flattened to '_')",
    prefixes=1,
    lookups=1,
    source="lmcache 0.5.6 v1/storage_backend/connector/s3_connector.py:169-176 (the key),"
    " 341-358 and 603-630 (a HEAD per key not cached, one after another), utils.py:467-475",
    # lookup_timeout_ms, 3,000 by default (v1/config.py:457-461): the synchronous lookup client
    # takes it as its socket timeout (v1/lookup_client/factory.py:226) and, on timeout, answers
    # 0 hits (v1/rpc/zmq_transport.py:119-126, lmcache_lookup_client.py:142-144), so vLLM
    # recomputes; the asynchronous client gives up after it too
    # (lmcache_async_lookup_client.py:176)
    lookup_timeout_s=3.0,
    timeout_source="LMCache 0.5.6's v1/config.py:457-461",
    timeout_effect="vLLM recomputes",
)
SGLANG_NIXL_OBJ = KeyScheme(
    connector="SGLang HiCache's NIXL object backend",
    scheme="keys begin with the page hash ({hash}_{model}_{tp_rank}_{tp_size}), which S3"
    " partitions only as the load grows",
    prefixes=1,
    lookups=1,
    source="sglang 0.5.23 srt/mem_cache/storage/nixl/hicache_nixl.py:108-114, 186-190,"
    " 646-665 (batch_exists queries each key)",
)

# the engine-direct S3 path of each offload stack read (``plan/offload.py``'s names); the
# others (Dynamo KVBM's object tier, TensorRT-LLM) are planned as LMCache's, and said so
KEY_SCHEMES = {"vllm": LMCACHE_S3, "lmcache": LMCACHE_S3, "sglang": SGLANG_NIXL_OBJ}


def key_scheme(stack: str) -> tuple[KeyScheme, str]:
    """The S3 key scheme of ``stack``'s engine-direct path, and a note where kvtool took
    LMCache's for a stack whose object tier it has not read."""
    if stack in KEY_SCHEMES:
        return KEY_SCHEMES[stack], ""
    # its lookup timeout too, as LMCache's; what gives up is that stack's engine, not vLLM
    return LMCACHE_S3._replace(timeout_effect="the engine recomputes"), (
        f"the {stack} stack's own object tier is not read: its engine-direct S3 path is planned"
        " as LMCache's S3 connector"
    )
