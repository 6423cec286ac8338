import HammockJSON
import HammockCore
import HammockPluginKit
import Testing

@testable import HammockFilePlugin

/// A file source's options and its path, in-process.
@Suite struct FileOptionsTests {
    private func options(_ options: JSONValue, home: String? = "/home/me") throws(OptionProblems) -> FileOptions {
        try FileOptions(options, home: home, workingDirectory: "/work/here")
    }

    private func problems(_ options: JSONValue, home: String? = "/home/me") -> [String: String]? {
        do {
            _ = try self.options(options, home: home)
            return nil
        } catch {
            return Dictionary(error.problems.map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $0 + "; " + $1 })
        }
    }

    @Test func aPathAloneTakesTheDefaults() throws {
        let file = try options(["path": "/etc/app.json"])
        #expect(file.path == "/etc/app.json")
        #expect(file.parse == .json)
        #expect(file.watch)
        #expect(file.maxBytes == 10 << 20)
        #expect(file.debounce == .milliseconds(50))
    }

    @Test func everyKeySet() throws {
        let file = try options(["path": "data.txt", "parse": "lines", "watch": false, "maxBytes": "64KiB", "debounce": "1s"])
        #expect(file.path == "/work/here/data.txt")
        #expect(file.parse == .lines)
        #expect(!file.watch)
        #expect(file.maxBytes == 65_536)
        #expect(file.debounce == .seconds(1))
    }

    @Test func everyProblemIsReportedAtItsKey() {
        #expect(problems(["wach": true, "parse": "xml", "maxBytes": "lots", "debounce": 5, "watch": "yes"]) == [
            "/wach": #"unknown key "wach" in a file source (did you mean "watch"?)"#,
            "/path": #"missing required key "path""#,
            "/parse": #"parse must be one of json, jsonl, yaml, text, lines, found "xml""#,
            "/maxBytes": "maxBytes must be a whole number from 1 to 1073741824 (or a size such as 64KiB, 10MiB; at most 1024 MiB)",
            "/debounce": "debounce must be a duration such as 5s, found a number",
            "/watch": "watch must be true or false, found a string",
        ])
        #expect(problems(["path": 3]) == ["/path": "path must be a string, found a number"])
        #expect(problems(["path": "/a", "parse": "ymal"]) == [
            "/parse": #"parse must be one of json, jsonl, yaml, text, lines, found "ymal" (did you mean "yaml"?)"#
        ])
        #expect(problems(["path": "/a", "debounce": "5"]) == ["/debounce": #"debounce: "5" has no unit; write 5s, 5ms, 5m or 5h"#])
    }

    @Test(arguments: [
        ("/etc/app.json", ParseFormat.json), ("a.yaml", .yaml), ("a.YML", .yaml), ("a.txt", .text), ("list.conf", .text),
        ("noextension", .text), (".json", .text), ("dir.json/file", .text), ("archive.tar.json", .json),
    ])
    func theFormatIsGuessedFromTheExtension(_ path: String, _ format: ParseFormat) {
        #expect(ParseFormat.guess(for: path) == format)
    }

    @Test func aParseGivenWinsOverTheExtension() throws {
        #expect(try options(["path": "/a.json", "parse": "text"]).parse == .text)
    }

    @Test(arguments: [
        ("/a/b.json", "/a/b.json"), ("b.json", "/work/here/b.json"), ("./b.json", "/work/here/b.json"),
        ("../b.json", "/work/b.json"), ("/a/./c/../b.json", "/a/b.json"), ("//a//b.json", "/a/b.json"),
        ("~", "/home/me"), ("~/b.json", "/home/me/b.json"), ("/../../b", "/b"),
    ])
    func pathsAreMadeAbsoluteByText(_ raw: String, _ resolved: String) throws {
        #expect(try options(["path": .string(raw)]).path == resolved)
    }

    @Test func pathsThatNameNoFile() {
        #expect(problems(["path": ""]) == ["/path": "path must not be empty"])
        #expect(problems(["path": "/a/b/"]) == ["/path": #"path "/a/b/" names a directory, not a file"#])
        #expect(problems(["path": "/a/.."]) == ["/path": #"path "/a/.." names a directory, not a file"#])
        #expect(problems(["path": "."]) == ["/path": #"path "." names a directory, not a file"#])
        #expect(problems(["path": "/"]) == ["/path": #"path "/" names a directory, not a file"#])
        #expect(problems(["path": "~bob/a"]) == ["/path": "path: ~user is not supported; write the full path or ~/…"])
        #expect(problems(["path": "~/a"], home: nil) == ["/path": "path starts with ~ but $HOME is not set"])
        #expect(problems(["path": "~/a"], home: "") == ["/path": "path starts with ~ but $HOME is not set"])
    }
}
