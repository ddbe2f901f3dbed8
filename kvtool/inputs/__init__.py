"""The front door: what the user typed, resolved once into the library's records.

Every command turns its options and files into inputs here, and nowhere else: a model, engine,
KV dtype and tp become one ``KvShape`` (``shape``); a node with its storage profiles and
overrides one ``Hardware`` (``hardware``); a trace file one ``Trace`` (``trace``); ``kvtool
bench`` and ``kvtool doctor`` JSON the plan's own types (``evidence``); a deployment plan file
everything ``kvtool check`` needs (``plan_file``). Each mistake is one ``InputError`` naming
the option or file and the fix. The pure core below never sees a string the user typed.
"""
