"""torch's coalesced all_reduce batches for clients_check.py: finding
torch.distributed's _coalescing_manager, and unwinding a batch that failed (its pending-op list
and the NCCL group it opened), so that one failed batch does not break the scenarios after it.
No collective is issued here; torch is imported only inside the functions.
"""
import inspect

# torch.distributed's _coalescing_manager(group, device, async_ops) (torch >= 2.1) records the
# all_reduces of its body in _world.pg_coalesce_state[group] instead of issuing them, and on exit
# issues them as one group.allreduce_coalesced (which requires one dtype and one op); with device=
# it also brackets them in group._start_coalescing(device) / _end_coalescing(device), that is an
# ncclGroupStart / ncclGroupEnd. It is a generator context manager without try/finally: an
# exception in the body or in allreduce_coalesced leaves the op list behind (every later
# all_reduce on that group is then only recorded, never run) and the NCCL group open (NCCL's
# group depth is per thread: every later NCCL call of the thread, on any communicator, is then
# deferred, and a CUDA graph capture fails with "Streams given to a communicator within a NCCL
# group must either be all uncaptured or all captured by the same graph"). unwind_coalescing()
# undoes both.


def coalescing_manager():
    """torch's _coalescing_manager if it takes device= and async_ops= (torch >= 2.1), else None."""
    try:
        from torch.distributed import distributed_c10d as c10d
        params = inspect.signature(c10d._coalescing_manager).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if "device" not in params or "async_ops" not in params:
        return None
    return c10d._coalescing_manager


def _end_coalescing_line(manager):
    """The line of manager's source that calls _end_coalescing (the last code line that does, so
    that a docstring or comment mentioning it does not count), or None."""
    try:
        fn = inspect.unwrap(manager)
        lines, first = inspect.getsourcelines(fn)
    except (TypeError, OSError, ValueError):
        return None
    found = None
    for i, line in enumerate(lines):
        if "._end_coalescing(" in line and not line.lstrip().startswith(("#", ">>>")):
            found = first + i
    return found


def coalescing_ended(manager, exc):
    """Whether exc was raised by, or after, the manager's own _end_coalescing call (the NCCL group
    is closed then: closing it again would be an unmatched ncclGroupEnd)."""
    end_line = _end_coalescing_line(manager)
    if end_line is None:
        return False
    code = getattr(inspect.unwrap(manager), "__code__", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code and tb.tb_lineno >= end_line:
            return True
        tb = tb.tb_next
    return False


def unwind_coalescing(group, device, close_group=True):
    """Drops torch's pending-op list of `group` and, if close_group, ends the coalescing it started
    (ProcessGroupNCCL.endCoalescing: ncclGroupEnd, coalescing state reset). Returns notes."""
    from torch.distributed import distributed_c10d as c10d
    notes = []
    pg = group if group is not None else c10d._get_default_group()
    state = getattr(getattr(c10d, "_world", None), "pg_coalesce_state", None)
    if isinstance(state, dict) and pg in state:
        notes.append(f"dropped torch's pending-op list ({len(state.pop(pg))} ops)")
    if close_group:
        try:
            pg._end_coalescing(device)
            notes.append("closed the open coalescing group")
        except Exception as exc:  # noqa: BLE001 - nothing was open, or the backend has no coalescing
            notes.append(f"_end_coalescing: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
    else:
        notes.append("the batch's NCCL group was already closed")
    return notes


def leaked_coalescing_groups():
    """The process groups with a pending-op list (a coalescing manager that never finished)."""
    from torch.distributed import distributed_c10d as c10d
    state = getattr(getattr(c10d, "_world", None), "pg_coalesce_state", None)
    return list(state) if isinstance(state, dict) else []
