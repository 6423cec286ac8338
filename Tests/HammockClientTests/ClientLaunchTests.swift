import Foundation
import HammockClient
import HammockCore
import HammockJSON
import HammockTestSupport
import Testing

@Suite("The client launches the engine and decodes its lines")
struct ClientLaunchTests {
    @Test("launch says hello; a source and a view give typed content")
    func firstTypedStates() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            #expect(hammock.ids == EngineIDs(sources: ["greeting", "numbers"], views: ["both"]))
            let greeting = await hammock.source("greeting", as: Greeting.self)
            let content = try await first("greeting's content", in: greeting.contents)
            #expect(content == Greeting(text: "hello", count: 3))
            #expect(greeting.state.latestError == nil)
            #expect(greeting.state.timestamp != nil)

            let both = await hammock.view("both", as: Both.self)
            let view = try await first("the view's data", in: both.viewStates) { $0.status == .data }
            #expect(view.content == Both(greeting: Greeting(text: "hello", count: 3), numbers: [1, 2, 3]))
            #expect(view.errors.isEmpty)
            #expect(!view.canTryAgain)
            #expect(both.state.content == view.content)

            let untyped = await hammock.source("numbers")
            #expect(try await first("numbers' content", in: untyped.contents) == [1, 2, 3])
        }
    }

    @Test("content of the wrong shape is a decodingFailed state naming the member, not a trap")
    func decodingFailure() async throws {
        struct Wrong: Decodable, Sendable { var text: Int }
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let wrong = await hammock.source("greeting", as: Wrong.self)
            let state = try await first("greeting's decoding failure", in: wrong.states) { $0.latestError != nil }
            #expect(state.content == nil)
            #expect(state.latestError?.code == LoadError.decodingFailed)
            #expect(state.latestError?.message.contains("\"text\" must be an integer, got a string") == true)
            // The same source read as the right type is untouched.
            let right = await hammock.source("greeting", as: Greeting.self)
            #expect(try await first("greeting's content", in: right.contents).text == "hello")

            // A view whose content never decoded is an error, not data without content: `data` always has
            // content, so a `case .data:` may use it.
            struct WrongView: Decodable, Sendable { var greeting: Int }
            let view = await hammock.view("both", as: WrongView.self)
            let viewState = try await first("the view's decoding failure", in: view.viewStates) { $0.latestError != nil }
            #expect(viewState.status == .error)
            #expect(viewState.content == nil)
            #expect(viewState.latestError?.code == LoadError.decodingFailed)
        }
    }
}

@Suite("Content of the wrong shape keeps the last good content")
struct ClientDecodingTests {
    @Test("a bad override keeps the good content with a decodingFailed error; a good one clears it")
    func keepsLastGoodContent() async throws {
        try await withClientEngine(config: fakeConfig) { hammock, _ in
            let greeting = await hammock.source("greeting", as: Greeting.self)
            _ = try await first("greeting's content", in: greeting.contents)

            try await greeting.override(json: ["text": "still a text", "count": "three"])
            #expect(greeting.state.content == Greeting(text: "hello", count: 3))
            #expect(greeting.state.latestError?.code == LoadError.decodingFailed)
            #expect(greeting.state.latestError?.message.contains("\"count\" must be an integer, got a string") == true)

            try await greeting.override(json: ["list"])
            #expect(greeting.state.latestError?.message.contains("the content must be an object, got an array") == true)
            #expect(greeting.state.content == Greeting(text: "hello", count: 3))

            try await greeting.override(Greeting(text: "good again", count: 4))
            #expect(greeting.state.content == Greeting(text: "good again", count: 4))
            #expect(greeting.state.latestError == nil)

            // A view whose content does not decode behaves the same way.
            let both = await hammock.view("both", as: Both.self)
            _ = try await first("the view's content", in: both.contents)
            try await greeting.override(json: 42)
            #expect(both.viewState.latestError?.code == LoadError.decodingFailed)
            #expect(both.viewState.latestError?.message.contains("\"greeting\" must be an object, got a number") == true)
            #expect(both.viewState.content?.greeting == Greeting(text: "good again", count: 4))
            #expect(both.viewState.status == .data)
        }
    }
}
