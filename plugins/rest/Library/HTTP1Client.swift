import FoundationEssentials
import Glibc
import HammockCore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// The rest plugin's HTTP client: HTTP/1.1 over SwiftNIO's own codec, TLS by swift-nio-ssl, gzip and deflate
/// by swift-nio-extras, and nothing else.
///
/// Cheap per request by design. Each event loop keeps its own idle keep-alive connections, by (scheme, host,
/// port), and a request runs on the loop it is started from (a source's load task prefers its loop as task
/// executor, see `LoadLoop`), so it takes a connection, writes and reads without leaving that thread. The
/// whole answer (status, headers, the body up to a limit) is gathered in the channel handler and handed back
/// with one resume of one continuation. Deadlines are one timer per loop for all its requests. At most
/// `defaultConnectionsPerOrigin` connections are open to one origin (shared out among the loops); more
/// requests wait, first come first served, for one to come back or close.
///
/// It never follows redirects (the source does, with its own rules) and takes http and https URLs only.
final class HTTP1Client: Sendable {
    /// At most this long to connect, whatever the deadline (what async-http-client was configured with).
    static let connectTimeout = TimeAmount.seconds(10)
    /// Idle connections kept per origin and event loop; more are closed when they come back.
    static let maximumIdlePerOrigin = 256
    /// Connections open at once to one origin, over all the loops (as async-http-client's 8 per host):
    /// more requests wait for one of them.
    static let defaultConnectionsPerOrigin = 8
    /// A connection idle longer than this is closed instead of used (as async-http-client's pool did): a
    /// firewall or NAT may have dropped it without a word, and a request on it would wait for its deadline.
    static let defaultIdleTimeout = TimeAmount.seconds(60)

    let group: any EventLoopGroup
    let proxies: ProxySettings
    private let loops: [ObjectIdentifier: LoopConnections]
    private let tls: Mutex<NIOSSLContext?> = Mutex(nil)
    private let trustedCertificates: String?

    /// - Parameters:
    ///   - trustedCertificates: a PEM file of the certificates to trust instead of the system's roots
    ///     (`SSL_CERT_FILE`), or nil for the system's.
    ///   - connectionsPerOrigin: at most this many connections open to one origin, shared out among the
    ///     group's loops (each gets its share, at least 2).
    init(
        group: any EventLoopGroup, proxies: ProxySettings = ProxySettings(), trustedCertificates: String? = nil,
        connectionsPerOrigin: Int = HTTP1Client.defaultConnectionsPerOrigin, idleTimeout: TimeAmount = HTTP1Client.defaultIdleTimeout
    ) {
        self.group = group
        self.proxies = proxies
        self.trustedCertificates = trustedCertificates
        let all = Array(group.makeIterator())
        let perLoop = max(2, (connectionsPerOrigin + all.count - 1) / max(all.count, 1))
        var loops: [ObjectIdentifier: LoopConnections] = [:]
        for loop in all { loops[ObjectIdentifier(loop)] = LoopConnections(eventLoop: loop, limit: perLoop, idleTimeout: idleTimeout) }
        self.loops = loops
        Self.instantiateTheCodecsTypes(connections: loops.values.first)
    }

    /// Makes the pipeline's handlers once, on this thread, before any event loop does.
    ///
    /// The first `codec(for:)` makes the Swift runtime build `ByteToMessageHandler<HTTPDecoder<…>>`'s metadata
    /// by its mangled name, checking `HTTPDecoder<…>: ByteToMessageDecoder` on the way. Two event loops doing
    /// that at once for their first connections can crash the runtime (SIGSEGV in
    /// `swift_conformsToProtocolMaybeInstantiateSuperclasses`, a null metadata: a race in its concurrent
    /// lookup of types by name, seen on Swift 6.3.1 in 5 of 6,000 plugin starts by
    /// `tests/stress/rest-first-requests`). Once built here, the metadata is cached and the loops only read it.
    private static func instantiateTheCodecsTypes(connections: LoopConnections?) {
        guard let connections else { return }
        let handler = HTTP1ConnectionHandler(origin: .init(secure: false, host: "", port: 0), connections: connections, proxy: nil)
        _ = HTTP1ConnectionHandler.codec(for: handler)
    }

