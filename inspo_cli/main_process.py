"""Run something once, on the main process, and hand every process its outcome: the one way inspo does it.

    path = broadcast_from_main(state, lambda: make_the_run_directory())    # the same value on every process
    answer = broadcast_from_main(accelerator, lambda: ask(optimizer, prompt))

`state` is accelerate's `PartialState` or `Accelerator` (anything with `num_processes` and `is_main_process`). With
one process the work just runs. With several, only the main process runs it; the others wait in the broadcast and
return its result, or raise the same error (one of `errors`: its class and message travel, so an
`OptimizerBudgetExhausted` stays one on every process) instead of waiting for ever on a failure only the main
process saw. Any other exception on the main process propagates there as usual (a bug, not an outcome).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from inspo_cli.errors import InspoError

T = TypeVar("T")


def broadcast_from_main(
    state: Any,
    work: Callable[[], T],
    broadcast: Callable[[list], list] | None = None,
    errors: tuple[type[Exception], ...] = (InspoError,),
) -> T:
    """`work()`'s result on every process, computed on the main process only (see the module's docstring).
    `broadcast` sends the main process's one-element list to all processes (accelerate's `broadcast_object_list`
    unless given: tests pass a fake)."""
    if state.num_processes == 1:
        return work()
    if broadcast is None:
        from accelerate.utils import broadcast_object_list

        broadcast = broadcast_object_list
    payload: list = [None]
    if state.is_main_process:
        try:
            payload = [("ok", work())]
        except errors as error:
            payload = [("error", (type(error), str(error)))]
    kind, value = broadcast(payload)[0]
    if kind == "error":
        error_type, message = value
        raise error_type(message)
    return value
