"""The retriever package's user-facing error.

Anything a user can fix (a missing corpus, a bad URL, an index built elsewhere, an option that does not apply)
raises `RetrieverError` with a one-line message that names the file/option/value and says how to fix it.
`retriever` stands alone (it never imports `inspo_cli`), so it has its own error type; the inspo CLI treats it
like its own `InspoError` (see `inspo_cli.errors.USER_ERRORS`): printed without a traceback, exit code 2.
"""


class RetrieverError(Exception):
    """An error caused by the caller's input or environment, with a message that says how to fix it."""

    exit_code = 2
