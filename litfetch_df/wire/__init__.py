"""The wire: one request out and its answer back, within bounds, at a pace each host accepts.

``http`` (the ``Http`` protocol sources talk to, rates, retries, redaction), ``clock``
(what pacing reads), ``limiter`` and ``rate_headers`` (how fast and how many at once a
host may be asked, and what its answers say about that), ``transfer`` with ``decode``
and ``netguard`` (one bounded attempt: deadline, size cap, redirects, content codings,
no private addresses). Nothing here knows a cache, a source or a DataFrame.
"""