    /// Sends `request` and gathers its answer, on `eventLoop` (the caller's, when it runs on one of the
    /// group's), within `deadline`. Throws `CancellationError` when the task is cancelled (the connection is
    /// closed), an `HTTP1ClientError` or SwiftNIO's own errors (connect, TLS, parsing) otherwise.
    func execute(_ request: HTTP1Request, deadline: NIODeadline, on eventLoop: (any EventLoop)? = nil) async throws -> HTTP1Response {
        let target = try request.target ?? HTTP1Target(url: request.url)
        let loop = eventLoop ?? group.any()
        guard let connections = loops[ObjectIdentifier(loop)] else {
            preconditionFailure("HTTP1Client.execute on an event loop of another group")
        }
        try Task.checkCancellation()
        let exchange = Exchange(request: request, target: target, deadline: deadline, client: self, connections: connections)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTP1Response, any Error>) in
                if loop.inEventLoop {
                    exchange.begin(continuation)
                } else {
                    loop.execute { exchange.begin(continuation) }
                }
            }
        } onCancel: {
            loop.execute { exchange.cancel() }
        }
    }

    /// Closes every idle connection; requests still running end as their connections do.
    func shutdown() async {
        var closed: [EventLoopFuture<Void>] = []
        for connections in loops.values {
            closed.append(connections.eventLoop.submit { connections.closeAll() })
        }
        for future in closed { try? await future.get() }
    }

    /// The TLS context, made at the first https connection: the system's trust roots (or those of
    /// `trustedCertificates`), full verification of the chain and of the host name.
    func tlsContext() throws -> NIOSSLContext {
        try tls.withLock { context in
            if let context { return context }
            var configuration = TLSConfiguration.makeClientConfiguration()
            if let trustedCertificates { configuration.trustRoots = .file(trustedCertificates) }
            let made = try NIOSSLContext(configuration: configuration)
            context = made
            return made
        }
    }
}

/// One request, and how much of an answer's body to keep.
struct HTTP1Request: Sendable {
    var url: String
    /// `url` already parsed, by a caller that sends to the same URL again and again; parsed from `url` when nil.
    var target: HTTP1Target? = nil
    var method: HTTPMethod = .GET
    var headers = HTTPHeaders()
    var body: [UInt8]? = nil
    /// For a 2xx answer's body.
    var bodyLimit = BodyLimit(bytes: 1 << 20, truncating: false)
    /// For any other answer's body (an error's message, a redirect's page).
    var otherBodyLimit = BodyLimit(bytes: 64 << 10, truncating: true)

    /// The most of a body kept: larger, the body is nil (or with `truncating`, its first `bytes` bytes).
    /// A `Content-Length` over it fails at once unless `truncating`; decompressed bytes count. Stopping
    /// early closes the connection.
    struct BodyLimit: Sendable {
        var bytes: Int
        var truncating: Bool
    }

    /// Safe to send again when a reused connection turned out to be closed before anything came back.
    var isIdempotent: Bool {
        switch method {
        case .GET, .HEAD, .PUT, .DELETE, .OPTIONS, .TRACE: return true
        default: return false
        }
    }
}

/// An answer, gathered whole.
struct HTTP1Response: Sendable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    /// Nil when larger than the request's limit (and not truncating).
    var body: [UInt8]?
}

/// The client's own failures; the rest come from SwiftNIO (connect, resolve, TLS, parse).
enum HTTP1ClientError: Error, Equatable, CustomStringConvertible {
    /// The deadline passed while waiting for (or reading) the answer.
    case deadlineExceeded
    /// The deadline (or the connect timeout) passed while connecting.
    case connectTimeout
    /// The deadline passed during the TLS handshake.
    case tlsHandshakeTimeout
    /// The server closed the connection before the answer was complete.
    case remoteConnectionClosed
    /// Not an http or https URL.
    case unsupportedScheme(String)
    case invalidURL(String)
    /// The proxy did not open a tunnel (its answer's status, or 0 when it closed or answered nonsense).
    case proxyRefused(host: String, status: Int)

    var description: String {
        switch self {
        case .deadlineExceeded: return "the deadline passed"
        case .connectTimeout: return "connect timeout"
        case .tlsHandshakeTimeout: return "TLS handshake timeout"
        case .remoteConnectionClosed: return "the connection was closed before the answer was complete"
        case .unsupportedScheme(let scheme): return "only http and https URLs can be fetched, not \(scheme):"
        case .invalidURL(let url): return "\"\(url)\" is not a URL"
        case .proxyRefused(let host, let status):
            return status == 0 ? "the proxy \(host) did not open a tunnel" : "the proxy \(host) answered HTTP \(status) to CONNECT"
        }
    }
}

