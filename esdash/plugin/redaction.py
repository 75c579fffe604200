"""Server error text without the document values it quotes.

Elasticsearch and OpenSearch quote the offending value in many of their error reasons: a
document that does not fit its mapping is answered with "failed to parse field [age] of type
[long] in document with id '17'. Preview of field's value: 'forty'", a bad date with "failed
to parse date field [2016-13-45] ...".  esdash keeps error reasons where a reader needs
them (``results.json``, ``stream.jsonl``, the summary, the run's reason), and those files
must not become a copy of the sensitive documents a benchmark indexes.  :func:`redact_values`
replaces each value an engine quotes with :data:`REDACTED` and keeps the rest: the error type,
the field and its type, limits and counts, which say what to fix.

The patterns are the value echoes of the engines' own messages (Elasticsearch 7.17-9.x and
OpenSearch 2.x-3.x share them: ``FieldMapper``, ``NumberFieldMapper``, ``InetAddresses``,
date parsing, ``Booleans``, keyword's immense terms, geo points, version conflicts) and of
the JSON parser they use (Jackson's source excerpt, tokens and numbers, Java's
``NumberFormatException``).  A value is cut to the end of its line when the message does not
end it the way the engine writes it (a truncated reason), never left partly in place.
"""

from __future__ import annotations

import re

#: What stands where a value was (no angle brackets: an HTML or Markdown viewer would take
#: ``<redacted>`` for a tag and show nothing).
REDACTED = "(redacted)"

#: (pattern, replacement): the value between the groups is dropped, the groups kept.  Applied
#: in order; the "rest of the line" forms after the exact ones catch a value whose closing
#: quote or bracket was cut off.
_ECHOES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        # FieldMapper: "... in document with id 'ID'. Preview of field's value: 'VALUE'"
        (r"(Preview of field's value: ).*", rf"\1{REDACTED}"),
        (
            r"(in document with id )'.*?'(?=\. (?:Preview of field|Could not parse field)|\.?$)",
            rf"\1{REDACTED}",
        ),
        (r"(in document with id )'.*", rf"\1{REDACTED}"),
        # NumberFieldMapper: "Value [X] is out of range for a long", "... has a decimal part"
        (r"(\bValue \[).*?(\] (?:is out of range|has a decimal part))", rf"\1{REDACTED}\2"),
        # InetAddresses: "'X' is not an IP string literal."
        (r"'.*?'( is not an IP string literal)", rf"{REDACTED}\1"),
        # date parsing: "failed to parse date field [X] with format [F]"
        (r"(failed to parse date field \[).*?(\] with format)", rf"\1{REDACTED}\2"),
        # Booleans: "Failed to parse value [X] as only [true] or [false] are allowed."
        (r"(Failed to parse value \[).*?(\] as only \[true\] or \[false\])", rf"\1{REDACTED}\2"),
        # keyword: "The prefix of the first immense term is: '[104, 101, ...]...'"
        (r"(The prefix of the first immense term is: )'.*?\.\.\.'", rf"\1{REDACTED}"),
        (r"(The prefix of the first immense term is: )'.*", rf"\1{REDACTED}"),
        # geo points: "illegal latitude value [X] for FIELD"
        (r"(illegal (?:latitude|longitude) value \[).*?\]", rf"\1{REDACTED}]"),
        # a document's id: "[ID]: version conflict, ...", "[ID]: document missing"
        (
            r"\[[^\]\n]*\](?=: (?:version conflict|document missing|document already exists))",
            f"[{REDACTED}]",
        ),
        # Java: 'For input string: "X"' (a number that is not one)
        (r'(For input string: )".*"', rf"\1{REDACTED}"),
        (r'(For input string: )".*', rf"\1{REDACTED}"),
        # Jackson: the source excerpt, tokens, characters and numbers it quotes
        (r"(\[Source: ).*?(; line: \d+, column: \d+\])", rf"\1{REDACTED}\2"),
        (rf"(\[Source: )(?!{re.escape(REDACTED)}).*", rf"\1{REDACTED}"),
        (r"(Unrecognized token )'.*?'(?=: was expecting)", rf"\1{REDACTED}"),
        (r"(Unexpected character \()'.*?' \(code \d+\)(?: / 0x[0-9a-fA-F]+)?\)", rf"\1{REDACTED})"),
        (r"(Numeric value \().*?(\) out of range of)", rf"\1{REDACTED}\2"),
    )
)


def redact_values(text: str) -> str:
    """``text`` with every document value the engines quote in their errors replaced by
    :data:`REDACTED` (see the module docstring); everything else is kept as it is."""
    if not text:
        return text
    for pattern, replacement in _ECHOES:
        text = pattern.sub(replacement, text)
    return text
