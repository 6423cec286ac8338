import FoundationEssentials
import Glibc
import HammockCore
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A small HTTP/1.1 server on one event-loop thread of its own, apart from the engine's loop: what `--metrics`
/// and `--http` serve. Each route is a path and an async answer; the server bounds what a client can make it
/// hold (connections, idle time, answers a client does not take) and answers what no route knows with 404,
/// and a known path asked with another method with 405.
public final class HTTPServer: Sendable {
    /// A request as a route sees it: its path without the query, and the query's fields.
    public struct Request: Sendable {
        public let method: String
        public let path: String
        public let query: [String: String]
    }

    /// What a route answers.
    public struct Answer: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]

        public init(status: Int, contentType: String, body: [UInt8]) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }

        /// A JSON body.
        public static func json(_ status: Int, _ text: String) -> Answer {
            Answer(status: status, contentType: "application/json", body: Array((text + "\n").utf8))
        }
    }

    /// A path the server answers, for GET and HEAD.
    public struct Route: Sendable {
        public let path: String
        public let answer: @Sendable (Request) async -> Answer

        public init(_ path: String, answer: @escaping @Sendable (Request) async -> Answer) {
            self.path = path
            self.answer = answer
        }
    }

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// Where it listens: the port the system chose for port 0.
    public let address: String

    /// At most this many connections at once. Each holds a file descriptor of hammock's own, which its
    /// plugins, pipes and watched files need too, so a client that opens thousands and sends nothing must
    /// not use them up. A connection past the limit closes the oldest one: a scraper's idle keep-alive
    /// connection, most often, which it simply opens again; so a flood never locks Prometheus out.
    public static let maximumConnections = 32
    /// A connection that sends nothing for this long is closed.
    public static let defaultIdleTimeout = Duration.seconds(30)
    /// Answers written on one connection and not yet taken by the client, at most: a client that pipelines
    /// requests and never reads the answers would otherwise make hammock hold every one of them (100,000
    /// pipelined scrapes took it from 27 MiB to 2 GiB). Past the bound the connection is closed.
    static let maximumQueuedAnswers = 4
    /// Bytes of answers waiting on one connection, at most, past the first answer (which may be a large
    /// scrape of its own).
    static let maximumQueuedBytes = 4 << 20

    /// `defaultIdleTimeout`; in a debug build, `HAMMOCK_METRICS_IDLE_TIMEOUT` (a duration such as `500ms`)
    /// instead, so that a test of the idle close need not wait 30 s.
    public static func idleTimeout(environment: [String: String]) -> Duration {
        #if DEBUG
            if let text = environment["HAMMOCK_METRICS_IDLE_TIMEOUT"], case .success(let duration) = parseDuration(text) {
                return duration
            }
        #endif
        return defaultIdleTimeout
    }

    /// Why the server cannot listen.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds `address` at once, so that an address not of this machine or a port in use stops hammock before
    /// it starts; `option` names the command-line option in the message (`--metrics`, `--http`).
    public static func start(_ address: HTTPAddress, option: String, routes: [Route]) async throws(Failure) -> HTTPServer {
        let (host, port) = (address.host, address.port)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let connections = Connections(limit: maximumConnections)
        let (seconds, attoseconds) = idleTimeout(environment: ProcessInfo.processInfo.environment).components
        let idleTimeout = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let table = Dictionary(routes.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.opened(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(RouteHandler(routes: table))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            let bound = channel.localAddress.map { local in
                let shown = local.protocol == .inet6 ? "[\(local.ipAddress ?? host)]" : (local.ipAddress ?? host)
                return "\(shown):\(local.port ?? port)"
            } ?? address.description
            return HTTPServer(group: group, channel: channel, address: bound)
        } catch {
            try? await group.shutdownGracefully()
            throw Failure(description: "\(option) \(address): cannot listen there (\(error)); choose a free port, or an address of this machine")
        }
    }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, address: String) {
        self.group = group
        self.channel = channel
        self.address = address
    }

    public func shutdown() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// Where a server listens: `HOST:PORT`, an IPv6 host in brackets (`[::1]:9464`), port 0 letting the system
/// choose. Read once, on the command line, so that a malformed address stops hammock before anything starts
/// and the server is never handed one.
public struct HTTPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host as `bind` takes it: brackets removed.
    public let host: String
    public let port: Int
    /// The address as it was written, for messages.
    public let description: String

    /// `nil` when `text` is not `HOST:PORT` with a host and a port from 0 to 65535.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
        self.description = text
    }

    /// Whether the host is this machine's loopback (`127.0.0.0/8`, `::1`, `localhost`): only this machine's
    /// users can connect.
    public var isLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// The open connections, oldest first.