/// Where a request goes: scheme, host and port, and what its request line and Host header say.
struct HTTP1Target: Sendable {
    struct Origin: Hashable, Sendable {
        var secure: Bool
        var host: String
        var port: Int
    }

    var origin: Origin
    /// The path and query (origin form).
    var path: String
    /// The Host header: the host (bracketed when IPv6), with the port when not the scheme's own.
    var hostHeader: String

    init(url: String) throws(HTTP1ClientError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            throw .invalidURL(url)
        }
        guard scheme == "http" || scheme == "https" else { throw .unsupportedScheme(scheme) }
        guard var host = components.percentEncodedHost, !host.isEmpty else { throw .invalidURL(url) }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let secure = scheme == "https"
        let defaultPort = secure ? 443 : 80
        let port = components.port ?? defaultPort
        origin = Origin(secure: secure, host: host, port: port)
        var path = components.percentEncodedPath
        if path.isEmpty { path = "/" }
        if let query = components.percentEncodedQuery { path += "?" + query }
        self.path = path
        let bracketed = host.contains(":") ? "[\(host)]" : host
        hostHeader = port == defaultPort ? bracketed : "\(bracketed):\(port)"
    }

    /// `http://host:port/path`, the absolute form a proxy is asked with.
    var absoluteForm: String { "\(origin.secure ? "https" : "http")://\(hostHeader)\(path)" }

    /// Whether the host is an IP address (no SNI for those).
    var hostIsAddress: Bool {
        (try? SocketAddress(ipAddress: origin.host, port: 0)) != nil
    }
}

// MARK: One request's life

/// A request from its start to its one answer or error, on one event loop: which connection it has, its
/// deadline, and the continuation resumed once.
final class Exchange: @unchecked Sendable {
    // Everything below is touched on `connections.eventLoop` only.
    let request: HTTP1Request
    let target: HTTP1Target
    let deadline: NIODeadline
    let client: HTTP1Client
    let connections: LoopConnections
    private var continuation: CheckedContinuation<HTTP1Response, any Error>?
    /// `begin` came (the continuation is set until the end).
    private var begun = false
    /// The task was cancelled before `begin`.
    private var cancelledEarly = false
    /// The connection serving it, once it has one.
    var connection: HTTP1ConnectionHandler?
    /// A channel still connecting for it, closed if it ends first.
    var connecting: (any Channel)?
    var phase = Phase.connecting
    /// It went on a connection from the pool (a failure before any answer may then be retried once).
    var reused = false
    var retried = false
    var deadlineKey: Int?

    enum Phase { case waiting, connecting, handshaking, exchanging }

    init(request: HTTP1Request, target: HTTP1Target, deadline: NIODeadline, client: HTTP1Client, connections: LoopConnections) {
        self.request = request
        self.target = target
        self.deadline = deadline
        self.client = client
        self.connections = connections
    }

    var isFinished: Bool { continuation == nil }

    /// The request starts, to end by resuming `continuation` once.
    func begin(_ continuation: CheckedContinuation<HTTP1Response, any Error>) {
        begun = true
        guard !cancelledEarly else {
            continuation.resume(throwing: CancellationError())
            return
        }
        self.continuation = continuation
        start()
    }

    /// The task was cancelled: the request ends now, its connection closed.
    func cancel() {
        if begun {
            finish(.failure(CancellationError()))
        } else {
            cancelledEarly = true
        }
    }

    private func start() {
        if deadline <= .now() {
            finish(.failure(HTTP1ClientError.deadlineExceeded))
            return
        }
        deadlineKey = connections.watch(self)
        if let pooled = connections.takeIdle(target.origin) {
            run(on: pooled)
        } else if connections.mayOpen(target.origin) {
            connect()
        } else {
            phase = .waiting
            connections.wait(self)
        }
    }

    /// On a connection kept alive: the pool's, or one another request just finished with.
    func run(on connection: HTTP1ConnectionHandler) {
        reused = true
        phase = .exchanging
        connection.run(self)
    }

    /// A connection closed, and this request waited for room to open one.
    func connectNew() {
        phase = .connecting
        connect()
    }

    /// A reused connection was found closed before any of the answer came: once more, on a new one.
    func retryOnNewConnection() {
        retried = true
        reused = false
        connection = nil
        phase = .connecting
        connect()
    }

