"""``kvtool metrics --prometheus URL``: the engines' series read from the Prometheus server the
fleet already runs, through its HTTP API, instead of scraping each engine.

Two instant queries (``/api/v1/query``) of every series kvtool reads (``vllm:``, ``sglang:``,
``lmcache:``, ``kvbm_``, narrowed by ``--selector``): one at the end of ``--window``, one at its
start. Each engine instance is one row, named by its ``instance`` and ``job`` labels; its
gauges are the end's, its counters what they added between the two samples Prometheus holds
(their own timestamps), so the figures are what two direct scrapes that far apart give. Two
HTTP requests whatever the fleet's size. Credentials come from the environment, never the
URL: ``KVTOOL_PROMETHEUS_TOKEN`` (a bearer token) or ``KVTOOL_PROMETHEUS_USER`` and
``KVTOOL_PROMETHEUS_PASSWORD`` (basic); an Amazon Managed Service for Prometheus workspace
(``https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>``) is signed with SigV4 from
boto3's credential chain (``probe.host.sigv4_headers``). Side effects: the network.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.parse
from typing import Any

from kvtool.errors import InputError
from kvtool.http import FetchError, check_url, get_text
from kvtool.inputs.metrics import Scraped
from kvtool.metrics.engines import rates, read
from kvtool.metrics.prom import Sample

SERIES = r'__name__=~"(vllm:|sglang:|lmcache:|kvbm_).+"'
_SELECTOR = re.compile(r'^\{\s*(?:[A-Za-z_]\w*\s*(?:=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*,?\s*)*\}$')
ROW_LABELS = ("instance", "job")  # what names an engine instance in Prometheus


def _headers() -> dict[str, str]:
    token = os.environ.get("KVTOOL_PROMETHEUS_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user = os.environ.get("KVTOOL_PROMETHEUS_USER")
    if user:
        secret = os.environ.get("KVTOOL_PROMETHEUS_PASSWORD", "")
        pair = base64.b64encode(f"{user}:{secret}".encode()).decode()
        return {"Authorization": f"Basic {pair}"}
    return {}


def query_for(selector: str | None) -> str:
    """The PromQL selector of every series kvtool reads, narrowed by ``selector``
    (``{namespace="prod"}``); InputError for one that is not a label matcher list."""
    if selector is None:
        return "{" + SERIES + "}"
    if not _SELECTOR.match(selector.strip()):
        raise InputError(f"--selector {selector!r} is not a PromQL label matcher list",
                         'e.g. --selector \'{namespace="prod"}\'')  # fmt: skip
    inner = selector.strip()[1:-1].strip().rstrip(",")
    return "{" + SERIES + (", " + inner if inner else "") + "}"


AMP_HOST = re.compile(r"^aps-workspaces\.([a-z0-9-]+)\.amazonaws\.com$")


def sigv4_region(base: str) -> str | None:
    """The region to sign for: an Amazon Managed Service for Prometheus workspace URL's
    (``aps-workspaces.<region>.amazonaws.com``), or ``KVTOOL_PROMETHEUS_SIGV4_REGION``; None:
    no signing."""
    host = (urllib.parse.urlsplit(base).hostname or "").lower()
    match = AMP_HOST.match(host)
    return match[1] if match else os.environ.get("KVTOOL_PROMETHEUS_SIGV4_REGION") or None


def _instant(base: str, query: str, at: float, deadline_s: float) -> list[dict[str, Any]]:
    url = f"{base.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode(
        {"query": query, "time": f"{at:.3f}"}
    )
    headers = {"Accept": "application/json", **_headers()}
    region = sigv4_region(base)
    if region is not None:  # Amazon Managed Service for Prometheus: SigV4, boto3's chain
        from kvtool.probe.host import sigv4_headers

        headers = sigv4_headers(url, region=region, service="aps", headers=headers)
    text = get_text(url, deadline_s=deadline_s, accept="application/json", headers=headers)
    try:
        answer = json.loads(text)
    except ValueError:
        raise FetchError("the answer is not JSON: not a Prometheus API") from None
    if not isinstance(answer, dict):
        raise FetchError("not a Prometheus API answer")
    if answer.get("status") != "success":
        raise FetchError(f"the query failed ({str(answer.get('error', ''))[:200]})")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise FetchError("not an instant vector")
    return list(data["result"])


def _rows(result: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[list[Sample], float]]:
    """Samples per engine instance (its ``instance`` and ``job``), with the newest timestamp."""
    rows: dict[tuple[str, str], tuple[list[Sample], float]] = {}
    for item in result:
        metric, value = item.get("metric") or {}, item.get("value") or [0, "NaN"]
        name = str(metric.get("__name__", ""))
        if not name:
            continue
        labels = {str(k): str(v) for k, v in metric.items() if k != "__name__"}
        key = tuple(labels.get(k, "") for k in ROW_LABELS)
        try:
            stamp, number = float(value[0]), float(value[1])
        except (TypeError, ValueError, IndexError):
            continue
        samples, newest = rows.get(key, ([], 0.0))  # type: ignore[arg-type]
        samples.append(Sample(name, labels, number))
        rows[key] = (samples, max(newest, stamp))  # type: ignore[index]
    return rows


def scrape_prometheus(
    base: str, *, window_s: float, selector: str | None = None, timeout: float = 10.0
) -> list[Scraped]:
    """One ``Scraped`` per engine instance Prometheus holds, its counters over ``window_s``
    (two instant queries, each within ``timeout``)."""
    check_url(base, what="--prometheus")
    if not base.startswith(("http://", "https://")):
        raise InputError(f"--prometheus {base!r} is not an http(s) URL", "e.g. http://prom:9090")
    if not 1 <= window_s <= 90 * 86400:
        raise InputError(f"--window must be 1 s to 90 days, got {window_s:g} s")
    query = query_for(selector)
    now = time.time()
    try:
        after = _rows(_instant(base, query, now, timeout))
        before = _rows(_instant(base, query, now - window_s, timeout))
    except FetchError as exc:
        return [Scraped(base, [], f"no answer from Prometheus ({exc})")]
    out = []
    for key in sorted(after):
        samples = after[key][0]
        name = f"{key[0] or '-'} (job {key[1] or '-'})"
        readings = read(samples)
        if key not in before:
            out.append(Scraped(name, readings, None) if readings else
                       Scraped(name, [], "no vLLM, SGLang, LMCache or KVBM metrics"))  # fmt: skip
            continue
        first = before[key][0]
        if not readings:
            out.append(Scraped(name, [], "no vLLM, SGLang, LMCache or KVBM metrics"))
            continue
        pairs = {r.engine: r for r in read(first)}
        try:  # (an instant query's samples carry the evaluation time: the window apart)
            out.append(Scraped(name, [rates(pairs[r.engine], r, window_s)
                                      for r in readings if r.engine in pairs]))  # fmt: skip
        except ValueError as exc:
            out.append(Scraped(name, [], str(exc)))
    if not out:
        return [Scraped(base, [], "Prometheus holds no vLLM, SGLang, LMCache or KVBM series"
                        + (f" matching {selector}" if selector else ""))]  # fmt: skip
    return out
