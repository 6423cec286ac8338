import Foundation
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@testable import HammockClient

@Suite("Control calls return on the engine's acknowledgement")
struct ClientControlTests {
    /// `slow` takes a while to load, so a load is still in flight when the call returns.
    static let config = """
        version: 1
        sources:
          greeting:
            kind: fake
            content: { text: "hello", count: 3 }
          slow:
            kind: fake
            content: { text: "slow", count: 1 }
            delay: 30s
          failing:
            kind: fake
            state: error
            error: { message: "upstream is down", httpStatus: 503 }
            retry: { initial: 1h, max: 1h }
        views:
          pair:
            sources: [greeting, failing]
            ready: any
        """

    @Test("every op on a source is acknowledged, with its immediate states already in")
    func sourceOps() async throws {
        try await withClientEngine(config: Self.config) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            _ = try await first("greeting's content", in: greeting.contents)

            try await greeting.override(Greeting(text: "set by the app", count: 7))
            #expect(greeting.state.content == Greeting(text: "set by the app", count: 7))

            try await greeting.wipe()
            #expect(greeting.state.content == nil)
            #expect(greeting.state.timestamp == nil)

            try await greeting.load()
            _ = try await first("greeting's reloaded content", in: greeting.contents)
            try await greeting.loadIfNeeded()
            try await greeting.retry()

            let slow = await hammock.source("slow", as: Greeting.self)
            try await slow.load()
            // The `requested` line comes before the ack.
            #expect(slow.state.isLoading)
            try await slow.cancel()
            #expect(!slow.state.isLoading)

            try await hammock.snapshot()
        }
    }

    @Test("a source's latestEvent is its line's event and origin")
    func latestEvent() async throws {
        try await withClientEngine(config: Self.config) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            let slow = await hammock.source("slow", as: Greeting.self)
            let failing = await hammock.source("failing")
            _ = try await first("greeting's first load", in: greeting.states) { $0.latestEvent == .newData(.load) }
            _ = try await first("failing's error", in: failing.states) { $0.latestEvent == .error }
            // Each call returns once the lines it caused are in.
            try await greeting.override(Greeting(text: "set", count: 1))
            #expect(greeting.state.latestEvent == .newData(.override))
            try await greeting.wipe()
            #expect(greeting.state.latestEvent == .newData(.wipe))
            #expect(greeting.state.content == nil)
            try await slow.load()
            #expect(slow.state.latestEvent == .requested)
            try await slow.cancel()
            #expect(slow.state.latestEvent == .requestCancelled)
        }
        // Views, groups and the app's own sequences have no events.
        #expect(TypedView.fake(Greeting(text: "x", count: 0)).state.latestEvent == nil)
        // The wire's names, and those this version does not know (a newer engine's), which give nil.
        #expect(LoadableEvent(event: "notModified", origin: nil) == .notModified)
        #expect(LoadableEvent(event: "newData", origin: "push") == .newData(.push))
        #expect(LoadableEvent(event: "newData", origin: "teleport") == nil)
        #expect(LoadableEvent(event: "somethingNew", origin: nil) == nil)
        #expect(LoadableEvent(event: nil, origin: nil) == nil)
    }

    @Test("every op on a view is acknowledged; retry reloads its failing source")
    func viewOps() async throws {
        struct Pair: Decodable, Sendable { var greeting: Greeting?; var failing: JSONValue? }
        try await withClientEngine(config: Self.config) { hammock, _ in
            let pair = await hammock.view("pair", as: Pair.self)
            let failing = try await first("the view's error", in: pair.viewStates) { !$0.errors.isEmpty }
            #expect(failing.errors.map(\.source) == ["failing"])
            #expect(failing.errors.first?.error.httpStatus == 503)
            #expect(failing.canTryAgain)
            #expect(pair.canTryAgain)

            let failures = pair.state.failures
            #expect(failures == 1)
            let source = await hammock.source("failing")
            let before = source.state.failures
            try await pair.retry()
            _ = try await first("failing's next failure", in: source.states) { $0.failures > before }

            try await pair.load()
            try await pair.loadIfNeeded()
            try await pair.cancel()
            // Every source of the view forgets its content and error, and the view says so by the ack.
            try await pair.wipe()
            #expect(pair.viewState.content == nil)
            #expect(pair.errors.isEmpty)
            #expect(source.state.latestError == nil)
        }
    }

    @Test("an op the engine cannot carry out throws its message")
    func refused() async throws {
        try await withClientEngine(config: Self.config) { hammock, _ in
            let unknown = await hammock.source("nope", as: Greeting.self)
            let error = await #expect(throws: HammockError.self) { try await unknown.load() }
            guard case .refused(let message)? = error else {
                Issue.record("expected refused, got \(String(describing: error))")
                return
            }
            #expect(message.contains("nope"))
            // The engine goes on.
            try await hammock.snapshot()
        }
    }

    @Test("reload is acknowledged after the new configuration is in; a refused reload throws its problems")
    func reload() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, directory in
            let numbers = await hammock.source("numbers")
            _ = try await first("numbers' content", in: numbers.contents)
            let changed = """
                version: 1
                sources:
                  greeting:
                    kind: fake
                    content: { text: "hello", count: 3 }
                  added:
                    kind: fake
                    content: 42
                """
            try HammockProcess.writeConfig(changed, in: directory)
            try await hammock.reload()
            #expect(hammock.ids == EngineIDs(sources: ["greeting", "added"], views: []))
            #expect(numbers.state.latestError?.code == LoadError.removedCode)
            #expect(numbers.state.content == nil)

            try HammockProcess.writeConfig("version: 1\nsources:\n  broken: { kind: nosuchkind }\n", in: directory)
            let error = await #expect(throws: HammockError.self) { try await hammock.reload() }
            guard case .refused(let message)? = error else {
                Issue.record("expected refused, got \(String(describing: error))")
                return
            }
            #expect(message.contains("config.yaml:"))
            #expect(hammock.ids == EngineIDs(sources: ["greeting", "added"], views: []))
        }
    }
}
