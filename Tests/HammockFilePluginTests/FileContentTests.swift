import Foundation
import HammockCore
import HammockJSON
import HammockPluginKit
import Testing

@testable import HammockFilePlugin

/// A file's bytes as content, in-process: each format, and every failure saying what and where.
@Suite struct FileContentTests {
    private func parsed(_ text: String, as format: ParseFormat) -> Result<JSONValue, SourceError> {
        parseContent(Array(text.utf8), as: format)
    }

    private func failure(_ bytes: [UInt8], as format: ParseFormat) -> SourceError? {
        guard case .failure(let error) = parseContent(bytes, as: format) else { return nil }
        return error
    }

    @Test func eachFormat() throws {
        #expect(try parsed(#"{"a": [1, 2.5, "x"], "b": null}"# + "\n", as: .json).get() == ["a": [1, 2.5, "x"], "b": nil])
        #expect(try parsed("name: demo\non: yes\nlist: [a, 1.5, true, ~]\n", as: .yaml).get() == ["name": "demo", "on": "yes", "list": ["a", 1.5, true, nil]])
        #expect(try parsed("", as: .yaml).get() == .null)
        #expect(try parsed("hello world\n", as: .text).get() == "hello world")
        #expect(try parsed("one\n\r\nthree\r\n", as: .text).get() == "one\n\r\nthree")
        #expect(try parsed("one\n\r\nthree\r\n", as: .lines).get() == ["one", "", "three"])
        #expect(try parsed("", as: .lines).get() == [])
        #expect(try parsed("", as: .text).get() == "")
    }

    @Test func aByteOrderMarkIsNoContent() throws {
        let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
        #expect(try parseContent(mark + Array("[1]".utf8), as: .json).get() == [1])
        #expect(try parseContent(mark + Array("a: 1".utf8), as: .yaml).get() == ["a": 1])
        #expect(try parseContent(mark + Array("hi\n".utf8), as: .text).get() == "hi")
        #expect(try parseContent(mark + Array("a\nb".utf8), as: .lines).get() == ["a", "b"])
    }

    @Test func jsonFailuresGiveTheByteLineAndColumn() throws {
        let error = try #require(failure(Array("{\"a\":\n  tru}".utf8), as: .json))
        #expect(error.code == .parseFailed)
        #expect(error.message.hasPrefix("not JSON: "), "\(error.message)")
        #expect(error.message.hasSuffix("at byte 8 (line 2, column 3)"), "\(error.message)")
        // Offsets count the byte order mark, as an editor's byte count would.
        let marked = try #require(failure([0xEF, 0xBB, 0xBF] + Array("[1,]".utf8), as: .json))
        #expect(marked.message.hasSuffix("at byte 6 (line 1, column 5)"), "\(marked.message)")
        // Columns count characters, not bytes.
        let wide = try #require(failure(Array("[\"é\", x]".utf8), as: .json))
        #expect(wide.message.hasSuffix("at byte 7 (line 1, column 7)"), "\(wide.message)")
    }

    @Test func yamlFailuresGiveTheLine() throws {
        let error = try #require(failure(Array("a: [1, 2\nb: 3\n".utf8), as: .yaml))
        #expect(error.code == .parseFailed)
        #expect(error.message.hasPrefix("not YAML: "), "\(error.message)")
        #expect(error.message.contains(" at line "), "\(error.message)")
        let nan = try #require(failure(Array("ok: 1\nbad: .nan\n".utf8), as: .yaml))
        #expect(nan.message == "not usable as JSON: .nan has no JSON number at line 2, column 6")
    }

    @Test func badUTF8IsRefusedWithItsOffset() throws {
        #expect(failure([0x61, 0x62, 0xFF, 0x63], as: .text) == SourceError(message: "not UTF-8 text: invalid byte at byte 2", code: .parseFailed))
        #expect(failure([0xEF, 0xBB, 0xBF, 0x61, 0xFF], as: .text)?.message == "not UTF-8 text: invalid byte at byte 4")
        #expect(failure(Array("ok\nfine\n".utf8) + [0x61, 0xC3], as: .lines)?.message == "not UTF-8 text: invalid byte at byte 9")
        #expect(failure([0x61, 0x3A, 0x20, 0xFF], as: .yaml)?.message == "not UTF-8 text: invalid byte at byte 3")
    }
}

/// Reading a file within `maxBytes`, in-process over real files.
@Suite struct FileReadingTests {
    @Test func aFileAtTheLimitIsReadOneByteMoreIsTooLarge() throws {
        let directory = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("big.txt")
        try Data(repeating: UInt8(ascii: "x"), count: 100).write(to: file)
        #expect(try readFile(file.path, maxBytes: 100).get().count == 100)
        #expect(readFile(file.path, maxBytes: 99) == .failure(SourceError(message: "\(file.path) is larger than maxBytes (99 bytes)", code: .tooLarge)))
    }

