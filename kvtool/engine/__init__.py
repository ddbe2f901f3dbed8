"""The built-in tiering engine: KV chunks through T1 (HBM) -> T2 (host) -> T3 (shared files)
-> T4 (S3) and back. ``manager`` and ``policy`` decide (pure); ``mediums`` move bytes;
``engine`` joins them; ``smoke`` is the end-to-end scenario behind ``kvtool engine smoke``.
See docs/engine.md."""
