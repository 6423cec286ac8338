import HammockSystem
import Synchronization
import Testing

/// Runs `body` on a thread of its own and returns what it returns, waiting without holding one of the
/// cooperative pool's threads.
///
/// Swift Testing runs the whole suite's tests at once on that pool, which has two threads on a 2-core
/// machine: a test that blocks one of them (a write to a pipe or socket that may fill, a read, a `poll`, a
/// `recv` with a timeout) takes it from every other test, and with both blocked nothing else runs, not even
/// the task the blocked call may be waiting for. Such calls go here. Throws when `body` has not returned
/// within `timeout`, naming `what` it waited for; its thread is then left to end by itself (a blocked write
/// ends once the test has stopped the process at the other end).
public func onOwnThread<Value: Sendable>(
    _ what: String, timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable () -> Value
) async throws -> Value {
    let outcome = ThreadOutcome<Value>()
    let timer = Task {
        try? await Task.sleep(for: timeout)
        outcome.finish(nil)  // nothing when `body` has returned already
    }
    defer { timer.cancel() }
    let value = await withCheckedContinuation { continuation in
        outcome.wait(continuation)
        OwnThread.start(named: "test.blocking") { outcome.finish(body()) }
    }
    guard let value else {
        throw HammockHarnessError(message: "\(what) did not end within \(timeout)", sourceLocation: sourceLocation)
    }
    return value
}

/// The first of the thread's value and the timer's nil, handed to the one waiter.
private final class ThreadOutcome<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value?, Never>?
        /// nil until the first `finish`; then what it brought (nil: the timer's).
        var result: Value??
    }
    private let state = Mutex(State())

    func wait(_ continuation: CheckedContinuation<Value?, Never>) {
        let ready = state.withLock { state -> Value?? in
            if let result = state.result { return .some(result) }
            state.continuation = continuation
            return .none
        }
        if let ready { continuation.resume(returning: ready) }
    }

    func finish(_ value: Value?) {
        let waiter = state.withLock { state -> CheckedContinuation<Value?, Never>? in
            guard state.result == nil else { return nil }
            state.result = .some(value)
            defer { state.continuation = nil }
            return state.continuation
        }
        waiter?.resume(returning: value)
    }
}
