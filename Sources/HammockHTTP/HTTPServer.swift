import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A small HTTP/1.1 server on one event-loop thread of its own, apart from the engine's loop: what `--metrics`
/// and `--http` serve. Each route is a path, the methods it answers and an async reply (an answer, or a
/// stream of server-sent events); the server bounds what a client can make it hold (connections, idle time,
/// a request's body, answers a client does not take, a stream it does not read), guards the door
/// (`Policy`: a bearer token, the `Host` a loopback server answers, the origins a browser may call from),
/// and answers what no route knows with 404, and a known path asked with another method with 405.
public final class HTTPServer: Sendable {
    /// A request as a route sees it: its path without the query, the query's fields, its headers and body.
    public struct Request: Sendable {
        public let method: String
        public let path: String
        public let query: [String: String]
        /// A route that ends in `*` (`/v1/sources/*`): the rest of the path, percent-decoded; nil otherwise.
        public let rest: String?
        public let headers: HTTPHeaders
        public let body: [UInt8]
    }

    /// What a route answers.
    public struct Answer: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]
        public var headers: [(String, String)] = []

        public init(status: Int, contentType: String, body: [UInt8], headers: [(String, String)] = []) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.headers = headers
        }

        /// A JSON body.
        public static func json(_ status: Int, _ text: String) -> Answer {
            Answer(status: status, contentType: "application/json", body: Array((text + "\n").utf8))
        }
    }

    /// What a route replies: an answer, or server-sent events until the source or the client ends them.
    public enum Reply: Sendable {
        case answer(Answer)
        case events(any EventSource)
    }

    /// The bytes of a server-sent event stream, formatted (`event:`, `id:`, `data:`), as they come.
    public protocol EventSource: Sendable {
        /// The next events' bytes, waiting until there are some; nil when the stream is over.
        func next() async -> [UInt8]?
        /// The client is gone (or the server stops): a waiting `next()` returns nil.
        func close()
    }

    /// A path the server answers, with the methods it takes.
    public struct Route: Sendable {
        /// Exact, or a prefix when it ends in `*`: the rest is one path segment (`Request.rest`).
        public let path: String
        public let methods: [HTTPMethod]
        public let reply: @Sendable (Request) async -> Reply

        /// A route that answers GET and HEAD.
        public init(_ path: String, answer: @escaping @Sendable (Request) async -> Answer) {
            self.init(path, methods: [.GET, .HEAD]) { .answer(await answer($0)) }
        }

        public init(_ path: String, methods: [HTTPMethod], reply: @escaping @Sendable (Request) async -> Reply) {
            self.path = path
            self.methods = methods
            self.reply = reply
        }

        var isPrefix: Bool { path.hasSuffix("*") }
        var prefix: Substring { path.dropLast() }
    }

    /// Who may use the door, checked before any route.
    public struct Policy: Sendable {
        /// `Authorization: Bearer TOKEN` on every request (compared in constant time); nil: none asked.
        public var token: [UInt8]?
        /// Answer only requests whose `Host` names this machine's loopback: a page that made some name
        /// resolve to 127.0.0.1 (DNS rebinding) is refused, though the browser sends it here.
        public var requiresLoopbackHost: Bool
        /// Origins a browser page may call from (`Access-Control-Allow-Origin`); `*`: any. A request from
        /// another origin (its `Origin` header, other than the server's own) is refused, so that no page can
        /// make a visitor's browser send a control line.
        public var allowedOrigins: [String]

        public init(token: [UInt8]? = nil, requiresLoopbackHost: Bool = false, allowedOrigins: [String] = []) {
            self.token = token
            self.requiresLoopbackHost = requiresLoopbackHost
            self.allowedOrigins = allowedOrigins
        }
    }

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// Where it listens: the port the system chose for port 0.
    public let address: String

    /// At most this many connections at once, unless the server is started with another bound (`--http`'s is
    /// 64, for its event streams). Each holds a file descriptor of hammock's own, which its
    /// plugins, pipes and watched files need too, so a client that opens thousands and sends nothing must
    /// not use them up. A connection past the limit closes the oldest one that is not an event stream: a
    /// scraper's idle keep-alive connection, most often, which it simply opens again; so a flood never locks
    /// Prometheus out, and never cuts a dashboard's stream. With every connection a stream, the new one is
    /// closed.
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
    /// A request's body, at most (a control line is at most 1 MiB, and its JSON around it).
    public static let maximumBodyBytes = (1 << 20) + 4096
    /// An event stream whose write the client has not taken for this long is closed.
    public static let defaultStallTimeout = Duration.seconds(30)
    /// An event stream gets a comment line when it has had nothing for this long, so that a proxy does not
    /// close it as idle.
    public static let defaultHeartbeat = Duration.seconds(15)

    /// `defaultIdleTimeout`; in a debug build, `HAMMOCK_METRICS_IDLE_TIMEOUT` (a duration such as `500ms`)
    /// instead, so that a test of the idle close need not wait 30 s.
    public static func idleTimeout(environment: [String: String]) -> Duration {
        duration("HAMMOCK_METRICS_IDLE_TIMEOUT", environment, otherwise: defaultIdleTimeout)
    }

    /// A test's shorter wait, from `name` in a debug build's environment; `otherwise` in a release.
    static func duration(_ name: String, _ environment: [String: String], otherwise: Duration) -> Duration {
        #if DEBUG
            if let text = environment[name], case .success(let duration) = parseDuration(text) {
                return duration
            }
        #endif
        return otherwise
    }

    /// Why the server cannot listen.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds `address` at once, so that an address not of this machine or a port in use stops hammock before
    /// it starts; `option` names the command-line option in the message (`--metrics`, `--http`).
    public static func start(
        _ address: HTTPAddress, option: String, routes: [Route], policy: Policy = Policy(),
        maximumConnections: Int = maximumConnections
    ) async throws(Failure) -> HTTPServer {
        let (host, port) = (address.host, address.port)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let connections = Connections(limit: maximumConnections)
        let environment = ProcessInfo.processInfo.environment
        let limits = Limits(
            idle: TimeAmount(idleTimeout(environment: environment)),
            stall: TimeAmount(duration("HAMMOCK_HTTP_STALL_TIMEOUT", environment, otherwise: defaultStallTimeout)),
            heartbeat: TimeAmount(duration("HAMMOCK_HTTP_HEARTBEAT", environment, otherwise: defaultHeartbeat)))
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                guard connections.opened(channel) else {
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: limits.idle))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
                    try channel.pipeline.syncOperations.addHandler(
                        RouteHandler(routes: routes, policy: policy, limits: limits, connections: connections))
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
    public var isLoopback: Bool { Self.isLoopback(host: host) }

    /// Whether `host` (a name or an address, without port or brackets) is this machine's loopback.
    public static func isLoopback(host: String) -> Bool {
        let host = host.lowercased()
        if host == "localhost" || host == "::1" { return true }
        // 127.0.0.0/8 as an address, not a name that begins so (`127.0.0.1.example.com`).
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}

