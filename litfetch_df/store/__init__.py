"""What is kept: answers, records and quotas, in memory and on disk.

``answers`` (the ``CachedResponse`` and the protocols the session, the persistent cache
and the bulk lookups agree on), ``cache`` (the persistent SQLite response cache),
``memo`` (a session's small JSON answers in memory), ``quota`` (the calls each metered
host has left today, kept beside the cache) and ``atomic`` (a file written whole or not
at all). It sits on the wire layer and below the session.
"""
