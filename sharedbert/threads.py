"""torch's thread count is process-wide: a job's `threads` option, or a step that runs best on one thread, sets it for
that run or step only, and the caller's count is put back after."""

import contextlib
import functools

import torch


@contextlib.contextmanager
def torch_threads(count: int | None = None):
    """torch's thread count set to `count` (None: left as it is) inside the block; the count found on entry is restored
    when the block ends or raises."""
    threads = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def restores_torch_threads(job):
    """Decorator for a job that may call `torch.set_num_threads` for its run (its `threads` option): the count the
    caller had is restored when the job returns or raises, so that a notebook or a test that calls the job keeps its
    own."""

    @functools.wraps(job)
    def run(*args, **kwargs):
        with torch_threads():
            return job(*args, **kwargs)

    return run
