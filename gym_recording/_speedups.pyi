from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")
_Layout = tuple[bytearray, Any, tuple[int, ...], bool]

class StepRecorder:
    room: int
    rows: tuple[list[Any], tuple[str, ...], tuple[type, ...]] | None
    row_room: int
    def __init__(
        self,
        slow: Callable[[Any, Any], Any],
        on_flags: Callable[[Any, Any], None],
        rewards: bytearray,
    ) -> None: ...
    def record(self, action: Any, result: _T, /) -> _T: ...
    def configure(
        self,
        observations: _Layout | None,
        actions: _Layout | None,
        keep_info: Callable[[Any], None] | None = None,
        /,
    ) -> None: ...
