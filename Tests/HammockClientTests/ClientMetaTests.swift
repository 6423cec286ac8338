import Foundation
import HammockJSON
import HammockTestSupport
import Testing

@testable import HammockClient

@Suite("A source's meta reaches the app")
struct ClientMetaTests {
    @Test("a command's exit status and run time, and a file's size, are on the state's meta; a kind that says nothing has none")
    func metaOfTheShippedKinds() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data("[1,2,3]".utf8).write(to: URL(fileURLWithPath: directory + "/list.json"))
        let config = """
            version: 1
            sources:
              answer: { kind: shell, script: "printf 42", parse: json }
              list: { kind: file, path: \(directory)/list.json }
              plain: { kind: fake, content: 1 }
            """
        try await withClientEngine(config: config) { hammock, _ in
            let answer = await hammock.source("answer", as: Int.self)
            let loaded = try await first("answer's state", in: answer.states) { $0.content != nil }
            #expect(loaded.content == 42)
            let meta = try #require(loaded.meta)
            #expect(meta.exitStatus == 0)
            #expect((meta["durationMs"]?.numberValue?.intValue ?? -1) >= 0)
            #expect(meta["outputBytes"] == 2)

            let list = await hammock.source("list", as: [Int].self)
            let read = try await first("list's state", in: list.states) { $0.content != nil }
            #expect(read.meta?["size"] == 7)

            let plain = await hammock.source("plain", as: Int.self)
            let fake = try await first("plain's state", in: plain.states) { $0.content != nil }
            #expect(fake.meta == nil)
        }
    }
}

@Suite("more() from the app")
struct ClientMoreTests {
    @Test("more() returns once the next pages are in; with none left it throws hammock's refusal")
    func moreReturnsAfterThePages() async throws {
        let server = try HammockProcess.launch(program: "/usr/bin/python3", arguments: [TestFiles.fixture("pages-server.py"), "3"])
        do {
            try await Self.check(server)
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    private static func check(_ server: HammockProcess) async throws {
        let lines = try await server.waitForStdoutLines("the pages server prints its port", timeout: .seconds(30)) { !$0.isEmpty }
        let port = try #require(Int(lines[0]), "pages-server.py printed \(lines[0]); stderr: \(server.stderrText)")
        let config = """
            version: 1
            sources:
              items: { kind: rest, url: "http://127.0.0.1:\(port)/items", paginate: { style: link, lazy: true }, retry: off }
            """
        try await withClientEngine(config: config) { hammock, _ in
            let items = await hammock.source("items", as: [Int].self)
            let loaded = try await first("the first page", in: items.states) { $0.content != nil }
            #expect(loaded.content == [1, 2])
            #expect(loaded.meta?.hasMore == true)
            #expect(loaded.meta?.pages == 1)

            try await items.more()
            #expect(items.state.content == [1, 2, 3, 4], "more() returns with the pages in")
            try await items.more(5)
            #expect(items.state.content == [1, 2, 3, 4, 5, 6])
            #expect(items.state.meta?.hasMore == false)
            do {
                try await items.more()
                Issue.record("more() with no pages left returned")
            } catch {
                #expect("\(error)".contains("has no more pages"), "\(error)")
            }
        }
    }
}
