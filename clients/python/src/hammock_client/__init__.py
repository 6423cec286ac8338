"""Run hammock from Python: the latest state of every source and view, updates, acknowledged control.

    from hammock_client import Hammock

    with Hammock("configs/demo.yaml") as h:
        h.wait_for(lambda s: s.view("system").content is not None)
        print(h.view("system").content)
"""

from ._async import AsyncHammock, AsyncUpdates
from ._errors import CommandError, EngineExited, HammockError
from ._states import ErrorReport, LoadError, Reloaded, Removed, SourceState, States, Update, ViewState
from ._sync import Hammock, Updates

__version__ = "0.1.0"

__all__ = [
    "AsyncHammock",
    "AsyncUpdates",
    "CommandError",
    "EngineExited",
    "ErrorReport",
    "Hammock",
    "HammockError",
    "LoadError",
    "Reloaded",
    "Removed",
    "SourceState",
    "States",
    "Update",
    "Updates",
    "ViewState",
]