    private func connect() {
        let eventLoop = connections.eventLoop
        let connections = self.connections
        let origin = target.origin
        connections.opening(origin)
        let proxy = client.proxies.proxy(for: target.origin)
        let timeout = min(HTTP1Client.connectTimeout, max(deadline - .now(), .milliseconds(1)))
        // TCP_NODELAY is ClientBootstrap's own default. (Asked for as `.socketOption(.tcp_nodelay)` it was
        // SOL_SOCKET's option 1, SO_DEBUG, which needs CAP_NET_ADMIN: in a user namespace every connect failed
        // with EACCES, as under the swaybar consumer's sway.)
        let bootstrap = ClientBootstrap(group: eventLoop).connectTimeout(timeout)
        let host = proxy?.host ?? target.origin.host
        let port = proxy?.port ?? target.origin.port
        bootstrap.connect(host: host, port: port).hop(to: eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .failure(let error):
                connections.closed(origin)
                self.finish(.failure(error))
            case .success(let channel):
                channel.closeFuture.assumeIsolated().whenComplete { _ in connections.closed(origin) }
                guard !self.isFinished else {
                    channel.close(promise: nil)
                    return
                }
                self.connecting = channel
                self.configure(channel, proxy: proxy)
            }
        }
    }

    /// The pipeline of a new connection: a CONNECT tunnel through an https proxy, TLS, the HTTP/1.1 codec,
    /// the decompressor and the connection's handler.
    private func configure(_ channel: any Channel, proxy: ProxySettings.Proxy?) {
        do {
            let pipeline = channel.pipeline.syncOperations
            if target.origin.secure {
                if let proxy {
                    let tunnel = ConnectTunnelHandler(target: target, proxy: proxy) { [self] result in
                        switch result {
                        case .success:
                            do {
                                try addTLSAndHTTP(to: channel, proxy: nil)
                            } catch {
                                channel.close(promise: nil)
                                finish(.failure(error))
                            }
                        case .failure(let error):
                            channel.close(promise: nil)
                            finish(.failure(error))
                        }
                    }
                    try pipeline.addHandler(tunnel)
                    return
                }
                try addTLSAndHTTP(to: channel, proxy: nil)
            } else {
                try addTLSAndHTTP(to: channel, proxy: proxy)
            }
        } catch {
            channel.close(promise: nil)
            finish(.failure(error))
        }
    }

    private func addTLSAndHTTP(to channel: any Channel, proxy: ProxySettings.Proxy?) throws {
        guard !isFinished else {
            channel.close(promise: nil)
            return
        }
        let pipeline = channel.pipeline.syncOperations
        if target.origin.secure {
            phase = .handshaking
            let handler = try NIOSSLClientHandler(
                context: client.tlsContext(), serverHostname: target.hostIsAddress ? nil : target.origin.host)
            try pipeline.addHandler(handler)
        } else {
            phase = .exchanging
        }
        let handler = HTTP1ConnectionHandler(origin: target.origin, connections: connections, proxy: proxy)
        try pipeline.addHandlers(HTTP1ConnectionHandler.codec(for: handler))
        connecting = nil
        handler.run(self)
    }

    /// The one end of the request: its continuation resumed, its deadline forgotten. What comes later is
    /// ignored; a connection it leaves unfinished is closed.
    func finish(_ result: Result<HTTP1Response, any Error>) {
        guard let continuation else { return }
        self.continuation = nil
        if let deadlineKey { connections.unwatch(deadlineKey) }
        if case .failure = result {
            connecting?.close(promise: nil)
            connection?.abandon(self)
        }
        connecting = nil
        connection = nil
        continuation.resume(with: result)
    }

    /// The deadline passed: the error says in which phase.
    func timeOut() {
        switch phase {
        case .waiting: finish(.failure(HTTP1ClientError.deadlineExceeded))
        case .connecting: finish(.failure(HTTP1ClientError.connectTimeout))
        case .handshaking: finish(.failure(HTTP1ClientError.tlsHandshakeTimeout))
        case .exchanging: finish(.failure(HTTP1ClientError.deadlineExceeded))
        }
    }
}

// MARK: An event loop's connections

