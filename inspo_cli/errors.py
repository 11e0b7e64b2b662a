"""User-facing errors.

Anything a user can fix (a bad recipe, a missing file, an unknown benchmark) raises `InspoError` with a
one-line message that names the file/field/value and the fix. The CLI prints it without a traceback and
exits with code 2; everything else is a bug and keeps its traceback.

The `retriever` package stands alone (it never imports `inspo_cli`), so its user errors are its own
`RetrieverError`; `USER_ERRORS` is both, for every `except` that handles a user's mistake, wherever a
retriever (index, corpus, HTTP server) may be behind the call.
"""

from retriever.errors import RetrieverError


class InspoError(Exception):
    """An error caused by the user's input, with a message that says how to fix it."""

    exit_code = 2


USER_ERRORS: tuple[type[InspoError], type[RetrieverError]] = (InspoError, RetrieverError)  # each has exit_code
