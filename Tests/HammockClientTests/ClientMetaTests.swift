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