/// One event loop's connections by origin (how many are open, the idle ones, the requests waiting for
/// one), and the deadlines of its requests under one timer. Touched on that loop only.
final class LoopConnections: @unchecked Sendable {
    let eventLoop: any EventLoop
    /// Connections open (or opening) at once to one origin from this loop.
    let limit: Int
    private var open: [HTTP1Target.Origin: Int] = [:]
    /// Requests waiting for a connection, first come first served (ended ones are skipped).
    private var waiting: [HTTP1Target.Origin: [Exchange]] = [:]
    private var idle: [HTTP1Target.Origin: [HTTP1ConnectionHandler]] = [:]
    private var closed = false
    private var watched: [Int: Exchange] = [:]
    private var nextKey = 0
    private var armed: (at: NIODeadline, timer: Scheduled<Void>)?

    let idleTimeout: TimeAmount

    init(eventLoop: any EventLoop, limit: Int, idleTimeout: TimeAmount) {
        self.eventLoop = eventLoop
        self.limit = limit
        self.idleTimeout = idleTimeout
    }

    func mayOpen(_ origin: HTTP1Target.Origin) -> Bool { (open[origin] ?? 0) < limit }

    func opening(_ origin: HTTP1Target.Origin) { open[origin, default: 0] += 1 }

    /// A connection to `origin` closed (or did not open): room for the first request waiting.
    func closed(_ origin: HTTP1Target.Origin) {
        let count = (open[origin] ?? 1) - 1
        open[origin] = count > 0 ? count : nil
        if mayOpen(origin), let next = nextWaiting(origin) { next.connectNew() }
    }

    func wait(_ exchange: Exchange) {
        waiting[exchange.target.origin, default: []].append(exchange)
    }

    private func nextWaiting(_ origin: HTTP1Target.Origin) -> Exchange? {
        guard var list = waiting[origin] else { return nil }
        defer { waiting[origin] = list.isEmpty ? nil : list }
        while !list.isEmpty {
            let next = list.removeFirst()
            if !next.isFinished { return next }
        }
        return nil
    }

    /// The connection to `origin` used last, if one is idle (and not for longer than `idleTimeout`).
    func takeIdle(_ origin: HTTP1Target.Origin) -> HTTP1ConnectionHandler? {
        eventLoop.assertInEventLoop()
        guard var list = idle[origin] else { return nil }
        let now = NIODeadline.now()
        var found: HTTP1ConnectionHandler?
        var stale: [HTTP1ConnectionHandler] = []
        while let connection = list.popLast() {
            // One closing (its close not yet told to the pool) is left to its close.
            guard connection.isUsable else { continue }
            if now - connection.idleSince < idleTimeout {
                found = connection
                break
            }
            // The one used last has been idle too long: the others, idle longer, too.
            stale = [connection] + list
            list = []
        }
        idle[origin] = list.isEmpty ? nil : list
        for connection in stale { connection.close() }
        return found
    }

    /// A connection whose answer was read to its end and that both sides keep alive.
    func release(_ connection: HTTP1ConnectionHandler) {
        eventLoop.assertInEventLoop()
        if !closed, let next = nextWaiting(connection.origin) {
            next.run(on: connection)
            return
        }
        var list = idle[connection.origin] ?? []
        guard !closed, list.count < HTTP1Client.maximumIdlePerOrigin else {
            connection.close()
            return
        }
        connection.idleSince = .now()
        list.append(connection)
        idle[connection.origin] = list
    }

    /// An idle connection the server closed (or that said something unasked).
    func remove(_ connection: HTTP1ConnectionHandler) {
        eventLoop.assertInEventLoop()
        guard var list = idle[connection.origin], let index = list.firstIndex(where: { $0 === connection }) else { return }
        list.remove(at: index)
        idle[connection.origin] = list.isEmpty ? nil : list
    }

    func closeAll() {
        closed = true
        let all = idle.values.flatMap { $0 }
        idle = [:]
        for connection in all { connection.close() }
    }

    /// Times `exchange` out at its deadline; the key forgets it.
    func watch(_ exchange: Exchange) -> Int {
        let key = nextKey
        nextKey += 1
        watched[key] = exchange
        if let armed, armed.at <= exchange.deadline { return key }
        armed?.timer.cancel()
        armed = (exchange.deadline, arm(at: exchange.deadline))
        return key
    }

    /// The timer stays where it is (moving it is what costs); when it fires for nothing it only arms itself
    /// for the next deadline.
    func unwatch(_ key: Int) {
        watched[key] = nil
    }

