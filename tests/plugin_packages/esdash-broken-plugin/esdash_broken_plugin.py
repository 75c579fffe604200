"""A plugin module that cannot be imported.

esdash must record the entry point ``broken`` as a broken plugin, with this error, and load
every other plugin as usual.
"""

raise RuntimeError("esdash-broken-plugin fails on import on purpose")
