"""The packages here are separate projects, installed by ``scripts/provision``.

Their own test suites run as their authors would run them, from the package directory
(``tests/test_plugins_cli.py`` does that in a subprocess), not as part of esdash's suite.
"""

collect_ignore_glob = ["*"]
