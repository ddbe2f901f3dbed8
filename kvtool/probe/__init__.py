"""The one door to the machine: what a node has and does, read through ``Host`` and parsed
into plain records (``parse``, ``facts``). Only ``host.py`` runs commands or touches /proc."""
