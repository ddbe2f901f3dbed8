"""Every byte kvtool prints goes through this package: text tables for people, JSON for
programs, one module per command (``size``, ``plan``, ``advise``, ``catalog``) and the shared
pieces in ``text``.

``--json`` output is built from the same result objects as the tables, so both always agree.
Modules here import result types only for type checking: importing the planners would slow
``kvtool size``.
"""