    /// The read goes in steps sized to the file, at most 1 MiB each: a 3 MiB file arrives whole, byte for byte,
    /// and so does a /proc file longer than the first 4 KiB step of a file that reports no size.
    @Test func largeFilesAndSizelessFilesArriveWhole() throws {
        let directory = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("large.bin")
        let written = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        try Data(written).write(to: file)
        #expect(try readFile(file.path, maxBytes: 10 << 20).get() == written)
        let maps = try readFile("/proc/self/maps", maxBytes: 10 << 20).get()
        #expect(maps.count > 4 << 10, "this test process maps more than 4 KiB of lines")
        #expect(maps.last == UInt8(ascii: "\n"))
        #expect(String(decoding: maps, as: UTF8.self).split(separator: "\n").allSatisfy { $0.contains("-") })
    }

    @Test func aFileThatReportsNoSizeIsStillBounded() throws {
        // /proc files say they are empty; only reading tells.
        #expect(try readFile("/proc/self/status", maxBytes: 1 << 20).get().isEmpty == false)
        guard case .failure(let error) = readFile("/proc/self/status", maxBytes: 10) else {
            Issue.record("read past maxBytes")
            return
        }
        #expect(error.code == .tooLarge)
    }

    @Test func missingUnreadableAndDirectories() throws {
        let directory = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("absent.json").path
        #expect(readFile(missing, maxBytes: 10) == .failure(SourceError(message: "file not found: \(missing)", code: .fileMissing)))
        let throughAFile = directory.appendingPathComponent("absent.json/inner").path
        try Data().write(to: directory.appendingPathComponent("absent.json"))
        #expect(readFile(throughAFile, maxBytes: 10) == .failure(SourceError(message: "file not found: \(throughAFile)", code: .fileMissing)))
        #expect(
            readFile(directory.path, maxBytes: 10)
                == .failure(SourceError(message: "\(directory.path) is a directory, not a file", code: .fileUnreadable)))
        if getuid() != 0 {
            let locked = directory.appendingPathComponent("locked")
            try Data("x".utf8).write(to: locked)
            try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: locked.path)
            #expect(readFile(locked.path, maxBytes: 10) == .failure(SourceError(message: "cannot open \(locked.path): Permission denied", code: .fileUnreadable)))
        }
    }
}

/// What counts as a change worth a push, in-process over a real file.
@Suite struct ChangeFilterTests {
    private func content(_ result: PluginLoadResult?) -> JSONValue? {
        guard case .newData(let content, _, _)? = result?.answer else { return nil }
        return content
    }

    @Test func theSameBytesOrTheSameFailureAreNoChange() async throws {
        let directory = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("live.json")
        try Data(#"{"v": 1}"#.utf8).write(to: file)
        let filter = ChangeFilter(options: try FileOptions(["path": .string(file.path)], home: nil, workingDirectory: "/"))

        #expect(content(await filter.read()) == ["v": 1])
        #expect(await filter.readIfChanged() == nil, "what the engine has already is no change")

        try Data(#"{"v": 2}"#.utf8).write(to: file)
        #expect(content(await filter.readIfChanged()) == ["v": 2])
        #expect(await filter.readIfChanged() == nil)

        try FileManager.default.removeItem(at: file)
        guard case .error(let gone)? = await filter.readIfChanged() else {
            Issue.record("the delete was missed")
            return
        }
        #expect(gone.code == .fileMissing)
        #expect(await filter.readIfChanged() == nil, "the same failure again is no change")

        try Data(#"{"v": 2}"#.utf8).write(to: file)
        #expect(content(await filter.readIfChanged()) == ["v": 2], "the file's return")
    }

    @Test func withoutWatchingALoadRemembersNothing() async throws {
        let directory = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("a.txt")
        try Data("a".utf8).write(to: file)
        let filter = ChangeFilter(options: try FileOptions(["path": .string(file.path), "watch": false], home: nil, workingDirectory: "/"))
        _ = await filter.read()
        #expect(await filter.readIfChanged() != nil)
    }
}

/// A new empty folder of the test's own.
private func temporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("hammock-file-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

extension FileContentTests {
    @Test func jsonLinesByOptionOrExtension() throws {
        #expect(try parsed("{\"a\":1}\r\n{\"a\":2}\n", as: .jsonl).get() == [["a": 1], ["a": 2]])
        #expect(failure(Array("{}\n{\n".utf8), as: .jsonl)?.message.hasPrefix("not JSON Lines: line 2 is not JSON: ") == true)
        #expect(failure(Array("{}\n{}\n".utf8), as: .json)?.message == "not one JSON value but 2 lines of JSON; set parse: jsonl")
        #expect(ParseFormat.guess(for: "/var/log/app/events.jsonl") == .jsonl)
        #expect(ParseFormat.guess(for: "events.ndjson") == .jsonl)
    }
}
