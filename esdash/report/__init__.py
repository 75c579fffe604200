"""Report documents (Markdown, HTML, CSV, figures, Rally's formats) built from results.

The terminal summary of one run, the live lines and the judging of thresholds and
references are reading, not documents: they live in :mod:`esdash.view`, which
``esdash run`` imports without pulling in the report's templates and figures.
"""
