"""The retriever package's user-facing error.

Anything a user can fix (a missing corpus, a bad URL, an index built elsewhere, an option that does not apply)
raises `RetrieverError` with a one-line message that names the file/option/value and says how to fix it.
`retriever` stands alone (it never imports `inspo_cli`), so it has its own error type; the inspo CLI treats it
like its own `InspoError` (see `inspo_cli.errors.USER_ERRORS`): printed without a traceback, exit code 2.
"""


class RetrieverError(Exception):
    """An error caused by the caller's input or environment, with a message that says how to fix it."""

    exit_code = 2


class QueryRefused(RetrieverError):
    """A search engine will not search some queries for what they are (a server's `--max-query-chars`), while it
    would search the others: `reasons` maps each refused query's index in the list given to `search` to one line
    fit to show whoever wrote it. The search tool answers those queries with an error observation and searches the
    rest; anything else that fails a search (a server down, a wrong URL) stays a plain `RetrieverError`."""

    def __init__(self, reasons: dict[int, str]):
        super().__init__("; ".join(f"query {i}: {why}" for i, why in sorted(reasons.items()))[:500])
        self.reasons = dict(reasons)
