import Foundation
import HammockCore
import HammockTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@testable import HammockRESTPlugin

func withFixture<R>(
    _ name: String, arguments: [String] = [], _ body: (_ port: Int, _ process: HammockProcess) async throws -> R
) async throws -> R {
    try await HTTPFixtures.with(name, arguments: arguments, body)
}

func printed(_ process: HammockProcess, _ prefix: String) -> [String] { HTTPFixtures.printed(process, prefix) }

/// The rest plugin's own HTTP/1.1 client (`HTTP1Client`) in process, against real servers on 127.0.0.1.
@Suite(.timeLimit(.minutes(2))) struct HTTP1ClientTests {
    let group = MultiThreadedEventLoopGroup.singleton
    /// One event loop for every request: each loop has its own pool.
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    private func get(
        _ client: HTTP1Client, _ url: String, limit: Int = 1 << 20, truncating: Bool = false, within: TimeAmount = .seconds(10),
        headers: [(String, String)] = []
    ) async throws -> HTTP1Response {
        var request = HTTP1Request(url: url)
        request.headers = HTTPHeaders(headers)
        request.bodyLimit = .init(bytes: limit, truncating: truncating)
        return try await client.execute(request, deadline: .now() + within, on: loop)
    }

    private func describeFailure(_ url: String, _ operation: () async throws -> HTTP1Response) async -> SourceError? {
        do {
            _ = try await operation()
            return nil
        } catch {
            return describe(error, url: url, deadline: .now + .seconds(60))
        }
    }

    /// Broken on purpose (every answer pooled, `Connection: close` or not), `closeOpensANewOne` failed: the
    /// request after the close went on the connection the server had said it would close (the fixture leaves
    /// it open), failed to parse there and was retried on a new one: an eighth request.
    @Test func pollsReuseOneConnectionAndACloseOpensANewOne() async throws {
        try await withFixture("http1-server.py") { port, server in
            let client = HTTP1Client(group: group)
            let loop = group.next()
            for _ in 1...5 {
                var request = HTTP1Request(url: "http://127.0.0.1:\(port)/json")
                request.bodyLimit = .init(bytes: 1000, truncating: false)
                let answer = try await client.execute(request, deadline: .now() + .seconds(10), on: loop)
                #expect(answer.status == .ok)
                #expect(answer.body.map { String(decoding: $0, as: UTF8.self) } == #"{"connection": 1}"#)
            }
            let closing = try await client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/close"), deadline: .now() + .seconds(10), on: loop)
            #expect(closing.body.map { String(decoding: $0, as: UTF8.self) } == #"{"connection": 1}"#)
            let after = try await client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/json"), deadline: .now() + .seconds(10), on: loop)
            #expect(after.body.map { String(decoding: $0, as: UTF8.self) } == #"{"connection": 2}"#, "closeOpensANewOne")
            _ = try await server.waitForStdoutLines("7 requests", timeout: .seconds(10)) { $0.filter { $0.hasPrefix("request ") }.count >= 7 }
            #expect(printed(server, "connection ").count == 2)
            // Not one more: a request sent on the closed connection anyway (and retried) would be an eighth.
            try await Task.sleep(for: .milliseconds(100))
            #expect(printed(server, "request ").count == 7, "closeOpensANewOne")
            await client.shutdown()
        }
    }

    /// Broken on purpose (the idle time not checked), the second request went on the first connection.
    /// An idle time of a nanosecond makes every kept connection too old by its next request, whatever the
    /// machine's load (a timeout of 300 ms against a pause of 50 ms failed under the whole suite's load).
    @Test func aConnectionIdleTooLongIsNotUsed() async throws {
        try await withFixture("http1-server.py") { port, server in
            let client = HTTP1Client(group: group, idleTimeout: .nanoseconds(1))
            for round in 1...3 {
                let answer = try await client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/json"), deadline: .now() + .seconds(10), on: loop)
                #expect(answer.body.map { String(decoding: $0, as: UTF8.self) } == #"{"connection": \#(round)}"#, "round \(round)")
                try await Task.sleep(for: .milliseconds(5))
            }
            _ = try await server.waitForStdoutLines("3 requests", timeout: .seconds(10)) { $0.filter { $0.hasPrefix("request ") }.count >= 3 }
            #expect(printed(server, "connection ").count == 3)
            await client.shutdown()
        }
    }

    /// Broken on purpose (`mayOpen` always true), the server saw 12 connections.
    @Test func requestsBeyondTheConnectionLimitWaitForAConnection() async throws {
        try await withFixture("http1-server.py") { port, server in
            // Each loop gets 2 connections at the least: all 12 requests go on one loop.
            let client = HTTP1Client(group: group, connectionsPerOrigin: 1)
            let loop = self.loop
            try await withThrowingTaskGroup(of: HTTP1Response.self) { tasks in
                for _ in 0..<12 {
                    tasks.addTask {
                        try await client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/slow"), deadline: .now() + .seconds(20), on: loop)
                    }
                }
                for try await answer in tasks { #expect(answer.status == .ok) }
            }
            _ = try await server.waitForStdoutLines("12 requests", timeout: .seconds(10)) { $0.filter { $0.hasPrefix("request ") }.count >= 12 }
            #expect(printed(server, "connection ").count == 2)
            // One waiting past its deadline gives up: the timeout, not a connection's error.
            async let slow1 = client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/slow"), deadline: .now() + .seconds(5), on: loop)
            async let slow2 = client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/slow"), deadline: .now() + .seconds(5), on: loop)
            let url = "http://127.0.0.1:\(port)/slow"
            let waited = await describeFailure(url) {
                try await client.execute(HTTP1Request(url: url), deadline: .now() + .milliseconds(100), on: loop)
            }
            #expect(waited?.code == .timeout, "\(String(describing: waited))")
            _ = try await (slow1, slow2)
            await client.shutdown()
        }
    }

    /// Broken on purpose (no retry of a reused connection found closed, and no removal from the pool on
    /// close), the request after the server's idle timeout failed with "closed the connection".
    @Test func aServerThatClosesAnIdleConnectionIsNoError() async throws {
        try await withFixture("http1-server.py", arguments: ["--idle-timeout", "0.2"]) { port, server in
            let client = HTTP1Client(group: group)
            let loop = group.next()
            for round in 1...3 {
                let answer = try await client.execute(
                    HTTP1Request(url: "http://127.0.0.1:\(port)/json"), deadline: .now() + .seconds(10), on: loop)
                #expect(answer.body.map { String(decoding: $0, as: UTF8.self) } == #"{"connection": \#(round)}"#)
                try await Task.sleep(for: .milliseconds(500))
            }
            _ = try await server.waitForStdoutLines("3 requests", timeout: .seconds(10)) { $0.filter { $0.hasPrefix("request ") }.count >= 3 }
            #expect(printed(server, "connection ").count == 3)
            await client.shutdown()
        }
    }

    /// Broken on purpose (the Content-Length check and the running count left out), `limited` held the
    /// whole body.
    @Test func theBodyLimitHoldsWithAndWithoutTruncating() async throws {
        try await withFixture("http1-server.py") { port, _ in
            let client = HTTP1Client(group: group)
            let url = "http://127.0.0.1:\(port)/json"
            let limited = try await get(client, url, limit: 5)
            #expect(limited.status == .ok)
            #expect(limited.body == nil, "limited")
            let truncated = try await get(client, url, limit: 5, truncating: true)
            #expect(truncated.body.map { String(decoding: $0, as: UTF8.self) } == #"{"con"#)
            // After a cut-short answer the connection was closed: the next answer comes whole, on another.
            let whole = try await get(client, url)
            #expect(whole.body?.count == #"{"connection": 3}"#.utf8.count)
            await client.shutdown()
        }
    }

    /// Broken on purpose (no decompressor in the pipeline): `a gzip body` came back compressed, the 30 kB
    /// body (a few hundred bytes compressed) passed the 10 kB limit, and the bomb was no error.
    @Test func gzipIsDecompressedAndCountedAndABombIsAnError() async throws {
        try await withFixture("http1-server.py") { port, server in
            let client = HTTP1Client(group: group)
            let small = try await get(client, "http://127.0.0.1:\(port)/gzip?size=1000", headers: [("Accept-Encoding", "gzip")])
            #expect(small.body.map { String(decoding: $0, as: UTF8.self) } == "\"" + String(repeating: "a", count: 1000) + "\"", "a gzip body")
            let large = try await get(client, "http://127.0.0.1:\(port)/gzip?size=30000", limit: 10_000)
            #expect(large.body == nil, "the limit counts decompressed bytes")
            // A HEAD's answer says gzip and has no body: no error, and the connection is kept.
            for _ in 1...2 {
                var head = HTTP1Request(url: "http://127.0.0.1:\(port)/gzip?size=10", method: .HEAD)
                head.bodyLimit = .init(bytes: 100, truncating: false)
                let answer = try await client.execute(head, deadline: .now() + .seconds(10), on: loop)
                #expect(answer.status == .ok && answer.headers.first(name: "content-encoding") == "gzip" && answer.body == [])
            }
            _ = try await server.waitForStdoutLines("the HEADs", timeout: .seconds(10)) { $0.filter { $0.hasPrefix("request HEAD") }.count >= 2 }
            let connections = printed(server, "connection ").count
            let url = "http://127.0.0.1:\(port)/bomb"
            let bomb = await describeFailure(url) { try await get(client, url, limit: 100 << 20) }
            #expect(bomb?.code == .tooLarge, "\(String(describing: bomb))")
            #expect(bomb?.message.contains("1000 times") == true)
            #expect(connections == 2, "one for the two GETs (the second closed it, over the limit), one for both HEADs")
            await client.shutdown()
        }
    }

    /// Broken on purpose (the per-loop deadline timer never armed), the first request hung until the
    /// suite's time limit cancelled it.
    @Test func aServerThatNeverAnswersOrStallsInTheBodyTimesOut() async throws {
        try await withFixture("http1-server.py") { port, _ in
            let client = HTTP1Client(group: group)
            for path in ["/stall-head", "/stall-body"] {
                let url = "http://127.0.0.1:\(port)\(path)"
                let started = ContinuousClock.now
                let error = await describeFailure(url) { try await get(client, url, within: .milliseconds(700)) }
                let took = ContinuousClock.now - started
                #expect(error == SourceError(message: "timeout: 127.0.0.1:\(port) did not answer in time", code: .timeout), "\(path)")
                #expect(took >= .milliseconds(650) && took < .seconds(3), "\(path): \(took)")
            }
            await client.shutdown()
        }
    }

    @Test func cancellingTheTaskClosesTheConnectionAndThrowsCancellationError() async throws {
        try await withFixture("http1-server.py") { port, _ in
            let client = HTTP1Client(group: group)
            let task = Task { try await get(client, "http://127.0.0.1:\(port)/stall-head", within: .seconds(60)) }
            try await Task.sleep(for: .milliseconds(300))
            let started = ContinuousClock.now
            task.cancel()
            let result = await task.result
            // At once, not at the 60 s deadline (10 s of it for a loaded machine: 2.05 s was seen with the whole
            // suite running beside it).
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(throws: CancellationError.self) { try result.get() }
            // Cancelled at any moment, from off the loop: each ends, with its answer or CancellationError.
            let tasks = (0..<60).map { _ in
                Task.detached { try await client.execute(HTTP1Request(url: "http://127.0.0.1:\(port)/json"), deadline: .now() + .seconds(30)) }
            }
            for (number, task) in tasks.enumerated() {
                if number % 3 != 0 { task.cancel() }
            }
            for task in tasks {
                switch await task.result {
                case .success(let answer): #expect(answer.status == .ok)
                case .failure(let error): #expect(error is CancellationError, "\(error)")
                }
            }
            await client.shutdown()
        }
    }

    @Test func onlyHTTPAndHTTPSAreTakenAndConnectFailuresSayWhy() async throws {
        let client = HTTP1Client(group: group)
        for url in ["ftp://example.com/x", "file:///etc/passwd", "http+unix://%2Ftmp%2Fs/x"] {
            let error = await describeFailure(url) { try await get(client, url) }
            #expect(error?.message.contains("only http and https URLs can be fetched") == true, "\(url): \(String(describing: error))")
            #expect(error?.transient == false)
        }
        // A port nothing listens on.
        let listener = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(listener.localAddress?.port)
        try await listener.close()
        let refused = await describeFailure("http://127.0.0.1:\(port)/") { try await get(client, "http://127.0.0.1:\(port)/") }
        #expect(refused?.code == .connectionRefused, "\(String(describing: refused))")
        let unknown = await describeFailure("http://no-such-host.invalid/") { try await get(client, "http://no-such-host.invalid/") }
        #expect(unknown?.code == .unknownHost, "\(String(describing: unknown))")
        await client.shutdown()
    }

    @Test func theEnvironmentsProxiesAreRead() {
        var problems: [String] = []
        let settings = ProxySettings(
            environment: [
                "http_proxy": "http://user:p%40ss@proxy.example:3128", "HTTPS_PROXY": "proxy2.example:8080",
                "NO_PROXY": " .internal.example, localhost:8080,*.corp, [::1]:80 ", "HTTP_PROXY": "ignored:1",
            ], problems: &problems)
        #expect(problems.isEmpty)
        #expect(settings.http == ProxySettings.Proxy(host: "proxy.example", port: 3128, authorization: "Basic " + Data("user:p@ss".utf8).base64EncodedString()))
        #expect(settings.https == ProxySettings.Proxy(host: "proxy2.example", port: 8080, authorization: nil))
        #expect(settings.noProxy == ["internal.example", "localhost", "corp", "::1"])
        func via(_ secure: Bool, _ host: String) -> String? { settings.proxy(for: .init(secure: secure, host: host, port: 1))?.host }
        #expect(via(false, "api.example") == "proxy.example")
        #expect(via(true, "api.example") == "proxy2.example")
        #expect(via(false, "a.internal.example") == nil)
        #expect(via(false, "internal.example") == nil)
        #expect(via(false, "notinternal.example") == "proxy.example")
        #expect(via(true, "LOCALHOST") == nil)
        #expect(via(true, "x.corp") == nil)
        #expect(via(false, "::1") == nil)
        #expect(!settings.description.contains("p%40ss") && !settings.description.contains("user"), "never the password")
        let all = ProxySettings(environment: ["https_proxy": "http://p:1", "no_proxy": "*"], problems: &problems)
        #expect(all.proxy(for: .init(secure: true, host: "x", port: 1)) == nil)
        _ = ProxySettings(environment: ["http_proxy": "socks5://p:1"], problems: &problems)
        #expect(problems.count == 1)
    }

    /// An IPv6 literal: connected to by address, bracketed in the Host header with its port (RFC 9110, 7.2).
    /// Broken on purpose (the host unbracketed in Host), the server echoed `::1:PORT`.
    @Test func anIPv6URLIsRequestedWithItsAddressBracketedInHost() async throws {
        try await withFixture("http1-server.py", arguments: ["--ipv6"]) { port, _ in
            let client = HTTP1Client(group: group)
            let answer = try await get(client, "http://[::1]:\(port)/host")
            #expect(answer.status == .ok)
            #expect(String(decoding: answer.body ?? [], as: UTF8.self) == #"{"host": "[::1]:\#(port)"}"#)
            await client.shutdown()
        }
    }

    /// A proxy that refuses the credentials: for http the 407 is the answer (the source's error says HTTP 407);
    /// for https the tunnel is refused with the proxy's status, and neither says the credentials.
    /// Broken on purpose (any CONNECT answer taken as the tunnel), the TLS handshake failed on the proxy's
    /// 407 instead.
    @Test func aProxyThatRefusesTheCredentialsIsA407() async throws {
        try await withFixture("logging-proxy.py", arguments: ["--require-auth", "Basic Z29vZDpvbmU="]) { proxyPort, proxy in
            let wrong = ProxySettings.Proxy(host: "127.0.0.1", port: proxyPort, authorization: "Basic dTpw")
            let client = HTTP1Client(group: group, proxies: ProxySettings(http: wrong, https: wrong))
            let answer = try await get(client, "http://127.0.0.1:9/json")
            #expect(answer.status == .proxyAuthenticationRequired)
            let failure = await describeFailure("https://127.0.0.1:9/json") { try await get(client, "https://127.0.0.1:9/json") }
            #expect(failure?.message.contains("answered HTTP 407 to CONNECT") == true, "\(String(describing: failure))")
            #expect(failure?.message.contains("dTpw") == false)
            #expect(printed(proxy, "CONNECT ") == ["CONNECT 127.0.0.1:9 auth=Basic dTpw"])
            await client.shutdown()
        }
    }

    /// Broken on purpose (the request line in origin form through the proxy), the proxy could not tell where
    /// to forward it and the request ran out of time.
    @Test func anHTTPRequestGoesThroughTheProxyInAbsoluteForm() async throws {
        try await withFixture("http1-server.py") { port, server in
            try await withFixture("logging-proxy.py") { proxyPort, proxy in
                let proxies = ProxySettings(
                    http: ProxySettings.Proxy(host: "127.0.0.1", port: proxyPort, authorization: "Basic dTpw"))
                let client = HTTP1Client(group: group, proxies: proxies)
                let answer = try await get(client, "http://127.0.0.1:\(port)/json")
                #expect(answer.status == .ok)
                _ = try await server.waitForStdoutLines("the request", timeout: .seconds(10)) { $0.contains("request GET /json") }
                #expect(printed(proxy, "GET ") == ["GET http://127.0.0.1:\(port)/json auth=Basic dTpw"])
                #expect(printed(server, "request ") == ["request GET /json"])
                await client.shutdown()
            }
        }
    }
}

/// TLS against a real local server, with a CA and certificates made by the `openssl` command at test time.
@Suite(.timeLimit(.minutes(2))) struct HTTP1ClientTLSTests {
    let group = MultiThreadedEventLoopGroup.singleton

    static func makeCertificates(names: String) async throws -> (directory: String, ca: String, cert: String, key: String) {
        try await HTTPFixtures.makeCertificates(names: names)
    }

    /// One event loop for every request: each loop has its own pool.
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    private func fetch(_ client: HTTP1Client, _ url: String) async -> Result<HTTP1Response, SourceError> {
        do {
            return .success(try await client.execute(HTTP1Request(url: url), deadline: .now() + .seconds(10), on: loop))
        } catch {
            return .failure(describe(error, url: url, deadline: .now + .seconds(60)))
        }
    }

    /// Broken on purpose (`certificateVerification: .noHostnameVerification`), `a certificate of another
    /// name` was taken.
    @Test func verificationFailsUnlessTheCAIsTrustedAndTheNameIsTheCertificates() async throws {
        let good = try await Self.makeCertificates(names: "DNS:localhost,IP:127.0.0.1")
        let wrong = try await Self.makeCertificates(names: "DNS:other.example")
        defer {
            HammockProcess.removeTemporaryDirectory(good.directory)
            HammockProcess.removeTemporaryDirectory(wrong.directory)
        }
        try await withFixture("http1-server.py", arguments: ["--tls", good.cert, good.key]) { port, _ in
            let url = "https://localhost:\(port)/json"
            // The system's roots: the test CA is not among them.
            let system = HTTP1Client(group: group)
            guard case .failure(let untrusted) = await fetch(system, url) else {
                Issue.record("a certificate of an unknown CA was taken")
                return
            }
            #expect(untrusted.code == .tls, "\(untrusted)")
            #expect(untrusted.message.hasPrefix("TLS failure with localhost:\(port): "), "\(untrusted)")
            await system.shutdown()

            let trusting = HTTP1Client(group: group, trustedCertificates: good.ca)
            for host in ["localhost", "127.0.0.1"] {
                let answer = await fetch(trusting, "https://\(host):\(port)/json")
                #expect((try? answer.get().status) == .ok, "\(host): \(answer)")
            }
            await trusting.shutdown()
        }
        try await withFixture("http1-server.py", arguments: ["--tls", wrong.cert, wrong.key]) { port, _ in
            let client = HTTP1Client(group: group, trustedCertificates: wrong.ca)
            let url = "https://localhost:\(port)/json"
            guard case .failure(let error) = await fetch(client, url) else {
                Issue.record("a certificate of another name")
                return
            }
            #expect(error.code == .tls, "\(error)")
            #expect(error.message.contains("localhost"), "\(error)")
            await client.shutdown()
        }
    }

    /// Broken on purpose (TLS started before the CONNECT answer), the proxy (strict, as some are) refused
    /// the tunnel and no request got through.
    @Test func anHTTPSRequestGoesThroughAConnectTunnel() async throws {
        let certificates = try await Self.makeCertificates(names: "DNS:localhost,IP:127.0.0.1")
        defer { HammockProcess.removeTemporaryDirectory(certificates.directory) }
        try await withFixture("http1-server.py", arguments: ["--tls", certificates.cert, certificates.key]) { port, server in
            try await withFixture("logging-proxy.py") { proxyPort, proxy in
                let proxies = ProxySettings(https: ProxySettings.Proxy(host: "127.0.0.1", port: proxyPort, authorization: "Basic dTpw"))
                let client = HTTP1Client(group: group, proxies: proxies, trustedCertificates: certificates.ca)
                for _ in 1...3 {
                    let answer = await fetch(client, "https://localhost:\(port)/json")
                    #expect((try? answer.get().status) == .ok, "\(answer)")
                }
                _ = try await server.waitForStdoutLines("3 requests", timeout: .seconds(10)) { $0.filter { $0.hasPrefix("request ") }.count >= 3 }
                #expect(printed(proxy, "CONNECT ") == ["CONNECT localhost:\(port) auth=Basic dTpw"], "one tunnel, kept alive")
                await client.shutdown()
            }
        }
    }
}