private final class Connections: Sendable {
    private let limit: Int
    private let open = Mutex<[any Channel]>([])

    init(limit: Int) { self.limit = limit }

    func opened(_ channel: any Channel) {
        let oldest: (any Channel)? = open.withLock { open in
            open.append(channel)
            return open.count > limit ? open.removeFirst() : nil
        }
        oldest?.close(promise: nil)
        channel.closeFuture.whenComplete { [self] _ in
            open.withLock { open in open.removeAll { $0 === channel } }
        }
    }
}

/// One HTTP/1.1 connection: a route's path with GET or HEAD gets its answer, in the order asked; a route's
/// path with another method 405, any other path 404. It lives on its channel's event loop and is touched only
/// there; a route's answer is awaited off the loop and written back on it.
private final class RouteHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: [String: HTTPServer.Route]
    /// Answers asked and not yet handed to the kernel (awaited, or not taken by the client), and their bytes.
    private var queuedAnswers = 0
    private var queuedBytes = 0
    private var isClosing = false
    /// The previous request's answer, handed to the channel: the next one is written after it (pipelined
    /// answers keep their order). Not its flush: a client that reads nothing must still be seen to pile up
    /// answers, and be closed.
    private var previous: EventLoopFuture<Void>?

    init(routes: [String: HTTPServer.Route]) { self.routes = routes }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data), !isClosing else { return }
        // A client that sends requests and does not take the answers: closed, rather than queueing answers
        // without bound (the requests it pipelined behind are dropped with the connection).
        if queuedAnswers >= HTTPServer.maximumQueuedAnswers
            || (queuedAnswers > 0 && queuedBytes >= HTTPServer.maximumQueuedBytes)
        {
            isClosing = true
            context.close(promise: nil)
            return
        }
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts.first.map(String.init) ?? head.uri
        let request = HTTPServer.Request(
            method: head.method.rawValue, path: path, query: parts.count > 1 ? Self.fields(of: parts[1]) : [:])
        let eventLoop = context.eventLoop
        let answered: EventLoopFuture<HTTPServer.Answer>
        switch (routes[path], head.method) {
        case (let route?, .GET), (let route?, .HEAD):
            let promise = eventLoop.makePromise(of: HTTPServer.Answer.self)
            promise.completeWithTask { await route.answer(request) }
            answered = promise.futureResult
        case (_?, _):
            answered = eventLoop.makeSucceededFuture(.json(405, #"{"error":"\#(path) answers GET and HEAD"}"#))
        case (nil, _):
            let known = routes.keys.sorted().joined(separator: ", ")
            answered = eventLoop.makeSucceededFuture(.json(404, #"{"error":"no such path; hammock serves \#(known)"}"#))
        }
        queuedAnswers += 1
        let after = previous ?? eventLoop.makeSucceededVoidFuture()
        let channel = context.channel
        // On the channel's event loop, as this handler is.
        let issued = after.flatMap { answered }.assumeIsolated().map { [self] answer in
            self.write(answer, to: head, on: channel)
        }
        previous = issued.nonisolated()
    }

    private func write(_ answer: HTTPServer.Answer, to request: HTTPRequestHead, on channel: any Channel) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: answer.contentType)
        headers.add(name: "Content-Length", value: String(answer.body.count))
        if answer.status == 405 { headers.add(name: "Allow", value: "GET, HEAD") }
        headers.add(name: "Connection", value: request.isKeepAlive ? "keep-alive" : "close")
        let status = HTTPResponseStatus(statusCode: answer.status)
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: status, headers: headers)), promise: nil)
        let size = request.method == .HEAD ? 0 : answer.body.count
        if request.method != .HEAD {
            channel.write(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(bytes: answer.body))), promise: nil)
        }
        queuedBytes += size
        let keepAlive = request.isKeepAlive
        channel.writeAndFlush(HTTPServerResponsePart.end(nil)).assumeIsolated().whenComplete { [self] _ in
            queuedAnswers -= 1
            queuedBytes -= size
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    /// `a=1&b=2` as fields, percent-decoded; a field without `=` is empty.
    static func fields(of query: Substring) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = PercentEncoding.decoded(halves[0], plusIsSpace: true) ?? String(halves[0])
            let value = halves.count > 1 ? (PercentEncoding.decoded(halves[1], plusIsSpace: true) ?? String(halves[1])) : ""
            fields[name] = value
        }
        return fields
    }
}
