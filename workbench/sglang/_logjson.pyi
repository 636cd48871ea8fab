# The compiled JSON writer of bulk log lines (_logjson.c): buffers are numpy arrays, bytes or
# bytearrays of the item sizes the C code names.
from typing import Any

def emit(
    data: Any,
    todo: Any,
    line_no: Any,
    starts: Any,
    first: bool,
    mops: Any,
    eops: Any,
    lit_off: Any,
    lit_len: Any,
    lits: Any,
    out: Any,
    done: Any,
    ends: Any,
) -> tuple[int, int]: ...
def merge(b0: Any, e0: Any, n0: Any, b1: Any, e1: Any, n1: Any, b2: Any, e2: Any, n2: Any, out: Any) -> int: ...
