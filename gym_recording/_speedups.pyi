from collections.abc import Callable, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T")

class StepRecorder:
    room: int
    fast: int
    def __init__(
        self,
        slow: Callable[[Any, Any], Any],
        on_flags: Callable[[Any, Any], None],
        rewards: list[Any],
    ) -> None: ...
    def record(self, action: Any, result: _T, /) -> _T: ...
    def configure(
        self,
        o_buf: bytearray | None,
        o_dtype: Any,
        o_shape: tuple[int, ...] | None,
        a_type: type | None,
        a_list: list[Any] | None,
        a_buf: bytearray | None,
        a_dtype: Any,
        a_shape: tuple[int, ...] | None,
    ) -> None: ...

def write_files(
    directory: str,
    files: Sequence[tuple[str, str, Sequence[Any], bool]],
    mode: int,
    published: list[str],
    /,
) -> int: ...

class WriteTask:
    def wait(self, published: list[str], /) -> int: ...

def start_write_files(
    directory: str,
    files: Sequence[tuple[str, str, Sequence[Any], bool]],
    mode: int,
    /,
) -> WriteTask: ...
def encode_spans(
    spans: list[Any],
    parts: tuple[bytes, ...],
    a_base: int,
    a_row: int,
    o_base: int,
    o_row: int,
    r_base: int,
    /,
) -> bytes: ...
def decode_plain(
    objs: Any,
    dtypes: dict[str, tuple[Any, int]],
    opened: dict[str, tuple[memoryview, int, bool]],
    open_blob: Callable[[str], tuple[memoryview, int, bool] | None],
    last_continues: bool,
    /,
) -> tuple[list[tuple[Any, ...]], int] | None: ...
def plain_episode(
    cls: type[_T], fields: dict[str, Any], plain: tuple[Any, ...], index: int, /
) -> _T: ...
def pack_list(values: list[Any], stop: int, kind: str, /) -> bytearray | None: ...
