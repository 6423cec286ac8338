"""`Hammock`: runs `hammock run CONFIG` and follows it from threads."""

from __future__ import annotations

import concurrent.futures
import queue
import signal
import subprocess
import threading
import time
import weakref
from typing import IO, Any, Callable, Iterator, Mapping, Optional, Sequence, Tuple

from ._engine import (
    DEFAULT_MAX_LINE_BYTES,
    ClientCore,
    PathLike,
    QueueItem,
    UpdatesCore,
    bounded_lines,
    command_line,
    find_binary,
    parse_line,
    target_fields,
)
from ._errors import HammockError
from ._states import States, Update


class Updates(UpdatesCore, Iterator[Update]):
    """An iterator over every change from the moment it was made (see `Hammock.updates`).

    Iteration ends when `close()` stopped hammock, and raises `EngineExited` when hammock ended by
    itself. `get(timeout)` is `next()` with a limit.
    """

    def __init__(self, owner: "Hammock") -> None:
        super().__init__(owner)
        self._queue: "queue.SimpleQueue[QueueItem]" = queue.SimpleQueue()

    def __iter__(self) -> "Updates":
        return self

    def __next__(self) -> Update:
        return self._next(None)

    def get(self, timeout: Optional[float] = None) -> Update:
        """The next update; `TimeoutError` if none comes within `timeout` seconds."""
        return self._next(timeout)

    def _put(self, item: QueueItem) -> None:
        self._queue.put(item)

    def _next_item(self, timeout: Optional[float]) -> Tuple[Update, States]:
        if self._done:
            raise StopIteration
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no update from hammock within {timeout} s") from None
        unpacked = self._unpack(item)
        if unpacked is None:
            raise StopIteration
        return unpacked

    def _next(self, timeout: Optional[float]) -> Update:
        return self._next_item(timeout)[0]


