import Foundation
import HammockCore
import HammockJSON
import HammockPluginKit
import HammockProtocol
import HammockTestSupport
import Testing

@testable import HammockFakePlugin

/// The `fake` kind in-process, through `Plugin.serve` as hammock runs it: lines in, lines out.
@Suite(.timeLimit(.minutes(1))) struct FakePluginTests {
    /// One fake plugin served in a task, with its two ends.
    private struct Served {
        let input: AsyncStream<[UInt8]>.Continuation
        var output: AsyncStream<[UInt8]>.Iterator
        let serving: Task<Void, Never>

        init() {
            let (input, inbox) = AsyncStream.makeStream(of: [UInt8].self)
            let (output, outbox) = AsyncStream.makeStream(of: [UInt8].self)
            self.input = inbox
            self.output = output.makeAsyncIterator()
            serving = Task {
                await Plugin.serve(
                    kinds: FakePlugin.kinds, version: FakePlugin.version, input: input,
                    writeLine: { outbox.yield($0) }, makeSource: FakePlugin.makeSource)
                outbox.finish()
            }
        }

        func send(_ message: EngineMessage) { input.yield(Array(message.line.dropLast())) }

        func load(_ source: String, id: Int) {
            send(.load(source: source, id: id, etag: nil, lastModified: nil, timeout: nil))
        }

        /// The next line, or nil once the plugin has ended.
        mutating func next() async throws -> PluginMessage? {
            guard let line = await output.next() else { return nil }
            #expect(line.last == UInt8(ascii: "\n"))
            return try PluginMessage(line: line.dropLast())
        }
    }

    @Test func badOptionsKeepTheirMessagesAndPointers() async throws {
        var plugin = Served()
        plugin.send(.hello(protocol: pluginProtocolVersion))
        #expect(try await plugin.next() == .hello(protocol: pluginProtocolVersion, kinds: ["fake"], version: FakePlugin.version))
        plugin.send(.configure(source: "a", options: ["state": "broken", "delay": 5, "colour": "red", "error": [1]]))
        guard case .invalid("a", let problems)? = try await plugin.next() else {
            Issue.record("not invalid")
            return
        }
        #expect(problems.map(\.pointer.description).sorted() == ["/colour", "/delay", "/error", "/state"])
        #expect(
            Set(problems.map(\.message)) == [
                "state must be one of data, loading, error",
                #""5" has no unit; write 5s, 5ms, 5m or 5h"#,
                #"unknown key "colour" in a fake source; expected one of: content, state, error, delay, kind, refresh, at, expiration, retry, timeout, select, cache, keep, respect-server, limit"#,
                "error must be a message or a mapping {message, httpStatus, exitStatus, code}, found an array",
            ])
        plugin.input.finish()
        #expect(try await plugin.next() == nil)
    }

    @Test func eachStateAnswersAsConfigured() async throws {
        var plugin = Served()
        plugin.send(.configure(source: "data", options: ["content": ["n": 1]]))
        plugin.send(.configure(source: "failing", options: ["state": "error", "error": ["message": "down", "httpStatus": 503]]))
        plugin.send(.configure(source: "plain", options: ["state": "error"]))
        plugin.send(.configure(source: "loading", options: ["state": "loading"]))
        plugin.send(.configure(source: "late", options: ["content": "late", "delay": "300ms"]))
        for source in ["data", "failing", "plain", "loading", "late"] {
            #expect(try await plugin.next() == .configured(source: source))
        }
        // The loading one first: every other answer comes while it stays in flight.
        plugin.load("loading", id: 1)
        plugin.load("late", id: 2)
        let clock = ContinuousClock()
        let start = clock.now
        plugin.load("data", id: 3)
        plugin.load("failing", id: 4)
        plugin.load("plain", id: 5)
        var answers: [Int: PluginMessage] = [:]
        while answers.count < 4, let message = try await plugin.next() {
            switch message {
            case .newData(let id, _, _, _, _), .error(let id, _, _): answers[id] = message
            default: Issue.record("unexpected \(message)")
            }
        }
        #expect(answers[3] == .newData(id: 3, source: "data", content: ["n": 1], etag: nil, lastModified: nil))
        #expect(answers[4] == .error(id: 4, source: "failing", error: SourceError(message: "down", httpStatus: 503)))
        #expect(answers[5] == .error(id: 5, source: "plain", error: SourceError(message: "fake error")))
        #expect(answers[2] == .newData(id: 2, source: "late", content: "late", etag: nil, lastModified: nil))
        #expect(clock.now - start >= .milliseconds(300), "the delay was waited")
        plugin.send(.cancel(id: 1))
        #expect(try await plugin.next() == .cancelled(id: 1))
        plugin.send(.shutdown)
        #expect(try await plugin.next() == nil)
    }

    @Test func cancellingTheServingTaskEndsItWithALoadInFlight() async throws {
        var plugin = Served()
        plugin.send(.configure(source: "loading", options: ["state": "loading"]))
        #expect(try await plugin.next() == .configured(source: "loading"))
        plugin.load("loading", id: 1)
        plugin.serving.cancel()
        #expect(try await plugin.next() == nil)
        await plugin.serving.value
    }
}

/// The fake kind's options schema (in its hello, for `hammock schema`) describes exactly the keys its
/// options reader knows, and is well-formed.
@Suite struct FakeOptionsSchemaTests {
    /// Every key its options reader reads, the schema describes, and no other.
    @Test func itDescribesExactlyTheKeysItReads() throws {
        #expect(try optionKeysRead(in: "plugins/fake/Library/FakeOptions.swift") == Set(JSONSchema.propertyNames(of: FakeOptions.schema)))
    }

    @Test func itDescribesExactlyTheKnownKeys() {
        #expect(JSONSchema.propertyNames(of: FakeOptions.schema) == FakeOptions.known)
        #expect(FakePlugin.optionsSchema.keys.sorted() == FakePlugin.kinds)
        #expect(JSONSchemaCheck.problems(in: FakeOptions.schema).isEmpty)
        #expect(FakeOptions.schema["additionalProperties"] == false)
    }
}

