import HammockCore
import HammockJSON
import HammockPluginKit
import Testing

/// The kit's option reader, in-process: every reader, its messages and the pointer each problem is at.
@Suite struct OptionReaderTests {
    /// The problems a reader collected, by pointer.
    private func problems(_ reader: OptionReader) -> [String: String] {
        Dictionary(reader.problems.map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $0 + "; " + $1 })
    }

    @Test func anUnknownKeyIsReportedWithTheClosestKnownOne() {
        let reader = OptionReader(["pth": "/x", "path": "/y"], known: ["path", "watch"], kind: "file")
        #expect(problems(reader) == ["/pth": #"unknown key "pth" in a file source (did you mean "path"?)"#])
    }

    @Test func anUnknownKeyFarFromEveryKnownOneListsThemAll() {
        let reader = OptionReader(["colour": 1], known: ["path"], kind: "file")
        // The keys every source has are named too: the key may have been meant for the engine.
        #expect(problems(reader) == [
            "/colour": #"unknown key "colour" in a file source; expected one of: path, kind, refresh, at, expiration, retry, timeout, select, cache, keep, respect-server, limit"#
        ])
    }

    @Test func aCommonKeyMisspeltIsSuggested() {
        let reader = OptionReader(["refesh": "5s"], known: ["path"], kind: "file")
        #expect(problems(reader)["/refesh"] == #"unknown key "refesh" in a file source (did you mean "refresh"?)"#)
    }

    /// Seen sending `retry` to the rest plugin by hand: it answered `(did you mean "retry"?)`.
    @Test func aCommonKeySentToThePluginIsSaidToBeHammocks() {
        let reader = OptionReader(["retry": "off"], known: ["url"], kind: "rest")
        #expect(problems(reader)["/retry"] == #""retry" is read by hammock, not by the rest plugin; the engine that sent it should have kept it"#)
    }

    @Test func optionsThatAreNoMappingHaveNoKeys() {
        var reader = OptionReader(["a", "b"], known: ["path"], kind: "file")
        #expect(reader.problems.isEmpty)
        #expect(reader.string("path") == nil)
        #expect(!reader.has("path"))
    }

    @Test func stringsRequiredAndOfTheWrongType() {
        var reader = OptionReader(["name": 3, "ok": "yes"], known: ["name", "ok", "path"], kind: "k")
        #expect(reader.string("path", required: true) == nil)
        #expect(reader.string("name") == nil)
        #expect(reader.string("ok") == "yes")
        #expect(reader.string("absent") == nil)
        #expect(problems(reader) == [
            "/path": #"missing required key "path""#,
            "/name": "name must be a string, found a number",
        ])
    }

    @Test func booleans() {
        var reader = OptionReader(["on": true, "off": false, "text": "true"], known: ["on", "off", "text"], kind: "k")
        #expect(reader.bool("on") == true)
        #expect(reader.bool("off") == false)
        #expect(reader.bool("text") == nil)
        #expect(reader.bool("absent") == nil)
        #expect(problems(reader) == ["/text": "text must be true or false, found a string"])
    }

    @Test func integersHaveARange() {
        let options: JSONValue = ["n": 5, "low": 0, "high": 11, "fraction": 1.5, "text": "5"]
        var reader = OptionReader(options, known: ["n", "low", "high", "fraction", "text"], kind: "k")
        #expect(reader.integer("n", minimum: 1, maximum: 10) == 5)
        #expect(reader.integer("low", minimum: 1) == nil)
        #expect(reader.integer("high", minimum: 1, maximum: 10) == nil)
        #expect(reader.integer("fraction") == nil)
        #expect(reader.integer("text") == nil)
        #expect(problems(reader) == [
            "/low": "low must be a whole number of at least 1",
            "/high": "high must be a whole number from 1 to 10",
            "/fraction": "fraction must be a whole number of at least 0",
            "/text": "text must be a whole number of at least 0",
        ])
    }

    @Test func sizesAreNumbersOrSizeWordsUpToAGibibyte() {
        let options: JSONValue = ["a": 512, "b": "64KiB", "c": "10MB", "d": "2GiB", "e": "lots", "f": 0]
        var reader = OptionReader(options, known: ["a", "b", "c", "d", "e", "f"], kind: "k")
        #expect(reader.integer("a", minimum: 1, size: true) == 512)
        #expect(reader.integer("b", minimum: 1, size: true) == 65_536)
        #expect(reader.integer("c", minimum: 1, size: true) == 10_000_000)
        #expect(reader.integer("d", minimum: 1, size: true) == nil)
        #expect(reader.integer("e", minimum: 1, size: true) == nil)
        #expect(reader.integer("f", minimum: 1, size: true) == nil)
        let sizeRule = "a whole number from 1 to 1073741824 (or a size such as 64KiB, 10MiB; at most 1024 MiB)"
        #expect(problems(reader) == ["/d": "d must be \(sizeRule)", "/e": "e must be \(sizeRule)", "/f": "f must be \(sizeRule)"])
    }

    @Test(arguments: [
        ("512", 512), ("512B", 512), ("64KiB", 65_536), ("10MiB", 10_485_760), ("1GiB", 1_073_741_824),
        ("5KB", 5000), ("5MB", 5_000_000), ("2GB", 2_000_000_000), ("64 KiB", 65_536),
    ])
    func byteSizes(_ text: String, _ bytes: Int) {
        #expect(parseByteSize(text) == bytes)
    }

    @Test(arguments: ["", "KiB", "64kib", "64TiB", "-5", "1.5MiB", "9223372036854775807KiB", "99999999999999999999"])
    func notByteSizes(_ text: String) {
        #expect(parseByteSize(text) == nil)
    }

    @Test func durationsAreTheConfigurationsOwn() {
        let options: JSONValue = ["a": "20ms", "b": "1m30s", "c": 5, "d": "5", "e": "soon"]
        var reader = OptionReader(options, known: ["a", "b", "c", "d", "e"], kind: "k")
        #expect(reader.duration("a") == .milliseconds(20))
        #expect(reader.duration("b") == .seconds(90))
        #expect(reader.duration("c") == nil)
        #expect(reader.duration("d") == nil)
        #expect(reader.duration("e") == nil)
        #expect(problems(reader) == [
            "/c": "c must be a duration such as 5s, found a number",
            "/d": #"d: "5" has no unit; write 5s, 5ms, 5m or 5h"#,
            "/e": #"e: "soon" is not a duration; write e.g. 250ms, 5s, 2m, 1h or 1m30s"#,
        ])
    }

    @Test func choicesSuggestTheClosestWord() {
        var reader = OptionReader(["parse": "jsno", "mode": "xyz", "ok": "yaml"], known: ["parse", "mode", "ok"], kind: "k")
        #expect(reader.choice("parse", ["json", "yaml"]) == nil)
        #expect(reader.choice("mode", ["json", "yaml"]) == nil)
        #expect(reader.choice("ok", ["json", "yaml"]) == "yaml")
        #expect(problems(reader) == [
            "/parse": #"parse must be one of json, yaml, found "jsno" (did you mean "json"?)"#,
            "/mode": #"mode must be one of json, yaml, found "xyz""#,
        ])
    }

    @Test func stringListsPointAtTheBadItem() {
        let options: JSONValue = ["good": ["a", "b"], "mixed": ["a", 3, true], "empty": [], "scalar": "a"]
        var reader = OptionReader(options, known: ["good", "mixed", "empty", "scalar"], kind: "k")
        #expect(reader.stringList("good") == ["a", "b"])
        #expect(reader.stringList("mixed") == nil)
        #expect(reader.stringList("empty") == [], "read, and reported")
        #expect(reader.stringList("scalar") == nil)
        #expect(problems(reader) == [
            "/mixed/1": "mixed[1] must be a string, found a number",
            "/mixed/2": "mixed[2] must be a string, found a boolean",
            "/empty": "empty must not be empty",
            "/scalar": "scalar must be a list of strings, found a string",
        ])

        var lenient = OptionReader(["empty": []], known: ["empty"], kind: "k")
        #expect(lenient.stringList("empty", nonEmpty: false) == [])
        #expect(lenient.problems.isEmpty)
    }

    @Test func stringMapsTakeScalarsAsTheirTextInOrder() {
        let options: JSONValue = ["env": ["B": "two", "A": 1, "C": true, "D": ["x"]], "list": ["a"]]
        var reader = OptionReader(options, known: ["env", "list"], kind: "k")
        let pairs = reader.stringMap("env")
        #expect(pairs?.map(\.0) == ["B", "A", "C"])
        #expect(pairs?.map(\.1) == ["two", "1", "true"])
        #expect(reader.stringMap("list") == nil)
        #expect(problems(reader) == [
            "/env/D": "env.D must be a string, found an array",
            "/list": "list must be a mapping of names to values, found an array",
        ])
    }

    @Test func finishThrowsEveryProblemInTheOrderFound() {
        var reader = OptionReader(["x": 1, "n": "a"], known: ["n"], kind: "k")
        _ = reader.integer("n")
        reader.problem("n", "a second word on n")
        reader.problem(at: JSONPointer(tokens: ["deep", "0"]), "deep")
        #expect(throws: OptionProblems.self) { try reader.finish() }
        do {
            try reader.finish()
        } catch {
            #expect(error.problems.map(\.pointer.description) == ["/x", "/n", "/n", "/deep/0"])
            #expect(error.problems.map(\.message).last == "deep")
        }

        let clean = OptionReader(["n": 1], known: ["n"], kind: "k")
        #expect(throws: Never.self) { try clean.finish() }
    }
}