class Hammock(ClientCore):
    """Runs `hammock run CONFIG` and keeps the latest state of every source and view.

    The constructor returns once hammock has written its `hello` (its configuration is valid and its
    plugins answer); use it as a context manager, or call `close()`, so hammock never outlives you.
    Every method may be called from any thread.

    `shared=True` runs `hammock attach CONFIG` instead: the configuration's shared engine, which every
    consumer of it reads (a bar per monitor, a dashboard, this program), started by `attach` when none runs
    and ending by itself a while after its last client (`hammock attach --idle-exit`, in `args`).
    `socket=` names its socket (`--socket`). The API is the same; `close()` ends this client, not the engine.
    """

    _name = "Hammock"

    def __init__(
        self,
        config: PathLike,
        *,
        binary: Optional[PathLike] = None,
        args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[PathLike] = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        command_timeout: Optional[float] = 60.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        shared: bool = False,
        socket: Optional[PathLike] = None,
    ) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        super().__init__(self._lock, stop_timeout, command_timeout)
        self._write_lock = threading.Lock()  # one control line at a time, whole
        self._max_line_bytes = max_line_bytes

        # A session of its own: a terminal's Ctrl-C reaches Python, whose `with` block then stops hammock
        # in order, instead of reaching both at once.
        self._proc = subprocess.Popen(
            command_line(find_binary(binary), config, args, shared, socket),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        # If the program ends without close(), the interpreter's exit still stops hammock.
        self._finalizer = weakref.finalize(self, _stop_process, self._proc)
        self._stderr_reader = threading.Thread(
            target=self._read_stderr, name=f"hammock-stderr-{self._proc.pid}", daemon=True
        )
        self._stdout_reader = threading.Thread(
            target=self._read_stdout, name=f"hammock-stdout-{self._proc.pid}", daemon=True
        )
        self._stderr_reader.start()
        self._stdout_reader.start()
        try:
            self._wait_for_hello(start_timeout)
        except BaseException:
            self.close()
            raise

    # Life cycle

    def __enter__(self) -> "Hammock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: Optional[float] = None) -> None:
        """Stop hammock: SIGTERM, then wait for its `bye` and exit; SIGKILL after `timeout` seconds
        (`stop_timeout` by default). Safe to call more than once and from any thread."""
        with self._lock:
            self._closing = True
        if self._proc.poll() is None:
            _signal(self._proc, signal.SIGTERM)
        self._stdout_reader.join(self._stop_timeout if timeout is None else timeout)
        if self._stdout_reader.is_alive():
            _signal(self._proc, signal.SIGKILL)
            self._stdout_reader.join(10.0)
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass  # a control line may be half written into a pipe nobody reads any more
        self._finalizer.detach()

    # The latest states: `states()`, `source(id)`, `view(id)` (in `ClientCore`), and the changes

    def updates(self, initial: bool = False) -> Updates:
        """An iterator over every change from now on: `SourceState`, `ViewState`, `Removed`, `Reloaded`
        and `ErrorReport` items, one per line, in hammock's order. Each iterator sees every change.

        With `initial=True` it starts with the current state of every source, then of every view (in the
        configuration's order), as Siesta tells a new observer at once; the default, `False`, starts at the
        next change, as before. A line this client cannot read (not JSON, too deep, beyond
        `max_line_bytes`) comes as an `ErrorReport`, and the lines after it as usual."""
        subscription = Updates(self)
        self._subscribe(subscription, initial)
        return subscription

    def wait_for(self, predicate: Callable[[States], Any], timeout: Optional[float] = 30.0) -> States:
        """Return the states as soon as `predicate(states)` is true: now, or after a later line.

        The predicate sees the states after every line in turn, so a passing state is not missed.
        Raises `TimeoutError` after `timeout` seconds and `EngineExited` if hammock ends first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        subscription = Updates(self)
        states = self._watch(subscription)
        try:
            if predicate(states):
                return states
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    _, states = subscription._next_item(remaining)
                except TimeoutError:
                    raise TimeoutError(f"the condition did not hold within {timeout} s") from None
                except StopIteration:
                    raise self._exit_error() or HammockError("hammock has stopped") from None
                if predicate(states):
                    return states
        finally:
            subscription.close()

    # Control: each returns once hammock has acknowledged the command

    def load(self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None) -> None:
        """Load now, even if fresh or already loading (a view: each of its sources)."""
        self.command("load", target_fields("load", source, view), timeout=timeout)

    def load_if_needed(
        self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None
    ) -> None:
        """Load unless a load is in flight or the data is up to date."""
        self.command("loadIfNeeded", target_fields("load_if_needed", source, view), timeout=timeout)

    def retry(self, *, view: Optional[str] = None, source: Optional[str] = None, timeout: Optional[float] = None) -> None:
        """Load every failing source of the view (the "try again" button), or the source."""
        self.command("retry", target_fields("retry", source, view), timeout=timeout)

    def cancel(self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None) -> None:
        """Cancel the loads in flight."""
        self.command("cancel", target_fields("cancel", source, view), timeout=timeout)

    def wipe(self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None) -> None:
        """Forget content and error."""
        self.command("wipe", target_fields("wipe", source, view), timeout=timeout)

    def override(self, source: str, content: Any, *, timeout: Optional[float] = None) -> None:
        """Set a source's content (any JSON-serializable value)."""
        self.command("override", {"source": source, "content": content}, timeout=timeout)

    def more(self, source: str, count: int = 1, *, timeout: Optional[float] = None) -> None:
        """Load `count` more pages of a paginated source (a rest source with `paginate: {lazy: true}`); returns
        once they are in. Raises `CommandError` when there are none (`state.has_more` is false) or they did
        not come."""
        self.command("more", {"source": source, "count": count}, timeout=timeout)

    def snapshot(self, *, timeout: Optional[float] = None) -> States:
        """Have hammock write every state again; returns the states once all of it has been read."""
        return self.command("snapshot", timeout=timeout)

    def reload(self, *, timeout: Optional[float] = None) -> None:
        """Read the configuration file again. A refused file raises `CommandError` listing its problems
        (the running configuration goes on)."""
        self.command("reload", timeout=timeout)

    def command(
        self, op: str, fields: Optional[Mapping[str, Any]] = None, *, timeout: Optional[float] = None
    ) -> States:
        """Send `{"op": op, **fields, "id": …}` and wait for hammock's answer.

        Returns the states as of the `ack`: every line the command caused at once has been applied.
        Raises `CommandError` with hammock's message, `EngineExited` if hammock ends first, and
        `TimeoutError` after `timeout` seconds (None: the client's `command_timeout`).
        """
        if timeout is None:
            timeout = self._command_timeout
        answer: "concurrent.futures.Future[States]" = concurrent.futures.Future()
        id, line = self._register(op, fields, answer)
        try:
            with self._write_lock:
                stdin = self._proc.stdin
                assert stdin is not None
                stdin.write(line)
                stdin.flush()
        except (OSError, ValueError):
            self._forget(id)
            self._stdout_reader.join(5.0)  # the pipe broke because hammock is ending: report its exit
            raise self._write_failed() from None
        try:
            return answer.result(timeout)
        except concurrent.futures.TimeoutError:
            self._forget(id)
            raise TimeoutError(
                f"hammock did not answer {op!r} within {timeout} s (it may still carry it out){self._unanswered_note()}"
            ) from None

    # Internals

    def _wait_for_hello(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._model.hello is None and self._exit is None and self._fatal is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            fatal, hello = self._fatal, self._model.hello
        if fatal is not None:
            raise fatal
        if hello is None:
            error = self._exit_error()
            if error is not None:
                raise error
            raise TimeoutError(f"hammock wrote no hello within {timeout} s")

    def _read_stdout(self) -> None:
        stream: Optional[IO[bytes]] = self._proc.stdout
        try:
            assert stream is not None
            for raw in bounded_lines(stream, self._max_line_bytes):
                self._apply(raw if not isinstance(raw, bytes) else parse_line(raw))
        except (OSError, ValueError):
            pass  # the pipe was closed under us: hammock is gone either way
        finally:
            self._record_exit()
            if stream is not None:
                stream.close()

    def _record_exit(self) -> None:
        returncode = self._proc.wait()
        self._stderr_reader.join(2.0)  # its last lines usually say why
        self._exited(returncode)

    def _read_stderr(self) -> None:
        stream = self._proc.stderr
        try:
            assert stream is not None
            for raw in bounded_lines(stream, 1 << 20):
                if isinstance(raw, bytes):
                    self._note_stderr(raw)
            stream.close()
        except (OSError, ValueError):
            pass

    # What `ClientCore` asks of a client

    def _running_process(self) -> "subprocess.Popen[bytes]":
        return self._proc

    def _process_if_started(self) -> "subprocess.Popen[bytes]":
        return self._proc

    def _terminate(self) -> None:
        _signal(self._proc, signal.SIGTERM)

    def _wake_locked(self) -> None:
        self._changed.notify_all()


def _signal(process: "subprocess.Popen[bytes]", signum: int) -> None:
    try:
        if process.poll() is None:
            process.send_signal(signum)
    except (ProcessLookupError, OSError):
        pass  # it has just exited


def _stop_process(process: "subprocess.Popen[bytes]") -> None:
    """The last resort when a `Hammock` was never closed: SIGTERM, a short wait, then SIGKILL."""
    _signal(process, signal.SIGTERM)
    try:
        process.wait(5.0)
    except subprocess.TimeoutExpired:
        _signal(process, signal.SIGKILL)
        process.wait()
