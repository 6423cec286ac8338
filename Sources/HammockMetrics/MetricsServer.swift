import FoundationEssentials
import Glibc
import HammockCore
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// `--metrics HOST:PORT`: serves `EngineMetrics` in Prometheus's text format at `GET /metrics`, on one
/// event-loop thread of its own, apart from the engine's loop.
public final class MetricsServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// Where it listens: the port the system chose for port 0.
    public let address: String

    /// At most this many connections at once. Each holds a file descriptor of hammock's own, which its
    /// plugins, pipes and watched files need too, so a client that opens thousands and sends nothing must
    /// not use them up. A connection past the limit closes the oldest one: a scraper's idle keep-alive
    /// connection, most often, which it simply opens again; so a flood never locks Prometheus out.
    static let maximumConnections = 32
    /// A connection that sends nothing for this long is closed.
    static let defaultIdleTimeout = Duration.seconds(30)
    /// Answers written on one connection and not yet taken by the client, at most: a client that pipelines
    /// requests and never reads the answers would otherwise make hammock hold every one of them (100,000
    /// pipelined scrapes took it from 27 MiB to 2 GiB). Past the bound the connection is closed.
    static let maximumQueuedAnswers = 4
    /// Bytes of answers waiting on one connection, at most, past the first answer (which may be a large
    /// scrape of its own).
    static let maximumQueuedBytes = 4 << 20

    /// `defaultIdleTimeout`; in a debug build, `HAMMOCK_METRICS_IDLE_TIMEOUT` (a duration such as `500ms`)
    /// instead, so that a test of the idle close need not wait 30 s.
    static func idleTimeout(environment: [String: String]) -> Duration {
        #if DEBUG
            if let text = environment["HAMMOCK_METRICS_IDLE_TIMEOUT"], case .success(let duration) = parseDuration(text) {
                return duration
            }
        #endif
        return defaultIdleTimeout
    }

    /// Why `--metrics` cannot be served.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds `address` at once, so that an address not of this machine or a port in use stops hammock before
    /// it starts.
    public static func start(_ address: MetricsAddress, metrics: EngineMetrics) async throws(Failure) -> MetricsServer {
        let (host, port) = (address.host, address.port)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let connections = Connections(limit: maximumConnections)
        let (seconds, attoseconds) = idleTimeout(environment: ProcessInfo.processInfo.environment).components
        let idleTimeout = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.opened(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(MetricsHandler(metrics: metrics))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            let bound = channel.localAddress.map { local in
                let shown = local.protocol == .inet6 ? "[\(local.ipAddress ?? host)]" : (local.ipAddress ?? host)
                return "\(shown):\(local.port ?? port)"
            } ?? address.description
            return MetricsServer(group: group, channel: channel, address: bound)
        } catch {
            try? await group.shutdownGracefully()
            throw Failure(description: "--metrics \(address): cannot listen there (\(error)); choose a free port, or an address of this machine")
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

/// Where `--metrics` listens: `HOST:PORT`, an IPv6 host in brackets (`[::1]:9464`), port 0 letting the
/// system choose. Read once, on the command line, so that a malformed address stops hammock before anything
/// starts and the server is never handed one.
public struct MetricsAddress: Sendable, Hashable, CustomStringConvertible {
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

/// One HTTP/1.1 connection: `GET /metrics` (or HEAD) gets the scrape, anything else 404 or 405. It lives on
/// its channel's event loop and is touched only there.
private final class MetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: EngineMetrics
    /// Answers written and not yet handed to the kernel (the client does not read them), and their bytes.
    private var queuedAnswers = 0
    private var queuedBytes = 0
    private var isClosing = false

    init(metrics: EngineMetrics) { self.metrics = metrics }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let request) = unwrapInboundIn(data), !isClosing else { return }
        // A client that sends requests and does not take the answers: closed, rather than queueing answers
        // without bound (the requests it pipelined behind are dropped with the connection).
        if queuedAnswers >= MetricsServer.maximumQueuedAnswers
            || (queuedAnswers > 0 && queuedBytes >= MetricsServer.maximumQueuedBytes)
        {
            isClosing = true
            context.close(promise: nil)
            return
        }
        let path = request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.uri
        let status: HTTPResponseStatus
        let body: [UInt8]
        var headers = HTTPHeaders()
        switch (request.method, path) {
        case (.GET, "/metrics"), (.HEAD, "/metrics"):
            status = .ok
            body = metrics.scrape()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
        case (_, "/metrics"):
            status = .methodNotAllowed
            body = Array("GET /metrics\n".utf8)
            headers.add(name: "Allow", value: "GET, HEAD")
        default:
            status = .notFound
            body = Array("hammock serves its metrics at /metrics\n".utf8)
        }
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Connection", value: request.isKeepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        let size = request.method == .HEAD ? 0 : body.count
        if request.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        queuedAnswers += 1
        queuedBytes += size
        let keepAlive = request.isKeepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { [self] _ in
            queuedAnswers -= 1
            queuedBytes -= size
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
