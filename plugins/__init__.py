"""Built-in esdash plugins, installed as the import package ``esdash_plugins``."""
