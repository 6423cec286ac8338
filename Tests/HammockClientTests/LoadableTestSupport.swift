import Foundation
import HammockClient

/// A `Loadable` whose state the test sets by hand, recording the control calls it gets; no engine, no
/// sequence, so a test can give it any state at all (content, an error and a load in flight at once).
final class ManualLoadable<Content: Sendable>: Loadable {
    private let latest: LatestValue<LoadableState<Content>>
    let calls = CallLog()

    init(_ state: LoadableState<Content> = .initial) {
        latest = LatestValue(state, isDistinct: { _, _ in true })
    }

    var state: LoadableState<Content> { latest.value }
    var states: AsyncThrowingStream<LoadableState<Content>, any Error> { latest.stream }

    func set(_ state: LoadableState<Content>) { latest.send(state) }
    func finish(throwing error: (any Error)?) { latest.finish(throwing: error) }

    func load() async { await calls.record("load") }
    func loadIfNeeded() async { await calls.record("loadIfNeeded") }
    func cancel() async { await calls.record("cancel") }
}

actor CallLog {
    private(set) var calls: [String] = []
    func record(_ call: String) { calls.append(call) }
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// The first element of `sequence` that satisfies `predicate`; throws `TimedOut` after a generous deadline
/// (the machine running the tests is loaded, and nothing here should take more than milliseconds).
func first<S: AsyncSequence & Sendable>(
    _ what: String, of sequence: S, within deadline: Duration = .seconds(20),
    where predicate: @escaping @Sendable (S.Element) -> Bool
) async throws -> S.Element where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element.self) { group in
        group.addTask {
            for try await element in sequence where predicate(element) { return element }
            throw TimedOut(what: "\(what) (the sequence ended first)")
        }
        group.addTask {
            try await Task.sleep(for: deadline)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
