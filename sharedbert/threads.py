"""The jobs' `threads` option sets torch's thread count for their run only: the caller's count is put back after."""

import functools

import torch


def restores_torch_threads(job):
    """Decorator for a job that may call `torch.set_num_threads` for its run (its `threads` option): the count the
    caller had is restored when the job returns or raises, so that a notebook or a test that calls the job keeps its
    own (torch's count is process-wide)."""

    @functools.wraps(job)
    def run(*args, **kwargs):
        threads = torch.get_num_threads()
        try:
            return job(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return run
