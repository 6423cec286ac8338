import HammockJSON
import HammockProtocol
import HammockSystem
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// The built-in `fake` plugin through the transport that runs it inside hammock: lines in, lines out, and
/// an end for each way a plugin process ends.
@Suite(.timeLimit(.minutes(1))) struct InProcessTransportTests {
    /// The fake plugin on an `InProcessTransport`, its `run` in a task, its lines as the host reads them.
    private struct Running {
        let transport: InProcessTransport
        var lines: AsyncStream<LineSplitter.Piece>.Iterator
        let ended: Task<PluginExit, Never>

        init() throws {
            let transport = InProcessTransport(serve: try #require(BuiltInPlugins.serve("fake")))
            let (lines, inbox) = AsyncStream.makeStream(of: LineSplitter.Piece.self)
            self.transport = transport
            self.lines = lines.makeAsyncIterator()
            ended = Task {
                let exit = await transport.run { for piece in $0 { inbox.yield(piece) } }
                inbox.finish()
                return exit
            }
        }

        mutating func next() async throws -> PluginMessage? {
            guard case .line(let bytes)? = await lines.next() else { return nil }
            return try PluginMessage(line: bytes)
        }
    }

    @Test func servesTheProtocolAndEndsWithItsInput() async throws {
        var plugin = try Running()
        plugin.transport.send(.hello(protocol: pluginProtocolVersion))
        guard case .hello(_, let kinds, _, _, _, let schemas)? = try await plugin.next() else {
            Issue.record("no hello")
            return
        }
        #expect(kinds == ["fake"])
        // The built-in kind describes its options as the shipped plugins do, for `hammock schema`.
        #expect(schemas.keys.sorted() == ["fake"])
        plugin.transport.send(.configure(source: "a", options: ["content": 7]))
        #expect(try await plugin.next() == .configured(source: "a"))
        plugin.transport.send(.load(source: "a", id: 1, etag: nil, lastModified: nil, timeout: nil))
        #expect(try await plugin.next() == .newData(id: 1, source: "a", content: 7, etag: nil, lastModified: nil))
        plugin.transport.closeInput()
        #expect(try await plugin.next() == nil)
        #expect(await plugin.ended.value == .exited(0))
    }

    @Test func aKillEndsItWithALoadThatNeverAnswers() async throws {
        var plugin = try Running()
        plugin.transport.send(.configure(source: "a", options: ["state": "loading"]))
        #expect(try await plugin.next() == .configured(source: "a"))
        plugin.transport.send(.load(source: "a", id: 1, etag: nil, lastModified: nil, timeout: nil))
        plugin.transport.kill()
        #expect(await plugin.ended.value == .killed(signal: 9))
    }
}
