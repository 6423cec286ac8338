import Testing

@testable import HammockMetrics
import HammockHTTP

/// The numbers docs/service.md quotes for `--metrics`' server; the end-to-end `MetricsTests` hold what they do.
@Suite("Metrics server")
struct MetricsServerTests {
    @Test("a connection that sends nothing is closed after 30 s; HAMMOCK_METRICS_IDLE_TIMEOUT changes that in a debug build only")
    func idleTimeout() {
        #expect(HTTPServer.idleTimeout(environment: [:]) == .seconds(30))
        #expect(HTTPServer.idleTimeout(environment: ["HAMMOCK_METRICS_IDLE_TIMEOUT": "not a duration"]) == .seconds(30))
        #if DEBUG
            #expect(HTTPServer.idleTimeout(environment: ["HAMMOCK_METRICS_IDLE_TIMEOUT": "400ms"]) == .milliseconds(400))
        #else
            #expect(HTTPServer.idleTimeout(environment: ["HAMMOCK_METRICS_IDLE_TIMEOUT": "400ms"]) == .seconds(30))
        #endif
    }

    @Test("a source id with a backslash, a double quote or a line feed is escaped in its label, as the text format wants")
    func labelEscaping() {
        let table = SourceSeriesTable()
        _ = table.keep(only: ["plain", "a\"b\\c\nd"])
        var buffer: [UInt8] = []
        table.render(into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)
        #expect(text.contains(#"hammock_source_consecutive_failures{source="a\"b\\c\nd"} 0.0"#), "\(text)")
        #expect(text.contains(#"hammock_source_consecutive_failures{source="plain"} 0.0"#))
        // Each family once, its lines together.
        #expect(text.components(separatedBy: "# TYPE hammock_source_loads_total counter").count == 2)
        _ = table.keep(only: ["plain"])
        buffer = []
        table.render(into: &buffer)
        #expect(!String(decoding: buffer, as: UTF8.self).contains(#"a\"b"#))
    }
}

/// The numbers docs/http.md quotes for `--http`'s server; `HTTPTests` and clients/python/tests/test_http.py
/// hold what they do.
@Suite("HTTP door's bounds")
struct HTTPDoorBoundsTests {
    @Test("a stalled stream is closed after 30 s, a heartbeat every 15 s, a body of at most 1 MiB and 4 KiB, 32 connections unless told")
    func documentedBounds() {
        #expect(HTTPServer.defaultStallTimeout == .seconds(30))
        #expect(HTTPServer.defaultHeartbeat == .seconds(15))
        #expect(HTTPServer.maximumBodyBytes == (1 << 20) + 4096)
        #expect(HTTPServer.maximumConnections == 32)
    }
}