/// The server's times, as its event loop counts them.
struct Limits: Sendable {
    /// A connection that sends nothing for this long, and is not an event stream, is closed.
    let idle: TimeAmount
    /// An event stream whose write is not taken for this long is closed.
    let stall: TimeAmount
    /// An event stream's keep-alive comment, this often.
    let heartbeat: TimeAmount
}

/// The open connections, oldest first, and which of them are event streams.
final class Connections: Sendable {
    private let limit: Int
    private struct Open {
        var channels: [any Channel] = []
        var streams: Set<ObjectIdentifier> = []
    }
    private let open = Mutex(Open())

    init(limit: Int) { self.limit = limit }

    /// Counts a new connection in, closing the oldest that is not a stream when there are too many; false
    /// when every other one is a stream (the new one is to be closed).
    func opened(_ channel: any Channel) -> Bool {
        let (taken, oldest): (Bool, (any Channel)?) = open.withLock { open in
            guard open.channels.count >= limit else {
                open.channels.append(channel)
                return (true, nil)
            }
            guard let index = open.channels.firstIndex(where: { !open.streams.contains(ObjectIdentifier($0)) }) else {
                return (false, nil)
            }
            let oldest = open.channels.remove(at: index)
            open.channels.append(channel)
            return (true, oldest)
        }
        oldest?.close(promise: nil)
        guard taken else { return false }
        channel.closeFuture.whenComplete { [self] _ in
            open.withLock { open in
                open.channels.removeAll { $0 === channel }
                open.streams.remove(ObjectIdentifier(channel))
            }
        }
        return true
    }

