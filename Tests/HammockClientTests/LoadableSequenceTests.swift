import Foundation
import HammockClient
import Synchronization
import Testing

/// `.loadable()` and `LoadableSequence`: any AsyncSequence as a `Loadable`, in process.
@Suite struct LoadableSequences {
    @Test func isLoadingUntilTheFirstElementThenTheLatestElementIsTheContent() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let loadable = stream.loadable()
        #expect(loadable.state.isLoading)
        #expect(loadable.state.content == nil)
        #expect(loadable.state.timestamp == nil)

        feed.yield(1)
        let loaded = try await first("content 1", of: loadable.states) { $0.content == 1 }
        #expect(!loaded.isLoading)
        #expect(loaded.latestError == nil)
        #expect(loaded.timestamp != nil)

        feed.yield(2)
        _ = try await first("content 2", of: loadable.states) { $0.content == 2 }
        var contents = loadable.contents.makeAsyncIterator()
        #expect(try await contents.next() == 2)
    }

    @Test func aThrownErrorIsTheLatestErrorAndKeepsTheContent() async throws {
        let (stream, feed) = AsyncThrowingStream.makeStream(of: String.self)
        let loadable = stream.loadable()
        feed.yield("stale")
        _ = try await first("content", of: loadable.states) { $0.content == "stale" }
        feed.finish(throwing: LoadError(message: "socket closed", code: "closed"))
        let failed = try await first("error", of: loadable.states) { $0.latestError != nil }
        #expect(failed.latestError == LoadError(message: "socket closed", code: "closed"))
        #expect(failed.content == "stale")
        #expect(failed.failures == 1)
        #expect(!failed.isLoading)
    }

    @Test func anErrorOfAnotherTypeIsDescribed() async throws {
        struct Broken: Error, CustomStringConvertible { var description: String { "the feed broke" } }
        let (stream, feed) = AsyncThrowingStream.makeStream(of: Int.self)
        let loadable = stream.loadable()
        feed.finish(throwing: Broken())
        let failed = try await first("error", of: loadable.states) { $0.latestError != nil }
        #expect(failed.latestError?.message == "the feed broke")
        #expect(failed.content == nil)
    }

    @Test func endingNormallyKeepsTheLastElementAndAOnceSequenceDoesNotRestart() async throws {
        let loadable = [7, 8, 9].async.loadable()
        let done = try await first("9, done", of: loadable.states) { $0.content == 9 && !$0.isLoading }
        #expect(done.latestError == nil)
        try await loadable.load()
        try await loadable.loadIfNeeded()
        // Restarting sets isLoading at once, on the actor; a once-sequence does not restart.
        #expect(!loadable.state.isLoading)
        #expect(loadable.state.content == 9)
    }

    /// The restart rules: `loadIfNeeded` restarts only what failed or was cancelled, `load` restarts always.
    @Test func aRestartableSequenceIsMadeAgain() async throws {
        let made = Atomic<Int>(0)
        let loadable = LoadableSequence {
            let run = made.add(1, ordering: .sequentiallyConsistent).newValue
            return AsyncThrowingStream<Int, any Error> { feed in
                feed.yield(run * 10)
                feed.finish(throwing: run == 1 ? LoadError(message: "first run fails") : nil)
            }
        }
        let failed = try await first("the first run's error", of: loadable.states) { $0.latestError != nil }
        #expect(failed.content == 10)
        #expect(failed.failures == 1)

        try await loadable.loadIfNeeded()
        let second = try await first("the second run", of: loadable.states) { $0.content == 20 && !$0.isLoading }
        #expect(second.latestError == nil)
        #expect(second.failures == 0)

        // Ended normally: its content is final, there is nothing to load if needed.
        try await loadable.loadIfNeeded()
        #expect(!loadable.state.isLoading)
        #expect(made.load(ordering: .sequentiallyConsistent) == 2)

        try await loadable.load()
        _ = try await first("the third run", of: loadable.states) { $0.content == 30 }
        #expect(made.load(ordering: .sequentiallyConsistent) == 3)
    }

    @Test func cancelStopsTheSequenceWithoutAnError() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let (terminated, terminate) = AsyncStream.makeStream(of: Void.self)
        feed.onTermination = { _ in terminate.yield() }
        let loadable = stream.loadable()
        feed.yield(1)
        _ = try await first("content", of: loadable.states) { $0.content == 1 }
        try await loadable.cancel()
        #expect(!loadable.state.isLoading)
        #expect(loadable.state.latestError == nil)
        #expect(loadable.state.content == 1)
        _ = try await first("the sequence's termination", of: terminated) { true }
    }

    @Test func aLoadableNobodyHoldsStopsItsSequence() async throws {
        let (terminated, terminate) = AsyncStream.makeStream(of: Void.self)
        do {
            let (stream, feed) = AsyncStream.makeStream(of: Int.self)
            feed.onTermination = { _ in terminate.yield() }
            let loadable = stream.loadable()
            feed.yield(1)
            _ = try await first("content", of: loadable.states) { $0.content == 1 }
        }
        _ = try await first("the sequence's termination", of: terminated) { true }
    }

    @Test func loadWhileRunningRestartsAndDropsTheOldRun() async throws {
        let made = Atomic<Int>(0)
        let feeds = LatestValue<[AsyncStream<Int>.Continuation]>([], isDistinct: { _, _ in true })
        let loadable = LoadableSequence {
            made.add(1, ordering: .sequentiallyConsistent)
            let (stream, feed) = AsyncStream.makeStream(of: Int.self)
            feeds.send(feeds.value + [feed])
            return stream
        }
        let firstFeed = try await first("the first run", of: feeds.stream) { $0.count == 1 }[0]
        firstFeed.yield(1)
        _ = try await first("content 1", of: loadable.states) { $0.content == 1 }

        try await loadable.load()
        #expect(loadable.state.isLoading)
        #expect(loadable.state.content == 1)
        let secondFeed = try await first("the second run", of: feeds.stream) { $0.count == 2 }[1]
        firstFeed.yield(99)  // the old run was cancelled: dropped
        secondFeed.yield(2)
        let restarted = try await first("content 2", of: loadable.states) { $0.content != 1 }
        #expect(restarted.content == 2)
        #expect(!restarted.isLoading)
    }
}

extension Array where Element: Sendable {
    /// The array as an AsyncSequence that ends after its last element.
    var async: AsyncStream<Element> {
        AsyncStream { feed in
            for element in self { feed.yield(element) }
            feed.finish()
        }
    }
}
