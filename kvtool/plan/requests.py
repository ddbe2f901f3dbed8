"""What reading a session back asks of a store, request by request. Pure.

A restore is not one large read. An engine saves one file or object per chunk **per worker**:
every one of an engine's tp x pp ranks stores its own share of each chunk (LMCache's keys carry
the worker id: ``model@world_size@worker_id@chunk_hash@dtype``, lmcache 0.5.6 utils.py:467-475),
except an MLA latent saved from one rank (one object a chunk). So a 256-token chunk of Llama 3.1
405B at tp 8 x pp 18 is 144 objects of 917 kB, not one of 132 MB. Reading N sessions back takes
the lookup and then the longest of three things (``RestoreTerms``):

* **the bytes**: N x a session's bytes in the tier / the node's bandwidth to it;
* **the requests in flight**: every object costs its first-byte latency once per read request
  (the GET) plus its size over one connection's rate; ``connections`` requests run at once;
* **the lookup**: before it reads, the engine asks whether each chunk is there, one chunk
  after another (LMCache's S3 connector awaits each HEAD in turn, s3_connector.py:603-630;
  for the fs connector, which has no batched lookup, the backend checks one key after another,
  abstract_backend.py:272-293, remote_backend.py:163-186): chunks x first-byte latency per
  session, the sessions side by side; it comes before the reads, so it adds to them. The
  lookup's HEAD is paid there once: the connector keeps the size it read and its GET does not
  ask again (``object_size_cache``, s3_connector.py:341-358, 280-292), so it is not in flight
  again with the reads;
* **the request rate**: the store serves at most so many requests a second, lookups
  included, and the nodes restoring at once share it: S3 general purpose buckets at least
  5,500 GET/HEAD per second per partitioned prefix (AWS S3 User Guide,
  optimizing-performance.html), S3 Express One Zone 200,000 reads per second per directory
  bucket (s3-express-performance.html); FSx for Lustre opens and closes at its Metadata IOPS
  (``plan/metadata.py``).

Worked number (docs/planning.md works it by hand): 16 sessions of 200,000 tokens of Llama 3.1
405B on a Trn3 UltraServer from S3 Standard through LMCache's S3 connector are 16 x 782 x 144 =
1,801,728 objects of 917 kB and 3,603,456 requests (a GET and a HEAD each): 655 s at 5,500
a second, after a 78 s lookup (782 HEADs in turn); 2,304 connections at 100 ms a GET and
10.8 ms a transfer would take 87 s, the bytes 3.7 s over 3,600 Gbps: the rate decides.
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
    # of ``requests_per_object``, those the lookup makes: waited for in the lookup, one after
    # another, so not in flight again with the reads (they still count against the rate)
    lookup_requests: int = 0


class RestoreTerms(NamedTuple):
    """One restore of N sessions, term by term (seconds); ``total_s`` adds the fixed overhead
    and first-byte latency to the longest term."""

    objects: int
    object_bytes: float
    requests: int
    transfer_s: float
    in_flight_s: float
    rate_s: float
    fixed_s: float
    lookup_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Overhead + latency + the lookup + the longest of the three terms."""
        return self.fixed_s + self.lookup_s + max(self.transfer_s, self.in_flight_s, self.rate_s)

    @property
    def bound(self) -> str:
        """Which term decides: ``bytes``, ``requests in flight`` or ``request rate``."""
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
    """The three terms of restoring ``sessions`` sessions of ``tokens`` tokens
    (``tier_bytes_per_session`` each in the tier) over a path of ``bytes_per_s``."""
    chunks = -(-tokens // chunk_tokens)
    per_session = chunks * r.objects_per_chunk
    objects = sessions * per_session
    size = tier_bytes_per_session / per_session if per_session else 0.0
    requests = objects * r.requests_per_object
    per_object = (r.requests_per_object - r.lookup_requests) * r.first_byte_s
    if r.per_connection_bytes_per_s:
        per_object += size / r.per_connection_bytes_per_s
    in_flight = objects * per_object / max(r.connections, 1)
    rate = requests / r.rate_per_s if r.rate_per_s < math.inf else 0.0
    return RestoreTerms(
        objects=objects,
        object_bytes=size,
        requests=requests,
        transfer_s=sessions * tier_bytes_per_session / bytes_per_s,
        in_flight_s=in_flight,
        rate_s=rate,
        fixed_s=fixed_s,
        lookup_s=chunks * r.lookup_s_per_chunk,
    )


class KeyScheme(NamedTuple):
    """How an offload stack names its S3 objects, read in its released code, and so how many
    S3 prefixes its keys spread over before S3 partitions them itself."""

    connector: str
    scheme: str
    prefixes: int
    lookups: int  # requests before the GET, per object, on a node that did not write it
    source: str


LMCACHE_S3 = KeyScheme(
    connector="LMCache's S3 connector",
    scheme="every key begins with the model's name (model@world_size@worker@hash@dtype,"
    " '/' flattened to '_')",
    prefixes=1,
    lookups=1,
    source="lmcache 0.5.6 v1/storage_backend/connector/s3_connector.py:169-176 (the key),"
    " 341-358 and 603-630 (a HEAD per key not cached, one after another), utils.py:467-475",
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
    return LMCACHE_S3, (
        f"the {stack} stack's own object tier is not read: its engine-direct S3 path is planned"
        " as LMCache's S3 connector"
    )