    /// The connection carries an event stream from now on: a flood of new connections does not close it.
    func streaming(_ channel: any Channel) {
        open.withLock { open in _ = open.streams.insert(ObjectIdentifier(channel)) }
    }
}

/// One HTTP/1.1 connection: each request, once whole, goes through the policy, then to its route; answers are
/// written in the order asked. It lives on its channel's event loop and is touched only there; a route's reply
/// is awaited off the loop and written back on it. An event stream is the connection's last reply.
private final class RouteHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: [HTTPServer.Route]
    private let policy: HTTPServer.Policy
    private let limits: Limits
    private let connections: Connections
    /// The request being read: its head, and its body so far.
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// Answers asked and not yet handed to the kernel (awaited, or not taken by the client), and their bytes.
    private var queuedAnswers = 0
    private var queuedBytes = 0
    /// The connection closes, or carries an event stream: nothing more it sends is read as a request.
    private var isDone = false
    private var isStreaming = false
    /// The previous request's answer, handed to the channel: the next one is written after it (pipelined
    /// answers keep their order). Not its flush: a client that reads nothing must still be seen to pile up
    /// answers, and be closed.
    private var previous: EventLoopFuture<Void>?

    init(routes: [HTTPServer.Route], policy: HTTPServer.Policy, limits: Limits, connections: Connections) {
        self.routes = routes
        self.policy = policy
        self.limits = limits
        self.connections = connections
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            // A stream's client sends nothing after its request; it is watched by its writes instead.
            if !isStreaming { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Malformed HTTP: a 400 that says what NIO's parser found, and the connection is over (what follows the
    /// malformed bytes cannot be read as requests).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !isDone, error is HTTPParserError else {
            isDone = true
            context.close(promise: nil)
            return
        }
        isDone = true
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
        let answer = HTTPServer.Answer.json(400, #"{"error":"malformed HTTP request (\#(error))"}"#)
        send(context.eventLoop.makeSucceededFuture(.answer(answer)), to: head, closing: true, on: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !isDone else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            // A client that sends requests and does not take the answers: closed, rather than queueing answers
            // without bound (the requests it pipelined behind are dropped with the connection).
            if queuedAnswers >= HTTPServer.maximumQueuedAnswers
                || (queuedAnswers > 0 && queuedBytes >= HTTPServer.maximumQueuedBytes)
            {
                isDone = true
                context.close(promise: nil)
                return
            }
            self.head = head
            body = []
            if let length = head.headers.first(name: "Content-Length").flatMap({ Int($0) }), length > HTTPServer.maximumBodyBytes {
                refuseBody(head, context: context)
            }
        case .body(var buffer):
            guard let head else { return }
            guard body.count + buffer.readableBytes <= HTTPServer.maximumBodyBytes else {
                refuseBody(head, context: context)
                return
            }
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            self.head = nil
            let request = body
            body = []
            answer(head, body: request, context: context)
        }
    }

    /// A body past the bound: 413, and the connection closes (the rest of it is never read).
    private func refuseBody(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        isDone = true
        self.head = nil
        body = []
        let answer = HTTPServer.Answer.json(413, #"{"error":"a request body is at most \#(HTTPServer.maximumBodyBytes) bytes"}"#)
        send(context.eventLoop.makeSucceededFuture(.answer(answer)), to: head, closing: true, on: context)
    }

    private func answer(_ head: HTTPRequestHead, body: [UInt8], context: ChannelHandlerContext) {
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts.first.map(String.init) ?? head.uri
        let query = parts.count > 1 ? Self.fields(of: parts[1]) : [:]
        let eventLoop = context.eventLoop
        if let refusal = policy.refusal(of: head) {
            send(eventLoop.makeSucceededFuture(.answer(refusal)), to: head, closing: false, on: context)
            return
        }
        if head.method == .OPTIONS {
            send(eventLoop.makeSucceededFuture(.answer(policy.preflight(head))), to: head, closing: false, on: context)
            return
        }
        let match = routes.lazy.compactMap { route -> (HTTPServer.Route, String?)? in
            if !route.isPrefix { return route.path == path ? (route, nil) : nil }
            guard path.hasPrefix(route.prefix) else { return nil }
            let rest = path.dropFirst(route.prefix.count)
            guard !rest.isEmpty, !rest.contains("/") else { return nil }
            return (route, PercentEncoding.decoded(rest, plusIsSpace: false) ?? String(rest))
        }.first
        let replied: EventLoopFuture<HTTPServer.Reply>
        switch match {
        case (let route, let rest)? where route.methods.contains(head.method):
            if let refusal = HTTPServer.Policy.refusal(ofBody: head) {
                replied = eventLoop.makeSucceededFuture(.answer(refusal))
                break
            }
            let request = HTTPServer.Request(
                method: head.method.rawValue, path: path, query: query, rest: rest, headers: head.headers, body: body)
            let promise = eventLoop.makePromise(of: HTTPServer.Reply.self)
            promise.completeWithTask { await route.reply(request) }
            replied = promise.futureResult
        case (let route, _)?:
            let methods = route.methods.map(\.rawValue).joined(separator: ", ")
            var answer = HTTPServer.Answer.json(405, #"{"error":"\#(path) answers \#(methods)"}"#)
            answer.headers.append(("Allow", methods))
            replied = eventLoop.makeSucceededFuture(.answer(answer))
        case nil:
            let known = routes.map(\.path).joined(separator: ", ")
            replied = eventLoop.makeSucceededFuture(.answer(.json(404, #"{"error":"no such path; hammock serves \#(known)"}"#)))
        }
        send(replied, to: head, closing: false, on: context)
    }

    /// Writes `replied` once it comes and every earlier answer is written.
    private func send(
        _ replied: EventLoopFuture<HTTPServer.Reply>, to head: HTTPRequestHead, closing: Bool, on context: ChannelHandlerContext
    ) {
        queuedAnswers += 1
        let after = previous ?? context.eventLoop.makeSucceededVoidFuture()
        let channel = context.channel
        // On the channel's event loop, as this handler is.
        let issued = after.flatMap { replied }.assumeIsolated().map { [self] reply in
            switch reply {
            case .answer(let answer): self.write(answer, to: head, closing: closing, on: channel)
            case .events(let source): self.stream(source, to: head, on: channel)
            }
        }
        previous = issued.nonisolated()
    }

    private func write(_ answer: HTTPServer.Answer, to request: HTTPRequestHead, closing: Bool, on channel: any Channel) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: answer.contentType)
        headers.add(name: "Content-Length", value: String(answer.body.count))
        for (name, value) in answer.headers + policy.corsHeaders(for: request) { headers.add(name: name, value: value) }
        let keepAlive = request.isKeepAlive && !closing
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        let status = HTTPResponseStatus(statusCode: answer.status)
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: status, headers: headers)), promise: nil)
        let size = request.method == .HEAD ? 0 : answer.body.count
        if request.method != .HEAD {
            channel.write(HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(bytes: answer.body))), promise: nil)
        }
        queuedBytes += size
        channel.writeAndFlush(HTTPServerResponsePart.end(nil)).assumeIsolated().whenComplete { [self] _ in
            queuedAnswers -= 1
            queuedBytes -= size
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    /// Server-sent events from `source` until it ends (then the answer ends and the connection closes) or the
    /// client goes (the source is closed). A write the client does not take within the stall time closes the
    /// connection; the source coalesces meanwhile, so nothing piles up here.
    private func stream(_ source: any HTTPServer.EventSource, to request: HTTPRequestHead, on channel: any Channel) {
        isDone = true
        isStreaming = true
        queuedAnswers -= 1
        connections.streaming(channel)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Accel-Buffering", value: "no")  // nginx: pass each event on as it comes
        for (name, value) in policy.corsHeaders(for: request) { headers.add(name: name, value: value) }
        channel.writeAndFlush(HTTPServerResponsePart.head(HTTPResponseHead(version: request.version, status: .ok, headers: headers)), promise: nil)
        let (eventLoop, limits) = (channel.eventLoop, limits)
        let heartbeat = eventLoop.scheduleRepeatedTask(initialDelay: limits.heartbeat, delay: limits.heartbeat) { _ in
            // Not behind a write the client has not taken: the stall check watches that one.
            guard channel.isWritable else { return }
            channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: ":\n\n"))), promise: nil)
        }
        channel.closeFuture.whenComplete { _ in
            heartbeat.cancel()
            source.close()
        }
        let abort = Self.abort(channel)
        Task {
            while let bytes = await source.next() {
                let written = eventLoop.flatSubmit {
                    let stalled = eventLoop.scheduleTask(in: limits.stall, abort)
                    let write = channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: bytes))))
                    write.whenComplete { _ in stalled.cancel() }
                    return write
                }
                guard (try? await written.get()) != nil else { break }
            }
            eventLoop.execute {
                channel.writeAndFlush(HTTPServerResponsePart.end(nil)).whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }

    /// What closes a connection whose client stopped reading: at once, with a reset: the bytes the kernel still
    /// holds for it are dropped, not kept while it trickles them in.
    private static func abort(_ channel: any Channel) -> @Sendable () -> Void {
        let socket = channel as? any SocketOptionProvider
        return {
            guard let socket else { return channel.close(promise: nil) }
            socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
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

extension HTTPServer.Policy {
    /// Why `request` is refused before any route looks at it, or nil.
    func refusal(of request: HTTPRequestHead) -> HTTPServer.Answer? {
        if requiresLoopbackHost {
            let host = request.headers.first(name: "Host") ?? ""
            guard HTTPAddress.isLoopback(host: Self.hostName(host)) else {
                return .json(403, #"{"error":"Host \#(JSONValue.string(host).jsonString) is not this machine's loopback; hammock answers 127.0.0.1, ::1 and localhost (a page whose name was made to resolve here is refused)"}"#)
            }
        }
        if let origin = request.headers.first(name: "Origin"), !allows(origin), !isSameOrigin(origin, request) {
            return .json(403, #"{"error":"origin \#(JSONValue.string(origin).jsonString) may not call hammock; allow it with --http-cors"}"#)
        }
        if let token {
            let given = request.headers.first(name: "Authorization").map { Array($0.utf8) } ?? []
            let expected = Array("Bearer ".utf8) + token
            guard Self.constantTimeEqual(given, expected) else {
                var answer = HTTPServer.Answer.json(401, #"{"error":"this door asks for Authorization: Bearer and the token of --http-token"}"#)
                answer.headers.append(("WWW-Authenticate", #"Bearer realm="hammock""#))
                return answer
            }
        }
        return nil
    }

    /// A POST's body is JSON, and says so: a browser sends a form's or a `text/plain` body without asking
    /// first (no preflight), so a page of any origin could post one; JSON it must ask for, and is refused.
    static func refusal(ofBody request: HTTPRequestHead) -> HTTPServer.Answer? {
        guard request.method == .POST else { return nil }
        let type = request.headers.first(name: "Content-Type") ?? ""
        guard type.lowercased().hasPrefix("application/json") else {
            return .json(415, #"{"error":"a POST's body is JSON: send Content-Type: application/json"}"#)
        }
        return nil
    }

    /// A browser's preflight (`OPTIONS`) from an allowed origin: what it may send.
    func preflight(_ request: HTTPRequestHead) -> HTTPServer.Answer {
        var answer = HTTPServer.Answer(status: 204, contentType: "text/plain", body: [])
        answer.headers = [
            ("Access-Control-Allow-Methods", "GET, HEAD, POST"),
            ("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID"),
            ("Access-Control-Max-Age", "600"),
        ]
        return answer
    }

    /// `Access-Control-Allow-Origin` for a request from an allowed origin.
    func corsHeaders(for request: HTTPRequestHead) -> [(String, String)] {
        guard let origin = request.headers.first(name: "Origin"), allows(origin) else { return [] }
        return [("Access-Control-Allow-Origin", allowedOrigins.contains("*") ? "*" : origin), ("Vary", "Origin")]
    }

    private func allows(_ origin: String) -> Bool {
        allowedOrigins.contains("*") || allowedOrigins.contains(origin)
    }

    /// A page served by this server itself.
    private func isSameOrigin(_ origin: String, _ request: HTTPRequestHead) -> Bool {
        guard let host = request.headers.first(name: "Host") else { return false }
        return origin == "http://" + host
    }

    /// `HOST` of a `Host` header's `HOST:PORT` (`[::1]:80`: `::1`).
    static func hostName(_ header: String) -> String {
        if header.hasPrefix("["), let end = header.firstIndex(of: "]") {
            return String(header[header.index(after: header.startIndex)..<end])
        }
        return String(header.split(separator: ":", maxSplits: 1).first ?? "")
    }

    /// Equal bytes, in a time that depends on the lengths alone (a token is not guessed a byte at a time).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}
