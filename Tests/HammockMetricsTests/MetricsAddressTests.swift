import HammockMetrics
import Testing

/// `--metrics HOST:PORT`, read once on the command line.
@Suite struct MetricsAddresses {
    @Test func hostAndPortAsBindTakesThem() throws {
        let plain = try #require(MetricsAddress("127.0.0.1:9464"))
        #expect((plain.host, plain.port, plain.description) == ("127.0.0.1", 9464, "127.0.0.1:9464"))
        let inBrackets = try #require(MetricsAddress("[::1]:0"))
        #expect((inBrackets.host, inBrackets.port, inBrackets.description) == ("::1", 0, "[::1]:0"))
        #expect(MetricsAddress("localhost:65535")?.port == 65535)
    }

    @Test func notHostAndPort() {
        for text in ["9464", ":9464", "[]:9464", "host:", "host:port", "host:65536", "host:-1", "[::1]", ""] {
            #expect(MetricsAddress(text) == nil, "\(text)")
        }
    }
}
