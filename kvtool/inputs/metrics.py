"""``kvtool metrics``' sources: URLs, host:port, saved scrape files, or a list of them in a file,
each scraped at most once per round, all of a round at once, each with its own timeout."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from kvtool.errors import InputError, redact
from kvtool.http import TooLarge, check_url, get_text
from kvtool.metrics.engines import PREFIXES, Reading, rates, read
from kvtool.metrics.prom import exposition

MAX_SOURCES = 1024
WORKERS = 128  # sources scraped at once: a scrape waits on the network, not the CPU


class Scraped(NamedTuple):
    """One source's readings (one per engine found), or why it gave none."""

    source: str
    readings: list[Reading]
    error: str | None = None


def source_list(sources: list[str], from_file: str | None) -> list[str]:
    """Each source as typed (a file path, an http(s) URL, or host:port meaning
    ``http://host:port/metrics``), then those listed one per line in ``from_file`` (``#``
    starts a comment). InputError for none, a duplicate or too many."""
    from kvtool.files import read_text

    listed = list(sources)
    if from_file is not None:
        text = read_text(Path(from_file), what="--from list")
        listed += [line.split("#", 1)[0].strip() for line in text.splitlines()]
        listed = [item for item in listed if item]
    if not listed:
        raise InputError("no source to read", "give a /metrics URL, host:port or a saved scrape")
    if len(listed) > MAX_SOURCES:
        raise InputError(
            f"{len(listed):,} sources", f"kvtool reads at most {MAX_SOURCES:,} at once"
        )
    out = [_normal(item) for item in listed]
    twice = next((s for i, s in enumerate(out) if s in out[:i]), None)
    if twice is not None:
        raise InputError(f"source {twice} is given twice", "list each engine once")
    return out


def _normal(item: str) -> str:
    if item.startswith(("http://", "https://")):
        check_url(item, what="source")
        return item
    if Path(item).exists():
        return item
    host, sep, port = item.rpartition(":")
    if sep and host and port.isdigit() and "/" not in item:
        return f"http://{item}/metrics"
    raise InputError(f"{item!r} is neither a file nor a URL",
                     "give http://host:port/metrics, host:port or a saved scrape file")  # fmt: skip


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def _fetch(source: str, timeout: float) -> str:
    """The scrape's text; OSError (unreachable, refused, timed out, not 200) for a URL."""
    if not is_url(source):
        from kvtool.files import read_text

        return read_text(Path(source), what="scrape")
    return get_text(source, deadline_s=timeout)  # (the whole scrape within ``timeout``)


def _scrape(source: str, timeout: float) -> Scraped:
    try:
        text = _fetch(source, timeout)
    except TooLarge as exc:
        return Scraped(source, [], str(exc))
    except OSError as exc:  # an engine that does not answer is a finding, not bad input
        reason = getattr(exc, "reason", None) or exc
        return Scraped(source, [], f"no answer ({redact(str(reason))})")
    try:
        scrape = exposition(text, keep=PREFIXES)
    except ValueError as exc:
        if is_url(source):  # a body that is not an exposition is never printed
            where = str(exc).split(":", 1)[0]
            return Scraped(source, [], f"not a Prometheus exposition ({where})")
        raise InputError(f"{source} is not a Prometheus scrape: {exc}",
                         "save one with curl http://host:port/metrics") from None  # fmt: skip
    del text  # (the samples are all that is kept)
    readings = read(scrape.samples, repeated=scrape.repeated)
    if not readings and not is_url(source):  # a file the user named: bad input
        raise InputError(f"{source} holds no vLLM, SGLang, LMCache or KVBM metrics",
                         "save one with curl http://host:port/metrics")  # fmt: skip
    if not readings:
        return Scraped(source, [], "no vLLM, SGLang, LMCache or KVBM metrics in it")
    return Scraped(source, readings)


def scrape_all(
    sources: list[str], *, timeout: float, interval: float | None = None
) -> list[Scraped]:
    """Every source, at once (one thread each, at most ``WORKERS``), each scrape within
    ``timeout`` from its start to its last byte; with ``interval``, twice that far
    apart, the counters then being what was added in between (URLs only)."""
    if interval is not None:
        files = [s for s in sources if not is_url(s)]
        if files:
            raise InputError(f"--interval scrapes twice, and {files[0]} is a saved file",
                             "give URLs with --interval, or drop it")  # fmt: skip
        if not 0.01 <= interval <= 3600:
            raise InputError(f"--interval must be 0.01 to 3600 seconds, got {interval:g}")
    if not 0.01 <= timeout <= 600:
        raise InputError(f"--timeout must be 0.01 to 600 seconds, got {timeout:g}")
    workers = max(1, min(WORKERS, len(sources)))  # the run: at most ceil(n / WORKERS) deadlines
    with ThreadPoolExecutor(max_workers=workers) as pool:
        first = list(pool.map(lambda s: _scrape(s, timeout), sources))
        if interval is None:
            return first
        start = time.monotonic()
        time.sleep(interval)
        second = list(pool.map(lambda s: _scrape(s, timeout), sources))
        seconds = time.monotonic() - start
    out = []
    for before, after in zip(first, second, strict=True):
        if before.error or after.error:
            out.append(after if after.error else before)
            continue
        pairs = {r.engine: r for r in before.readings}
        try:
            paired = [
                rates(pairs[r.engine], r, seconds) for r in after.readings if r.engine in pairs
            ]
            out.append(Scraped(after.source, paired))
        except ValueError as exc:
            out.append(Scraped(after.source, [], str(exc)))
    return out
