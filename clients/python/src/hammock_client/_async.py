"""`AsyncHammock`: the same client over asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import weakref
from typing import Any, AsyncIterator, Callable, Mapping, Optional, Sequence, Tuple, Union

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
    too_long,
    target_fields,
)
from ._errors import HammockError
from ._states import States, Update


class AsyncUpdates(UpdatesCore, AsyncIterator[Update]):
    """An async iterator over every change from the moment it was made (see `AsyncHammock.updates`)."""

    def __init__(self, owner: "AsyncHammock") -> None:
        super().__init__(owner)
        self._queue: "asyncio.Queue[QueueItem]" = asyncio.Queue()

    def __aiter__(self) -> "AsyncUpdates":
        return self

    async def __anext__(self) -> Update:
        return (await self._next_item(None))[0]

    async def get(self, timeout: Optional[float] = None) -> Update:
        """The next update; `TimeoutError` if none comes within `timeout` seconds; `StopAsyncIteration`
        once `close()` has stopped hammock."""
        return (await self._next_item(timeout))[0]

    def _put(self, item: QueueItem) -> None:
        self._queue.put_nowait(item)

    async def _next_item(self, timeout: Optional[float]) -> Tuple[Update, States]:
        if self._done:
            raise StopAsyncIteration
        try:
            # What waits already is taken at once: `wait_for` with a timeout of 0 would not even look.
            item = self._queue.get_nowait()
        except asyncio.QueueEmpty:
            try:
                if timeout is not None and timeout <= 0:
                    raise asyncio.TimeoutError
                item = await asyncio.wait_for(self._queue.get(), timeout)
            except asyncio.TimeoutError:
                # Before Python 3.11 asyncio's TimeoutError is not the built-in one.
                raise TimeoutError(f"no update from hammock within {timeout} s") from None
        unpacked = self._unpack(item)
        if unpacked is None:
            raise StopAsyncIteration
        return unpacked


class AsyncHammock(ClientCore):
    """`Hammock` over asyncio: `async with AsyncHammock(config) as h:` starts hammock and waits for its
    `hello`; the control methods, `wait_for` and `close` are coroutines, the state readers are not.
    `shared=True` and `socket=`: the configuration's shared engine, through `hammock attach` (see `Hammock`)."""

    _name = "AsyncHammock"

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
        # Everything runs on the event loop's one thread: the shared state needs no lock.
        super().__init__(contextlib.nullcontext(), stop_timeout, command_timeout)
        self._argv = command_line(find_binary(binary), config, args, shared, socket)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._start_timeout = start_timeout
        self._max_line_bytes = max_line_bytes
        self._proc: Optional[asyncio.subprocess.Process] = None
        # Made in start(): before Python 3.10 asyncio objects bind to the loop current when they are made.
        self._started: "Optional[asyncio.Future[None]]" = None
        self._write_lock: Optional[asyncio.Lock] = None
        self._stdout_task: "Optional[asyncio.Future[None]]" = None
        self._stderr_task: "Optional[asyncio.Future[None]]" = None
        self._finalizer: "Optional[weakref.finalize[..., AsyncHammock]]" = None

    async def __aenter__(self) -> "AsyncHammock":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> "AsyncHammock":
        """Start hammock and return once it has written `hello` (`async with` calls this)."""
        if self._proc is not None:
            raise HammockError("this AsyncHammock has been started already")
        loop = asyncio.get_running_loop()
        self._started = loop.create_future()
        self._write_lock = asyncio.Lock()
        self._proc = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env,
            cwd=self._cwd,
            start_new_session=True,
        )
        self._finalizer = weakref.finalize(self, _terminate, self._proc)
        self._stderr_task = asyncio.ensure_future(self._read_stderr())
        self._stdout_task = asyncio.ensure_future(self._read_stdout())
        try:
            await asyncio.wait_for(asyncio.shield(self._started), self._start_timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise TimeoutError(f"hammock wrote no hello within {self._start_timeout} s") from None
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self, timeout: Optional[float] = None) -> None:
        """Stop hammock: SIGTERM, wait for `bye` and its exit, SIGKILL after `timeout` seconds
        (`stop_timeout` by default). Safe to call more than once."""
        proc, reader = self._proc, self._stdout_task
        if proc is None or reader is None:
            return
        self._closing = True
        _signal(proc, signal.SIGTERM)
        try:
            try:
                await asyncio.wait_for(asyncio.shield(reader), self._stop_timeout if timeout is None else timeout)
            except asyncio.TimeoutError:
                _signal(proc, signal.SIGKILL)
                await asyncio.wait_for(asyncio.shield(reader), 10.0)
        except BaseException:
            _signal(proc, signal.SIGKILL)  # cancelled mid-stop: hammock still must not outlive us
            raise
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            if self._finalizer is not None:
                self._finalizer.detach()

    # The latest states: `states()`, `source(id)`, `view(id)` (in `ClientCore`), and the changes

    def updates(self, initial: bool = False) -> AsyncUpdates:
        """An async iterator over every change from now on (call it inside the event loop); with
        `initial=True`, first every source's and view's current state (see `Hammock.updates`)."""
        subscription = AsyncUpdates(self)
        self._subscribe(subscription, initial)
        return subscription

    async def wait_for(self, predicate: Callable[[States], Any], timeout: Optional[float] = 30.0) -> States:
        """Return the states as soon as `predicate(states)` is true, now or after a later line."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        subscription = AsyncUpdates(self)
        states = self._watch(subscription)
        try:
            if predicate(states):
                return states
            while True:
                remaining = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    _, states = await subscription._next_item(remaining)
                except TimeoutError:
                    raise TimeoutError(f"the condition did not hold within {timeout} s") from None
                except StopAsyncIteration:
                    raise self._exit_error() or HammockError("hammock has stopped") from None
                if predicate(states):
                    return states
        finally:
            subscription.close()

    # Control

    async def load(self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None) -> None:
        await self.command("load", target_fields("load", source, view), timeout=timeout)

    async def load_if_needed(
        self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None
    ) -> None:
        await self.command("loadIfNeeded", target_fields("load_if_needed", source, view), timeout=timeout)

    async def retry(self, *, view: Optional[str] = None, source: Optional[str] = None, timeout: Optional[float] = None) -> None:
        await self.command("retry", target_fields("retry", source, view), timeout=timeout)

    async def cancel(self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None) -> None:
        await self.command("cancel", target_fields("cancel", source, view), timeout=timeout)

    async def wipe(self, *, source: Optional[str] = None, view: Optional[str] = None, timeout: Optional[float] = None) -> None:
        await self.command("wipe", target_fields("wipe", source, view), timeout=timeout)

    async def override(self, source: str, content: Any, *, timeout: Optional[float] = None) -> None:
        await self.command("override", {"source": source, "content": content}, timeout=timeout)

    async def more(self, source: str, count: int = 1, *, timeout: Optional[float] = None) -> None:
        """Load `count` more pages of a paginated source; returns once they are in (see `Hammock.more`)."""
        await self.command("more", {"source": source, "count": count}, timeout=timeout)

    async def snapshot(self, *, timeout: Optional[float] = None) -> States:
        return await self.command("snapshot", timeout=timeout)

    async def reload(self, *, timeout: Optional[float] = None) -> None:
        await self.command("reload", timeout=timeout)

    async def command(
        self, op: str, fields: Optional[Mapping[str, Any]] = None, *, timeout: Optional[float] = None
    ) -> States:
        """Send `{"op": op, **fields, "id": …}`; return the states as of hammock's ack (see `Hammock.command`)."""
        if timeout is None:
            timeout = self._command_timeout
        proc = self._running_process()
        answer: "asyncio.Future[States]" = asyncio.get_running_loop().create_future()
        id, line = self._register(op, fields, answer)
        try:
            assert proc.stdin is not None and self._write_lock is not None
            async with self._write_lock:  # concurrent drain() calls are not allowed before Python 3.10
                proc.stdin.write(line)
                await proc.stdin.drain()
        except (OSError, RuntimeError):
            self._forget(id)
            if self._stdout_task is not None:
                await asyncio.wait([self._stdout_task], timeout=5.0)
            raise self._write_failed() from None
        try:
            return await asyncio.wait_for(asyncio.shield(answer), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"hammock did not answer {op!r} within {timeout} s (it may still carry it out){self._unanswered_note()}"
            ) from None
        finally:
            self._forget(id)

    # Internals

    async def _read_stdout(self) -> None:
        proc = self._running_process()
        assert proc.stdout is not None
        try:
            async for raw in _lines(proc.stdout, self._max_line_bytes):
                self._apply(parse_line(raw) if isinstance(raw, bytes) else too_long(raw, self._max_line_bytes))
        except (OSError, ValueError):
            pass
        finally:
            await self._record_exit()

    async def _record_exit(self) -> None:
        proc = self._running_process()
        returncode = await proc.wait()
        if self._stderr_task is not None:
            await asyncio.wait([self._stderr_task], timeout=2.0)  # its last lines usually say why
        if self._finalizer is not None:
            self._finalizer.detach()
        self._exited(returncode)

    async def _read_stderr(self) -> None:
        proc = self._running_process()
        assert proc.stderr is not None
        try:
            async for raw in _lines(proc.stderr, 1 << 20):
                if not isinstance(raw, bytes):
                    continue
                self._note_stderr(raw)
        except (OSError, ValueError):
            pass

    # What `ClientCore` asks of a client

    def _running_process(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            raise HammockError("this AsyncHammock has not been started: use `async with` or `await start()`")
        return self._proc

    def _process_if_started(self) -> Optional[asyncio.subprocess.Process]:
        return self._proc

    def _terminate(self) -> None:
        _signal(self._running_process(), signal.SIGTERM)

    def _wake_locked(self) -> None:
        started = self._started
        if started is None or started.done():
            return
        if self._fatal is not None:
            started.set_exception(self._fatal)
        elif self._model.hello is not None:
            started.set_result(None)
        elif self._exit is not None:
            started.set_exception(self._exit.copy())


async def _lines(stream: asyncio.StreamReader, max_line_bytes: int) -> AsyncIterator[Union[bytes, int]]:
    """Lines without their newline, up to `max_line_bytes` (`StreamReader.readline` stops at 64 KiB). A
    longer line is read to its end without being kept, and given as its length."""
    buffer = bytearray()
    searched = 0
    skipped: Optional[int] = None  # the length so far of a line beyond the bound, while it is skipped
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            if skipped is not None:
                yield skipped + len(buffer)
            elif buffer:
                yield bytes(buffer)
            return
        buffer += chunk
        while True:
            end = buffer.find(b"\n", searched)
            if end < 0:
                searched = len(buffer)
                if skipped is not None:
                    skipped += len(buffer)
                    del buffer[:]
                    searched = 0
                elif len(buffer) > max_line_bytes:
                    skipped = len(buffer)
                    del buffer[:]
                    searched = 0
                break
            if skipped is not None:
                yield skipped + end
                skipped = None
            elif end > max_line_bytes:
                yield end
            else:
                yield bytes(buffer[:end])
            del buffer[: end + 1]
            searched = 0


def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
    if process.returncode is not None:
        return
    try:
        process.send_signal(signum)
    except (ProcessLookupError, OSError):
        pass  # it has just exited


def _terminate(process: asyncio.subprocess.Process) -> None:
    """The last resort when an `AsyncHammock` was never closed: SIGTERM makes hammock stop its plugins.
    (Detached once the exit is recorded, so a reused pid is never signalled.)"""
    _signal(process, signal.SIGTERM)
