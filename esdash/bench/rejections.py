"""The flag of an ingest that lost documents: how many of those sent, why, and an example.

Documents a bulk request rejected are counted by reason (``rejected_docs``) and the run goes
on: the steps then measure an index without them.  A count in a table is easy to overlook,
and an index holding none of its documents answers every query in a fraction of a
millisecond, so a run that lost documents carries one sentence saying so, in
``results.json`` (``ingest.flag``), in the summary and as a warning event of the stream.
The example reason names the error, never the rejected document's value
(:mod:`esdash.plugin.redaction`).
"""

from __future__ import annotations

from esdash.plugin.redaction import redact_values
from esdash.rundir.records import IngestResult

#: Longest example reason quoted in a flag (the server's reasons can be long).
EXAMPLE_LIMIT = 200


def ingest_flag(ingest: IngestResult) -> str | None:
    """One line when the ingest lost documents (None: every document sent was indexed).

    ``docs_sent`` and ``docs_rejected`` are the workers' own counts; without them (a rank
    that never reported) the counts of the stream stand in.
    """
    by_reason = sum(ingest.rejected_docs.values())
    rejected = ingest.docs_rejected if ingest.docs_rejected is not None else by_reason
    if not rejected:
        return None
    sent = ingest.docs_sent if ingest.docs_sent is not None else (ingest.docs or 0) + rejected
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(ingest.rejected_docs.items()))
    why = f"; {reasons}" if reasons else ""
    if rejected >= sent and not ingest.docs:
        text = f"every document was rejected ({rejected:,} of {sent:,}{why}): "
        text += "the steps ran on an empty index"
    else:
        text = f"{rejected:,} of {sent:,} documents were rejected"
        text += f" ({reasons}): " if reasons else ": "
        text += "the steps ran on an index without them"
    example = _example(ingest)
    return text + (f"; e.g. {example}" if example else "")


def _example(ingest: IngestResult) -> str | None:
    """The newest message of the most frequent rejection reason, when one was kept."""
    for reason, _count in sorted(ingest.rejected_docs.items(), key=lambda kv: -kv[1]):
        for op in ingest.ops.values():
            samples = op.last_errors.get(reason)
            if samples:  # redacted when recorded; again for results of older versions
                message = " ".join(redact_values(samples[-1].message).split())
                if len(message) > EXAMPLE_LIMIT:
                    message = message[: EXAMPLE_LIMIT - 3] + "..."
                return message
    return None
