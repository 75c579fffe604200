"""The ABE mode's pre-flight check: what ``esdash run`` refuses about a session under ``abe``
beyond the key source (:meth:`~.mode.AbeMode.check_options`), found without a cluster.

- The track's schema must be one ABE can encrypt: :func:`~.codec.plan_fields` is what the
  run's client codec is built from, so a field type it refuses is refused here with the
  same words.  ``geo_point`` fields are accepted (one opaque AES-SIV token each); the geo
  queries on them are reported by the plan as not possible under ABE, as a run does.
- A passphrase's salt file in the data root (``abe-kdf.json``, when ``salt_file`` is not
  set) must be an esdash salt file with a bounded Argon2id cost (:func:`~.keys.load_kdf`):
  a damaged one would otherwise stop the run, or hang it inside Argon2.  A missing one is
  no problem: the first run writes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from esdash.plugin_api import BadInput, CheckContext, Finding, PreflightCheck

from .mode import KEY_SOURCES


class AbeSession(PreflightCheck):
    """The track's fields can be encrypted, and the data root's salt file is usable."""

    name = "abe-session"
    description = "under encryption.mode abe: the track's field types and the salt file"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        if session.encryption.name != "abe":
            return
        yield from _track_findings(context)
        yield from _salt_findings(context)


def _track_findings(context: CheckContext) -> Iterator[Finding]:
    """The fields :func:`~.codec.plan_fields` refuses, in one line under ``encryption.mode``."""
    from .codec import plan_fields

    session = context.session
    options = session.track.options
    try:
        track = context.plugins.track(session.track.name)
        specs, body = track.field_specs(options), track.index_body(options)
    except BadInput:
        return  # a track that does not load is the ``track`` check's finding
    try:
        plan_fields(specs, body)
    except BadInput as exc:
        problems = "; ".join(line.strip() for line in str(exc).splitlines()[1:] or [str(exc)])
        yield Finding(
            "",
            f"{session.path}: encryption.mode: track {session.track.name!r} cannot run under "
            f'"abe": {problems}; '
            f'choose another track or encryption.mode = "gocryptfs" or "none"',
        )


def _salt_findings(context: CheckContext) -> Iterator[Finding]:
    """A damaged default salt file (an explicit ``salt_file`` is ``check_options``' finding)."""
    from . import keys

    options = context.session.encryption.options
    kind = next((k for k in KEY_SOURCES if options.get(k)), None)
    if kind in (None, "key_file") or options.get("salt_file") or context.data_root is None:
        return
    salt = Path(context.data_root) / keys.KDF_FILE
    if not salt.exists():
        return
    try:
        keys.load_kdf(salt, create=False)
    except BadInput as exc:
        yield Finding("", f"{context.session.path}: encryption.{kind}: {exc}")
