import HammockCore
import HammockJSON
import Testing

/// `OutputLine(json:)` reads back what `encode` writes, which `hammock watch --attach` relies on to show a
/// shared engine's lines on the same screen `hammock watch` draws from its own engine.
@Suite("OutputLine: decoding what encode wrote")
struct OutputLineDecodingTests {
    static let stamp = Timestamp(millisecondsSince1970: 1_764_000_000_123)
    static let failure = SourceError(message: "HTTP 503 from https://example.test/", httpStatus: 503, code: .init("rateLimited"))

    /// A line of every type and every event, with and without the optional fields.
    static let lines: [OutputLine] = [
        .hello(sources: ["a", "b"], views: ["v"], version: "1.2.3", configuration: "/etc/hammock/bar.yaml"),
        .hello(sources: [], views: [], version: "1.2.3"),
        .source(id: "a", event: nil, state: SourceState()),
        .source(id: "a", event: .requested, state: SourceState(isLoading: true)),
        .source(id: "a", event: .requestCancelled, state: SourceState(content: ["k": 1], timestamp: stamp)),
        .source(id: "a", event: .newData(["k": [1, "two", true]], origin: .push), state: SourceState(content: ["k": [1, "two", true]], timestamp: stamp)),
        .source(id: "b", event: .newData("x", origin: .cache), state: SourceState(content: "x", timestamp: stamp)),
        .source(id: "b", event: .notModified, state: SourceState(content: 2.5, timestamp: stamp)),
        .source(
            id: "b", event: .error(failure),
            state: SourceState(content: "stale", latestError: failure, isLoading: false, timestamp: stamp, failures: 3)),
        .source(
            id: "c", event: .error(SourceError(message: "exit 1", exitStatus: 1)),
            state: SourceState(latestError: SourceError(message: "exit 1", exitStatus: 1), failures: 1)),
        .view(id: "v", state: ViewState(status: .data, content: ["a": 1, "b": "x"])),
        .view(id: "v", state: ViewState(status: .loading, content: .null)),
        .view(
            id: "v",
            state: ViewState(
                status: .error, content: .null, latestError: failure,
                errors: [(source: "b", error: failure), (source: "c", error: SourceError(message: "exit 1", exitStatus: 1))],
                canTryAgain: true)),
        .reloaded(sources: ["a"], views: []),
        .removed(id: "b", what: "source"),
        .removed(id: "v", what: "view"),
        .ack(id: .string("r1")),
        .ack(id: .number(JSONNumber(7))),
        .error(message: "reload failed: config.yaml:3:4: no", id: .string("r2")),
        .error(message: "unknown op"),
        .bye(reason: .signal, failed: nil),
        .bye(reason: .once, failed: ["c"]),
    ]

    @Test("every line type and event reads back to the same line: encoded again, the same bytes")
    func roundTrip() throws {
        for (index, line) in Self.lines.enumerated() {
            let encoded = line.encoded(seq: index + 1)
            let json = try JSONValue(parsing: Array(encoded.dropLast()))
            let decoded = try #require(OutputLine(json: json), "\(String(decoding: encoded, as: UTF8.self))")
            #expect(
                String(decoding: decoded.encoded(seq: index + 1), as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
        }
    }

    @Test("unknown types, missing fields and lines that are not objects read as nil; unknown fields are ignored")
    func unknownAndBroken() throws {
        for text in [
            #"[1,2]"#, #""hello""#, #"{"seq":1}"#, #"{"type":"progress","seq":2}"#, #"{"type":"source","seq":3,"id":"a"}"#,
            #"{"type":"view","id":"v","status":"sideways","content":null}"#, #"{"type":"bye","reason":"tired"}"#,
            #"{"type":"hello","sources":["a"]}"#, #"{"type":"ack"}"#,
        ] {
            #expect(OutputLine(json: try JSONValue(parsing: Array(text.utf8))) == nil, "\(text)")
        }
        let newer = #"{"type":"source","seq":4,"id":"a","event":"newData","origin":"load","later":1,"state":{"content":1,"latestError":null,"isLoading":false,"timestamp":null,"failures":0,"later":{"etag":"x"}}}"#
        let decoded = try #require(OutputLine(json: try JSONValue(parsing: Array(newer.utf8))))
        guard case .source("a", .newData(1, .load)?, let state) = decoded else {
            Issue.record("\(decoded)")
            return
        }
        #expect(state == SourceState(content: 1))
    }
}
