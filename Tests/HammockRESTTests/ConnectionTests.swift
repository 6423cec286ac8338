import Foundation
import HammockJSON
import HammockTestSupport
import Testing

// The rest plugin's HTTP/1.1 client end to end: the real `hammock` and `hammock-plugin-rest` against
// Tests/Fixtures/http1-server.py (which counts connections) and logging-proxy.py.

@Suite("rest: connections and proxies")
struct RESTConnectionTests {
    /// Waits until the server has printed `count` request lines.
    private func waitForRequests(_ server: HammockProcess, _ count: Int) async throws {
        _ = try await server.waitForStdoutLines("\(count) requests", timeout: .seconds(30)) { lines in
            lines.filter { $0.hasPrefix("request ") }.count >= count
        }
    }

    private func errors(_ hammock: HammockProcess, _ source: String) -> [String] {
        hammock.lines.filter { $0.id == source && $0.event == "error" }.map(\.errorMessage)
    }

    /// Broken on purpose (every answer pooled, `Connection: close` or not), the `closing` source's polls
    /// went on the one connection the server had said it would close: 2 connections for 4 requests.
    @Test("Polls of one source use one connection; Connection: close opens a new one; an idle close by the server is no error")
    func reuse() async throws {
        try await HTTPFixtures.with("http1-server.py") { port, server in
            let config = """
                version: 1
                sources:
                  kept: { kind: rest, url: "http://127.0.0.1:\(port)/json", refresh: 100ms, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await waitForRequests(server, 6)
                #expect(HTTPFixtures.printed(server, "connection ").count == 1, "\(server.stdoutText)")
                #expect(errors(hammock, "kept").isEmpty)
            }
        }
        try await HTTPFixtures.with("http1-server.py") { port, server in
            let config = """
                version: 1
                sources:
                  closing: { kind: rest, url: "http://127.0.0.1:\(port)/close", refresh: 100ms, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await waitForRequests(server, 4)
                let requests = HTTPFixtures.printed(server, "request ").count
                #expect(HTTPFixtures.printed(server, "connection ").count >= requests, "\(server.stdoutText)")
                #expect(errors(hammock, "closing").isEmpty, "closing")
            }
        }
        try await HTTPFixtures.with("http1-server.py", arguments: ["--idle-timeout", "0.2"]) { port, server in
            let config = """
                version: 1
                sources:
                  idle: { kind: rest, url: "http://127.0.0.1:\(port)/json", refresh: 500ms, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                try await waitForRequests(server, 4)
                #expect(HTTPFixtures.printed(server, "connection ").count >= 3, "the server closed idle connections")
                #expect(errors(hammock, "idle").isEmpty, "\(errors(hammock, "idle"))")
            }
        }
    }

    /// Broken on purpose (the environment not read), the proxy saw nothing and the source went direct.
    @Test("http_proxy and https_proxy from the environment, with credentials never logged; no_proxy goes direct")
    func proxiesFromTheEnvironment() async throws {
        let certificates = try await HTTPFixtures.makeCertificates(names: "DNS:localhost,IP:127.0.0.1")
        defer { HammockProcess.removeTemporaryDirectory(certificates.directory) }
        try await HTTPFixtures.with("http1-server.py") { port, plain in
            try await HTTPFixtures.with("http1-server.py", arguments: ["--tls", certificates.cert, certificates.key]) { tlsPort, secure in
                try await HTTPFixtures.with("logging-proxy.py") { proxyPort, proxy in
                    let config = """
                        version: 1
                        sources:
                          viaProxy: { kind: rest, url: "http://127.0.0.1:\(port)/json", retry: off }
                          tunnelled: { kind: rest, url: "https://127.0.0.1:\(tlsPort)/json", retry: off }
                          direct: { kind: rest, url: "http://localhost:\(port)/connections", retry: off }
                        """
                    let environment = [
                        "http_proxy": "http://user:pr0xy-s3cret@127.0.0.1:\(proxyPort)",
                        "HTTPS_PROXY": "127.0.0.1:\(proxyPort)",
                        "no_proxy": ".example.org,localhost",
                        "SSL_CERT_FILE": certificates.ca,
                    ]
                    try await HammockProcess.withRunning(config: config, environment: environment) { hammock in
                        let viaProxy = try await hammock.nextAnswer("viaProxy")
                        #expect(viaProxy.event == "newData", "\(viaProxy)")
                        let tunnelled = try await hammock.nextAnswer("tunnelled")
                        #expect(tunnelled.event == "newData", "\(tunnelled)")
                        let direct = try await hammock.nextAnswer("direct")
                        #expect(direct.event == "newData", "\(direct)")
                        let logged = HTTPFixtures.printed(proxy, "")
                        let credentials = "Basic " + Data("user:pr0xy-s3cret".utf8).base64EncodedString()
                        #expect(logged.contains("GET http://127.0.0.1:\(port)/json auth=\(credentials)"), "\(logged)")
                        #expect(logged.contains("CONNECT 127.0.0.1:\(tlsPort) auth=-"), "\(logged)")
                        #expect(!logged.contains { $0.contains("/connections") }, "no_proxy: localhost goes direct")
                        #expect(HTTPFixtures.printed(plain, "request ").sorted() == ["request GET /connections", "request GET /json"])
                        #expect(HTTPFixtures.printed(secure, "request ") == ["request GET /json"])
                        #expect(hammock.stderrText.contains("proxies from the environment"), "\(hammock.stderrText)")
                        #expect(!hammock.stderrText.contains("pr0xy-s3cret") && !hammock.stderrText.contains("user:"))
                    }
                }
            }
        }
    }

    @Test("gzip: decompressed, counted against maxBytes; a decompression bomb is a tooLarge error")
    func gzip() async throws {
        try await HTTPFixtures.with("http1-server.py") { port, _ in
            let config = """
                version: 1
                sources:
                  small: { kind: rest, url: "http://127.0.0.1:\(port)/gzip?size=2000", maxBytes: 3000, retry: off }
                  large: { kind: rest, url: "http://127.0.0.1:\(port)/gzip?size=20000", maxBytes: 3000, retry: off }
                  bomb: { kind: rest, url: "http://127.0.0.1:\(port)/bomb", maxBytes: 100MiB, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let small = try await hammock.nextAnswer("small")
                #expect(small.content == .string(String(repeating: "a", count: 2000)))
                let large = try await hammock.next("large") { $0.event == "error" }
                #expect(large.errorCode == "tooLarge", "\(large)")
                #expect(large.errorMessage == "the answer from 127.0.0.1:\(port) is larger than maxBytes (3000 bytes)")
                let bomb = try await hammock.next("bomb") { $0.event == "error" }
                #expect(bomb.errorCode == "tooLarge", "\(bomb)")
                #expect(bomb.errorMessage.contains("decompresses to more than 1000 times"), "\(bomb.errorMessage)")
            }
        }
    }

