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
        }
    }
}
