import Foundation
import Glibc
import HammockJSON
import HammockSystem
import Logging
import Testing

@testable import HammockEngine
@testable import HammockLogging

/// `--log-format json`: a record a line on stderr, secrets redacted, over a real pipe.
@Suite(.timeLimit(.minutes(1)))
struct LogFormatTests {
    /// Everything written to a pipe by `body` through a `StandardError` of `format`, once flushed.
    static func written(format: LogFormat, secrets: Set<String>, _ body: (StandardError) -> Void) async throws -> String {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        // Close-on-exec: a child that another test starts meanwhile must not keep a copy of the write end, which
        // would keep the read below from the pipe's end for as long as that child lives.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let output = StandardError(secrets: Secrets(secrets), format: format, descriptor: ends[1])
        body(output)
        output.flush(timeout: .seconds(5))
        close(ends[1])
        // Read to its end on a thread of its own, with a deadline: a read that waits must not hold one of the
        // cooperative pool's threads, which every test of the run shares.
        let read = ends[0]
        let text = await OwnThread.run(named: "test.stderr") { Self.readToEnd(read, within: .seconds(10)) }
        close(read)
        return String(decoding: try #require(text, "the pipe did not reach its end within 10 s"), as: UTF8.self)
    }

    /// Everything read from `descriptor` until its end, or nil when the end has not come within `timeout`.
    static func readToEnd(_ descriptor: Int32, within timeout: Duration) -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while ContinuousClock.now < deadline {
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 50) > 0 else { continue }
            let count = Glibc.read(descriptor, &chunk, chunk.count)
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            bytes += chunk[..<count]
        }
        return nil
    }

    @Test("a log record is one JSON line: time, level, message, metadata; several lines and a secret stay in it")
    func recordIsOneJSONLine() async throws {
        let text = try await Self.written(format: .json, secrets: ["hunter2"]) { output in
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
    func textUnchanged() async throws {
        let text = try await Self.written(format: .text, secrets: []) { output in
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
    func textEscapesControlCharacters() async throws {
        let text = try await Self.written(format: .text, secrets: ["hun\u{7}ter2"]) { output in
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
