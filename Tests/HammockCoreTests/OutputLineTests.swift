import FoundationEssentials
import HammockCore
import HammockJSON
import Testing

/// SPEC §5: the exact text of each line, fields in the spec's order.
@Suite struct OutputLines {
    func text(_ line: OutputLine, seq: Int) -> String { String(decoding: line.encoded(seq: seq), as: UTF8.self) }

    @Test func hello() {
        let line = OutputLine.hello(sources: ["repo", "load"], views: ["repo_page"], version: "0.1.0")
        #expect(
            text(line, seq: 1)
                == #"{"type":"hello","seq":1,"protocol":1,"version":"0.1.0","sources":["repo","load"],"views":["repo_page"]}"#
                + "\n")
        #expect(hammockVersion == "0.1.0")
    }

    @Test func sourceLineWithOrigin() {
        let state = SourceState(
            content: "0.42 0.30 0.25 1/123 4567", timestamp: Timestamp(millisecondsSince1970: 1_795_341_600_123))
        let line = OutputLine.source(id: "load", event: .newData("ignored here", origin: .load), state: state)
        #expect(
            text(line, seq: 3)
                == #"{"type":"source","seq":3,"id":"load","event":"newData","origin":"load","state":{"content":"0.42 0.30 0.25 1/123 4567","latestError":null,"isLoading":false,"timestamp":"2026-11-22T10:00:00.123Z","failures":0}}"#
                + "\n")
    }

    @Test func sourceLineWithoutOrigin() {
        let line = OutputLine.source(id: "load", event: .requested, state: SourceState(isLoading: true))
        #expect(
            text(line, seq: 2)
                == #"{"type":"source","seq":2,"id":"load","event":"requested","state":{"content":null,"latestError":null,"isLoading":true,"timestamp":null,"failures":0}}"#
                + "\n")
    }

    @Test func sourceLineWithErrorAndStaleContent() {
        let state = SourceState(
            content: ["n": 1], latestError: SourceError(message: "HTTP 503", httpStatus: 503, retryAfter: .seconds(9)),
            timestamp: t0, failures: 2)
        let line = OutputLine.source(id: "repo", event: .error(state.latestError!), state: state)
        #expect(
            text(line, seq: 7)
                == #"{"type":"source","seq":7,"id":"repo","event":"error","state":{"content":{"n":1},"latestError":{"message":"HTTP 503","httpStatus":503},"isLoading":false,"timestamp":"2026-11-22T10:00:00.000Z","failures":2}}"#
                + "\n")
    }

    @Test func snapshotOfANeverTouchedSourceHasNullEvent() {
        let line = OutputLine.source(id: "a", event: nil, state: SourceState())
        #expect(
            text(line, seq: 1)
                == #"{"type":"source","seq":1,"id":"a","event":null,"state":{"content":null,"latestError":null,"isLoading":false,"timestamp":null,"failures":0}}"#
                + "\n")
    }

    @Test func viewLine() {
        let view = ViewDefinition(id: "repo_page", sources: ["repo", "contributors"])
        let states: [SourceID: SourceState] = [
            "repo": SourceState(content: 5, timestamp: t0), "contributors": SourceState(content: ["x"], timestamp: t0),
        ]
        let state = view.evaluate { states[$0]! }
        #expect(
            text(.view(id: "repo_page", state: state), seq: 4)
                == #"{"type":"view","seq":4,"id":"repo_page","status":"data","content":{"repo":5,"contributors":["x"]},"latestError":null,"errors":{},"canTryAgain":false}"#
                + "\n")
    }

    @Test func viewLineWithErrors() {
        let first = SourceError(message: "a failed", code: .timeout)
        let second = SourceError(message: "b failed", exitStatus: 1)
        let view = ViewDefinition(id: "v", sources: ["a", "b"], display: [.error])
        let states: [SourceID: SourceState] = ["a": SourceState(latestError: first), "b": SourceState(latestError: second)]
        let state = view.evaluate { states[$0]! }
        #expect(
            text(.view(id: "v", state: state), seq: 10)
                == #"{"type":"view","seq":10,"id":"v","status":"error","content":null,"latestError":{"message":"a failed","code":"timeout"},"errors":{"a":{"message":"a failed","code":"timeout"},"b":{"message":"b failed","exitStatus":1}},"canTryAgain":true}"#
                + "\n")
    }

    @Test func bye() {
        #expect(text(.bye(reason: .signal, failed: nil), seq: 99) == #"{"type":"bye","seq":99,"reason":"signal"}"# + "\n")
        #expect(
            text(.bye(reason: .once, failed: ["a", "b"]), seq: 5)
                == #"{"type":"bye","seq":5,"reason":"once","failed":["a","b"]}"# + "\n")
        #expect(text(.bye(reason: .once, failed: []), seq: 5) == #"{"type":"bye","seq":5,"reason":"once","failed":[]}"# + "\n")
    }

    /// The engine decides by `StopReason`; consumers compare its text, which must stay what docs/protocol.md
    /// and the output schema's `bye.reason` list. `quit` ends the watch screen, which writes no `bye`.
    @Test func byeReasonsAreTheProtocolsWords() throws {
        let written = StopReason.allCases.map { reason in
            try? JSONValue(parsing: Array(text(.bye(reason: reason, failed: nil), seq: 1).utf8))
                .objectValue?["reason"]?.stringValue
        }
        #expect(written == ["signal", "interrupt", "quit", "stdout closed", "once", "deadline", "idle"])
        let schemaPath = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/") + "/docs/schema/output-line.schema.json"
        let schemaText = try #require(try? String(contentsOfFile: schemaPath, encoding: .utf8), "no \(schemaPath)")
        let schema = try JSONValue(parsing: Array(schemaText.utf8))
        let reasons = try #require(JSONPointer("/$defs/bye/properties/reason/enum"))
        let listed = try #require(schema[reasons]?.arrayValue).compactMap(\.stringValue)
        #expect(listed == StopReason.allCases.filter { $0 != .quit }.map(\.rawValue))
    }

    @Test func errorAndRemoved() {
        #expect(
            text(.error(message: "unknown op \"x\""), seq: 6)
                == #"{"type":"error","seq":6,"message":"unknown op \"x\""}"# + "\n")
        #expect(text(.removed(id: "a", what: "source"), seq: 8) == #"{"type":"removed","seq":8,"id":"a","what":"source"}"# + "\n")
    }

    @Test func encodeAppends() {
        var out = Array("x".utf8)
        OutputLine.error(message: "m").encode(seq: 1, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x" + #"{"type":"error","seq":1,"message":"m"}"# + "\n")
    }

    /// The writer encodes a whole batch into one buffer: each line must add to it in place, not copy it (a
    /// copy per line made the first batch of 100,000 sources quadratic: minutes). With room reserved, the
    /// buffer's storage stays where it was through every kind of line.
    @Test func encodingAddsToTheBufferInPlace() {
        let state = SourceState(content: "0.42", timestamp: Timestamp(millisecondsSince1970: 1_795_341_600_123))
        let lines: [OutputLine] = [
            .hello(sources: ["a"], views: [], version: "0.1.0"),
            .source(id: "a", event: .newData("0.42", origin: .load), state: state),
            .view(id: "v", state: ViewDefinition(id: "v", sources: ["a"]).evaluate { _ in state }),
            .error(message: "m"),
            .bye(reason: .once, failed: []),
        ]
        var out: [UInt8] = []
        out.reserveCapacity(1 << 20)
        let storage = out.withUnsafeBufferPointer { $0.baseAddress }
        for (index, line) in lines.enumerated() {
            line.encode(seq: index + 1, into: &out)
            #expect(out.withUnsafeBufferPointer { $0.baseAddress } == storage, "line \(index + 1) copied the buffer")
        }
    }

    @Test func coalescingKeys() {
        #expect(OutputLine.source(id: "a", event: nil, state: SourceState()).coalescingKey == "source:a")
        #expect(OutputLine.view(id: "a", state: ViewDefinition(id: "a", sources: []).evaluate { _ in SourceState() }).coalescingKey == "view:a")
        #expect(OutputLine.hello(sources: [], views: [], version: "1").coalescingKey == nil)
        #expect(OutputLine.bye(reason: .signal, failed: nil).coalescingKey == nil)
        #expect(OutputLine.error(message: "m").coalescingKey == nil)
        // A wipe is replaced only by a newer wipe of the same source, never by the source's next state.
        let wipe = OutputLine.source(id: "a", event: .newData(.null, origin: .wipe), state: SourceState())
        let laterWipe = OutputLine.source(id: "a", event: .newData(.null, origin: .wipe), state: SourceState(isLoading: true))
        let otherWipe = OutputLine.source(id: "b", event: .newData(.null, origin: .wipe), state: SourceState())
        #expect(wipe.coalescingKey != nil && wipe.coalescingKey == laterWipe.coalescingKey)
        #expect(wipe.coalescingKey != OutputLine.source(id: "a", event: .requested, state: SourceState()).coalescingKey)
        #expect(wipe.coalescingKey != otherWipe.coalescingKey)
    }

    @Test func timestampsAreRFC3339WithMilliseconds() {
        #expect(Timestamp(millisecondsSince1970: 0).rfc3339 == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp(millisecondsSince1970: 951_782_400_007).rfc3339 == "2000-02-29T00:00:00.007Z")
        #expect(Timestamp(millisecondsSince1970: -1).rfc3339 == "1969-12-31T23:59:59.999Z")
        #expect(at(ms: 3_723_456).rfc3339 == "2026-11-22T11:02:03.456Z")
        // The last instant of four-digit years, and after it the years that need more digits.
        #expect(Timestamp(millisecondsSince1970: 253_402_300_799_999).rfc3339 == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp(millisecondsSince1970: 253_402_300_800_000).rfc3339 == "10000-01-01T00:00:00.000Z")
    }

    @Test func everyTimestampReadsBackAsItself() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            // From year 0 to year 9999.
            let ms = Int64.random(in: -62_167_219_200_000...253_402_300_799_999, using: &generator)
            let text = Timestamp(millisecondsSince1970: ms).rfc3339
            #expect(text.utf8.count == 24, "\(ms): \(text)")
            #expect(Timestamp(rfc3339: text)?.millisecondsSince1970 == ms, "\(ms): \(text)")
        }
    }

    @Test func aLinesTimestampIsTheSameText() {
        let state = SourceState(content: 1, timestamp: Timestamp(millisecondsSince1970: 951_782_400_007))
        let line = String(decoding: OutputLine.source(id: "a", event: .notModified, state: state).encoded(seq: 1), as: UTF8.self)
        #expect(line.contains(#""timestamp":"2000-02-29T00:00:00.007Z""#))
    }
}