    private func arm(at deadline: NIODeadline) -> Scheduled<Void> {
        eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in fire() }
    }

    private func fire() {
        armed = nil
        let now = NIODeadline.now()
        var due: [Exchange] = []
        var next: NIODeadline?
        for (key, exchange) in watched {
            if exchange.deadline <= now {
                due.append(exchange)
                watched[key] = nil
            } else if next.map({ exchange.deadline < $0 }) ?? true {
                next = exchange.deadline
            }
        }
        if let next { armed = (next, arm(at: next)) }
        for exchange in due {
            exchange.deadlineKey = nil
            exchange.timeOut()
        }
    }
}

// MARK: Proxies

/// The proxies of the environment, read once: `http_proxy` for http URLs (the request goes to the proxy in
/// absolute form), `https_proxy` for https (a CONNECT tunnel, TLS to the origin inside it), `no_proxy`'s hosts
/// go direct. The lower-case name wins over the upper-case one, as curl has it.
struct ProxySettings: Sendable, CustomStringConvertible {
    struct Proxy: Sendable, Equatable {
        var host: String
        var port: Int
        /// `Basic …` of the proxy URL's user and password, or nil.
        var authorization: String?

        /// `host:port`, for messages: never the credentials.
        var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    var http: Proxy?
    var https: Proxy?
    /// Host suffixes that go direct (lower case, without leading dot); `*` is every host.
    var noProxy: [String] = []

    init(http: Proxy? = nil, https: Proxy? = nil, noProxy: [String] = []) {
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    /// What the environment says; a proxy that cannot be read is left out and said in `problems`.
    init(environment: [String: String], problems: inout [String]) {
        func value(_ name: String) -> String? {
            let found = environment[name] ?? environment[name.uppercased()]
            guard let found, !found.trimmingWhitespace().isEmpty else { return nil }
            return found.trimmingWhitespace()
        }
        func proxy(_ name: String) -> Proxy? {
            guard let text = value(name) else { return nil }
            guard let parsed = Self.parse(text) else {
                problems.append("\(name) is not a proxy URL (http://[user:password@]host[:port]); it is not used")
                return nil
            }
            return parsed
        }
        http = proxy("http_proxy")
        https = proxy("https_proxy")
        noProxy = Self.hosts(value("no_proxy") ?? "")
    }

    static func fromEnvironment(problems: inout [String]) -> ProxySettings {
        var environment: [String: String] = [:]
        for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return ProxySettings(environment: environment, problems: &problems)
    }

    /// `http://user:password@host:port`, or `host:port` (http assumed); the port defaults to 80.
    static func parse(_ text: String) -> Proxy? {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: withScheme), components.scheme?.lowercased() == "http",
            var host = components.percentEncodedHost, !host.isEmpty
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var authorization: String?
        if let user = components.user {
            let credentials = user + ":" + (components.password ?? "")
            authorization = "Basic " + Data(credentials.utf8).base64EncodedString()
        }
        return Proxy(host: host, port: components.port ?? 80, authorization: authorization)
    }

    /// `no_proxy`'s entries: comma-separated hosts or domains, with or without a leading dot (or `*.`),
    /// a port ignored; `*` alone is every host.
    static func hosts(_ text: String) -> [String] {
        text.split(separator: ",").compactMap { entry -> String? in
            var host = entry.trimmingWhitespace().lowercased()
            if host.hasPrefix("*.") { host.removeFirst(2) }
            while host.hasPrefix(".") { host.removeFirst() }
            if host.hasPrefix("[") {
                // [::1]:8080 or [::1]
                if let close = host.firstIndex(of: "]") { host = String(host[host.index(after: host.startIndex)..<close]) }
            } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
                host = String(host[..<colon])
            }
            return host.isEmpty ? nil : host
        }
    }

    /// The proxy a request to `origin` goes through, or nil when direct.
    func proxy(for origin: HTTP1Target.Origin) -> Proxy? {
        guard let proxy = origin.secure ? https : http else { return nil }
        let host = origin.host.lowercased()
        for entry in noProxy where entry == "*" || host == entry || host.hasSuffix("." + entry) {
            return nil
        }
        return proxy
    }

    /// For a log line: the proxies without their credentials.
    var description: String {
        var parts: [String] = []
        if let http { parts.append("http via \(http.description)\(http.authorization == nil ? "" : " (with credentials)")") }
        if let https { parts.append("https via \(https.description)\(https.authorization == nil ? "" : " (with credentials)")") }
        if !noProxy.isEmpty { parts.append("direct to \(noProxy.joined(separator: ", "))") }
        return parts.joined(separator: "; ")
    }
}
