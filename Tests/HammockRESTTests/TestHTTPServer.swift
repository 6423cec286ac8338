import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// What the test server answers to one request.
struct TestResponse: Sendable {
    var status: Int = 200
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    /// Wait this long before answering.
    var delay: Duration = .zero
    /// Instead of `body`: this many bytes of `x`, sent chunked (no Content-Length) in 64 KiB pieces, each
    /// written once the previous one was flushed, so the server stops when the client hangs up.
    var streamedBytes: Int?

    static func json(_ text: String, status: Int = 200, headers: [(String, String)] = []) -> TestResponse {
        TestResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(text.utf8))
    }

    static func text(_ text: String, status: Int = 200, headers: [(String, String)] = []) -> TestResponse {
        TestResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: Array(text.utf8))
    }
}

/// A request as the server received it.
struct RecordedRequest: Sendable {
    var method: String
    /// Path and query, as sent.
    var uri: String
    var headers: [(String, String)]
    var body: [UInt8]
    var receivedAt: ContinuousClock.Instant

    var path: String { String(uri.split(separator: "?", maxSplits: 1).first ?? "") }
    var query: String? { uri.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) }

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// The value of a query parameter (not decoded).
    func queryParameter(_ name: String) -> String? {
        query?.split(separator: "&").compactMap { pair -> String? in
            let parts = pair.split(separator: "=", maxSplits: 1)
            return parts.first.map(String.init) == name ? (parts.count > 1 ? String(parts[1]) : "") : nil
        }.first
    }
}

/// A real HTTP/1.1 server on 127.0.0.1 (port chosen by the system), built on SwiftNIO, with routes the test
/// programs: by path, a fixed answer or a function of the request. Unknown paths get a 404.
///
/// `start(host: "127.0.0.2")` puts one on another loopback address: another origin, "another host" for
/// tests of what may leave the source's own (Linux routes all of 127.0.0.0/8 to the loopback device).
final class TestHTTPServer: Sendable {
    typealias Handler = @Sendable (RecordedRequest) -> TestResponse

    let host: String
    let port: Int
    private let channel: any Channel
    private let state: Mutex<(routes: [String: Handler], requests: [RecordedRequest])>

    var base: String { "http://\(host):\(port)" }

    private init(channel: any Channel, host: String) {
        self.channel = channel
        self.host = host
        self.port = channel.localAddress?.port ?? 0
        self.state = Mutex((routes: [:], requests: []))
    }

    static func start(host: String = "127.0.0.1") async throws -> TestHTTPServer {
        let box = StateBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(server: box))
                }
            }
            .bind(host: host, port: 0).get()
        let server = TestHTTPServer(channel: channel, host: host)
        box.server.withLock { $0 = server }
        return server
    }

    /// Runs `body` with a fresh server and closes it afterwards.
    static func with<R: Sendable>(host: String = "127.0.0.1", _ body: (TestHTTPServer) async throws -> R) async throws -> R {
        let server = try await start(host: host)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    func stop() async {
        try? await channel.close()
    }

    /// Answers `path` with `response` from now on.
    func route(_ path: String, _ response: TestResponse) {
        route(path) { _ in response }
    }

    func route(_ path: String, handler: @escaping Handler) {
        state.withLock { $0.routes[path] = handler }
    }

    /// Every request so far to `path` (or to any path), in the order they arrived.
    func requests(to path: String? = nil) -> [RecordedRequest] {
        state.withLock { state in state.requests.filter { path == nil || $0.path == path } }
    }

    fileprivate func answer(_ request: RecordedRequest) -> TestResponse {
        let handler = state.withLock { state -> Handler? in
            state.requests.append(request)
            return state.routes[request.path]
        }
        return handler?(request) ?? .text("no route for \(request.path)", status: 404)
    }
}

/// Lets the channel handlers, made before the server object exists, reach it.
private final class StateBox: Sendable {
    let server = Mutex<TestHTTPServer?>(nil)
}

private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let box: StateBox
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(server: StateBox) { self.box = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body += buffer.readableBytesView
        case .end:
            guard let head, let server = box.server.withLock({ $0 }) else { return }
            let request = RecordedRequest(
                method: head.method.rawValue, uri: head.uri, headers: head.headers.map { ($0.name, $0.value) }, body: body,
                receivedAt: .now)
            let response = server.answer(request)
            let keepAlive = head.isKeepAlive
            let isHead = head.method == .HEAD
            self.head = nil
            let loop = context.eventLoop.assumeIsolated()
            if response.delay > .zero {
                let (seconds, attoseconds) = response.delay.components
                let delay = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
                loop.scheduleTask(in: delay) { self.write(response, context: context, keepAlive: keepAlive, isHead: isHead) }
            } else {
                write(response, context: context, keepAlive: keepAlive, isHead: isHead)
            }
        }
    }

    private func write(_ response: TestResponse, context: ChannelHandlerContext, keepAlive: Bool, isHead: Bool) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders(response.headers)
        if response.streamedBytes != nil {
            headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
        } else if !headers.contains(name: "content-length") {
            headers.add(name: "Content-Length", value: String(response.body.count))
        }
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        if let total = response.streamedBytes {
            streamChunks(remaining: total, context: context, keepAlive: keepAlive)
            return
        }
        if !isHead && !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        finish(context: context, keepAlive: keepAlive)
    }

    private func streamChunks(remaining: Int, context: ChannelHandlerContext, keepAlive: Bool) {
        guard remaining > 0 else {
            finish(context: context, keepAlive: keepAlive)
            return
        }
        let size = min(remaining, 64 << 10)
        let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: size)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk)))).assumeIsolated().whenSuccess {
            self.streamChunks(remaining: remaining - size, context: context, keepAlive: keepAlive)
        }
    }

    private func finish(context: ChannelHandlerContext, keepAlive: Bool) {
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