    @Test("A server that never answers, or stalls in the body, is a timeout error at the source's timeout")
    func stalls() async throws {
        try await HTTPFixtures.with("http1-server.py") { port, _ in
            let config = """
                version: 1
                sources:
                  head: { kind: rest, url: "http://127.0.0.1:\(port)/stall-head", timeout: 1s, retry: off }
                  body: { kind: rest, url: "http://127.0.0.1:\(port)/stall-body", timeout: 1s, retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let started = ContinuousClock.now
                for source in ["head", "body"] {
                    let answer = try await hammock.next(source) { $0.event == "error" }
                    #expect(answer.errorCode == "timeout", "\(answer)")
                    #expect(answer.errorMessage == "timeout: no complete answer from 127.0.0.1:\(port) within 1s", "\(answer)")
                }
                #expect(ContinuousClock.now - started < .seconds(5))
            }
        }
    }

    /// Broken on purpose (the trust roots left at the system's whatever SSL_CERT_FILE says), the source's
    /// error was a TLS failure.
    @Test("TLS: an unknown CA is a tls error naming the host; SSL_CERT_FILE trusts a CA")
    func tls() async throws {
        let certificates = try await HTTPFixtures.makeCertificates(names: "DNS:localhost,IP:127.0.0.1")
        defer { HammockProcess.removeTemporaryDirectory(certificates.directory) }
        try await HTTPFixtures.with("http1-server.py", arguments: ["--tls", certificates.cert, certificates.key]) { port, _ in
            let config = """
                version: 1
                sources:
                  secure: { kind: rest, url: "https://localhost:\(port)/json", retry: off }
                """
            try await HammockProcess.withRunning(config: config) { hammock in
                let answer = try await hammock.next("secure") { $0.event == "error" }
                #expect(answer.errorCode == "tls", "\(answer)")
                #expect(answer.errorMessage.hasPrefix("TLS failure with localhost:\(port)"), "\(answer.errorMessage)")
            }
            try await HammockProcess.withRunning(config: config, environment: ["SSL_CERT_FILE": certificates.ca]) { hammock in
                let answer = try await hammock.nextAnswer("secure")
                #expect(answer.event == "newData", "\(answer)")
                #expect(answer.content?["connection"] != nil, "\(answer)")
            }
        }
    }
}
