import Foundation
import HammockJSON
import Logging
import Testing

@testable import HammockEngine
@testable import HammockLogging

/// `--log-format json`: a record a line on stderr, secrets redacted, over a real pipe.
@Suite(.timeLimit(.minutes(1)))
struct LogFormatTests {
    /// Everything written to a pipe by `body` through a `StandardError` of `format`, once flushed.
    static func written(format: LogFormat, secrets: Set<String>, _ body: (StandardError) -> Void) throws -> String {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let output = StandardError(secrets: Secrets(secrets), format: format, descriptor: ends[1])
        body(output)
        output.flush(timeout: .seconds(5))
        close(ends[1])
        let text = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true).readDataToEndOfFile()
        return String(decoding: text, as: UTF8.self)
    }

    @Test("a log record is one JSON line: time, level, message, metadata; several lines and a secret stay in it")
    func recordIsOneJSONLine() throws {
        let text = try Self.written(format: .json, secrets: ["hunter2"]) { output in
            var handler = StandardErrorLogHandler(level: .info, output: output)
            handler[metadataKey: "source"] = "weather"
            let logger = Logger(label: "hammock") { _ in handler }
            logger.warning("first line\nsecond \"line\" with hunter2", metadata: ["kind": "rest", "tries": .array(["1", "2"])])
            logger.debug("below the level")
            output.write(prefix: "shell", line: Array("plugin says hunter2".utf8))
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 2, "\(text)")
        #expect(!text.contains("hunter2"))
        let record = try JSONValue(parsing: String(lines[0]))
        #expect(record["level"] == "warning")
        #expect(record["message"] == "first line\nsecond \"line\" with [redacted]")
        #expect(record["source"] == "weather")
        #expect(record["kind"] == "rest")
        #expect(record["tries"] == ["1", "2"])
        let time = try #require(record["time"]?.stringValue)
        #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "RFC 3339 with a fraction: \(time)")
        let plugin = try JSONValue(parsing: String(lines[1]))
        #expect(plugin["plugin"] == "shell")
        #expect(plugin["message"] == "plugin says [redacted]")
    }

    @Test("text stays as it was: hammock: level: message key=value")
    func textUnchanged() throws {
        let text = try Self.written(format: .text, secrets: []) { output in
            let logger = Logger(label: "hammock") { _ in StandardErrorLogHandler(level: .info, output: output) }
            logger.error("it broke", metadata: ["source": "a"])
            output.write(prefix: "shell", line: Array("hello".utf8))
        }
        #expect(text == "hammock: error: it broke source=a\nshell: hello\n")
    }

    /// A record quotes what others wrote (an id, a click line, a plugin's line): its control characters must
    /// not reach the terminal that shows stderr, where ESC recolours or clears it and CR or a newline forges
    /// a record.
    @Test("text records escape control characters, the newline that ends each kept; secrets stay redacted")
    func textEscapesControlCharacters() throws {
        let text = try Self.written(format: .text, secrets: ["hun\u{7}ter2"]) { output in
            let logger = Logger(label: "hammock") { _ in StandardErrorLogHandler(level: .info, output: output) }
            logger.warning("a click on \"v\u{1B}[2J\u{0}\", which is not a view", metadata: ["id": "x\u{1B}]0;t\u{7}"])
            logger.error("one\nhammock: error: forged\rover \u{9B}31m hun\u{7}ter2 café")
            output.write(prefix: "shell", line: Array("plugin \u{1B}[31mred\u{7F}".utf8))
        }
        #expect(
            text == #"hammock: warning: a click on "v\u{1B}[2J\u{0}", which is not a view id=x\u{1B}]0;t\u{7}"# + "\n"
                + #"hammock: error: one\nhammock: error: forged\rover \u{9B}31m [redacted] café"# + "\n"
                + #"shell: plugin \u{1B}[31mred\u{7F}"# + "\n",
            "\(text.debugDescription)")
    }
}
