"""Errors a user can act on, and the exit codes the CLI maps them to.

Every error esdash raises on purpose derives from :class:`EsdashError`; the CLI prints its
message (never a traceback) and exits with its code.  The codes are documented in the README
so batch scripts can branch on them.
"""

from __future__ import annotations

# Exit codes (documented in README.md, "Exit codes").
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_THRESHOLD = 3
EXIT_CLUSTER = 4
EXIT_PLUGIN = 5
EXIT_ABORT = 130


class EsdashError(Exception):
    """An error with a message written for the user."""

    exit_code = EXIT_FAILURE


class BadInput(EsdashError):
    """Input the user gave (files, options, keys) is wrong; the message says where and the fix."""

    exit_code = EXIT_BAD_INPUT


class PluginError(EsdashError):
    """A plugin the session needs is missing or broken."""

    exit_code = EXIT_PLUGIN


class ClusterError(EsdashError):
    """The search cluster could not be started, reached or stopped."""

    exit_code = EXIT_CLUSTER
