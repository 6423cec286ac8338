"""The exceptions the clients raise."""

from __future__ import annotations

import signal
from typing import Iterable, Optional, Tuple


class HammockError(Exception):
    """Base class of this package's own exceptions."""


class CommandError(HammockError):
    """hammock could not carry out a control command; `str(error)` is hammock's own message."""

    def __init__(self, message: str, op: str, id: int) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.id = id


class EngineExited(HammockError):
    """The hammock process ended.

    `returncode` follows `subprocess`: negative when a signal ended it (-9 for SIGKILL). `stderr_tail`
    holds the last lines hammock wrote on stderr (up to 50); `bye_reason` the reason of its `bye` line,
    if it wrote one. `expected` is true when this client stopped it (`close()`).
    """

    TAIL_IN_MESSAGE = 15

    def __init__(
        self,
        returncode: Optional[int],
        stderr_tail: Iterable[str] = (),
        bye_reason: Optional[str] = None,
        expected: bool = False,
    ) -> None:
        self.returncode = returncode
        self.stderr_tail: Tuple[str, ...] = tuple(stderr_tail)
        self.bye_reason = bye_reason
        self.expected = expected
        super().__init__(self._describe())

    def copy(self) -> "EngineExited":
        """A new exception with the same facts: one instance raised in several places would share its
        traceback."""
        return EngineExited(self.returncode, self.stderr_tail, self.bye_reason, self.expected)

    @property
    def signal(self) -> Optional[int]:
        """The number of the signal that ended hammock, if one did."""
        if self.returncode is not None and self.returncode < 0:
            return -self.returncode
        return None

    def _describe(self) -> str:
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            text = f"hammock was killed by {name} (status {self.returncode})"
        else:
            text = f"hammock exited with status {self.returncode}"
        if self.expected:
            text += " after this client stopped it"
        if self.bye_reason is not None:
            text += f" (bye: {self.bye_reason})"
        if self.stderr_tail:
            shown = self.stderr_tail[-self.TAIL_IN_MESSAGE :]
            text += "; its stderr ended with:\n" + "\n".join("  " + line for line in shown)
        else:
            text += "; it wrote nothing on stderr"
        return text
