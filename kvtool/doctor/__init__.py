"""``kvtool doctor``: is this mount and node ready for a shared KV tier. Facts come from
``kvtool.probe``; the checks (``checks``) are pure; ``run`` ties them together and merges
reports from many nodes."""
