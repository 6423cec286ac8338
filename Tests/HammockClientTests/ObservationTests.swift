import Foundation
import HammockClient
import Observation
import Testing

/// `LoadableModel`: Observation sees every change of the loadable it follows, on the main actor.
@MainActor
@Suite struct ObservationModels {
    @Test func aChangeOfTheLoadableIsObserved() async throws {
        let source = ManualLoadable<Int>(LoadableState(isLoading: true))
        let model = LoadableModel(source)
        #expect(model.isLoading)
        #expect(model.content == nil)

        let (changes, changed) = AsyncStream.makeStream(of: Void.self)
        withObservationTracking {
            _ = model.content
        } onChange: {
            changed.yield()
        }
        source.set(LoadableState(content: 7, timestamp: Date()))
        _ = try await first("an observed change", of: changes) { true }
        // onChange runs as the property is about to change; the model sets it in the same main-actor turn.
        await Task.yield()
        #expect(model.content == 7)
        #expect(!model.isLoading)
        #expect(model.latestError == nil)
    }

    @Test func theModelFollowsAnAsyncSequenceAndItsControlsReachIt() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: String.self)
        let model = LoadableModel(stream.loadable())
        feed.yield("a")
        feed.finish()
        try await eventually("the content") { model.content == "a" && !model.isLoading }
        try await model.load()  // a once-sequence does not restart: the model stays on its content
        #expect(model.content == "a")
    }

    @Test func anEndWithAnErrorIsKept() async throws {
        struct EngineGone: Error {}
        let source = ManualLoadable<Int>(LoadableState(content: 1))
        let model = LoadableModel(source)
        #expect(model.streamError == nil)
        source.finish(throwing: EngineGone())
        try await eventually("the end") { model.streamError != nil }
        #expect(model.streamError is EngineGone)
        #expect(model.content == 1)
    }

    @Test func theCallsReachTheLoadable() async throws {
        let source = ManualLoadable<Int>()
        let model = LoadableModel(source)
        try await model.load()
        try await model.loadIfNeeded()
        try await model.cancel()
        #expect(await source.calls.calls == ["load", "loadIfNeeded", "cancel"])
    }

    @Test func aViewModelShowsAGroupAndItsChangesAreObserved() async throws {
        let member = ManualLoadable<Int>(LoadableState(content: 1))
        let failing = ManualLoadable<Int>(LoadableState(isLoading: true))
        let group = LoadableGroup(ready: .any, display: .overlay, members: ["a": member, "b": failing])
        let model = ViewModel(group)
        #expect(model.status == .loading)
        #expect(model.content?["a", as: Int.self] == 1)

        let (changes, changed) = AsyncStream.makeStream(of: Void.self)
        withObservationTracking {
            _ = model.status
        } onChange: {
            changed.yield()
        }
        failing.set(LoadableState(latestError: LoadError(message: "down", httpStatus: 503), failures: 1))
        _ = try await first("an observed change", of: changes) { true }
        try await eventually("the error status") { model.status == .error }
        #expect(model.canTryAgain)
        #expect(model.errors.map(\.source) == ["b"])
        #expect(model.latestError?.httpStatus == 503)
        try await model.retry()
        #expect(await failing.calls.calls == ["load"])
        #expect(await member.calls.calls == [])
    }

    @Test func aViewModelShowsAFakeHammockView() {
        let model = ViewModel(TypedView<[String: Int]>.fakeFailure(LoadError(message: "gone"), source: "api"))
        #expect(model.status == .error)
        #expect(model.errors == [ViewError(source: "api", error: LoadError(message: "gone"))])
        #expect(model.canTryAgain)
        #expect(model.content == nil)
    }

    /// Polls a main-actor model until `condition` holds, with a generous deadline (the machine is loaded).
    private func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
