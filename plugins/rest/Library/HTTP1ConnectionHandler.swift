import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOSSL
import NIOTLS

/// One HTTP/1.1 connection of `HTTP1Client`, at the end of its pipeline: writes a request, gathers the whole
/// answer (head, body up to the request's limit) and ends the request with it; then goes back to its loop's
/// pool when the answer was read to its end and neither side said `Connection: close`, and is closed
/// otherwise. Idle in the pool, a close by the server takes it out.
final class HTTP1ConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let origin: HTTP1Target.Origin
    private let connections: LoopConnections
    /// The proxy of an http request: the request line in absolute form, with the proxy's credentials.
    private let proxy: ProxySettings.Proxy?
    private var context: ChannelHandlerContext?

    private var exchange: Exchange?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private var limit = HTTP1Request.BodyLimit(bytes: 0, truncating: true)
    /// Some of the answer came (a failure is then not retried).
    private var answered = false
    /// Some of the answer's body came.
    private var sawBody = false
    /// An error seen before the connection closed, said when it does.
    private var error: (any Error)?
    private var isOpen = true
    /// The request said `Connection: close`.
    private var requestCloses = false
    /// When it went back to its pool (touched by the pool only).
    var idleSince = NIODeadline.now()

    init(origin: HTTP1Target.Origin, connections: LoopConnections, proxy: ProxySettings.Proxy?) {
        self.origin = origin
        self.connections = connections
        self.proxy = proxy
    }

    /// The handlers that go before `handler`: the HTTP/1.1 codec and the decompressor. The decompressor
    /// adds `Accept-Encoding: deflate, gzip` to a request that has no `Accept-Encoding` (as it did under
    /// async-http-client), and takes a body apart only when the answer says `Content-Encoding`, to at most
    /// 1000 times its size.
    static func codec(for handler: HTTP1ConnectionHandler) -> [any ChannelHandler] {
        [
            HTTPRequestEncoder(),
            ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .drop)),
            NIOHTTPResponseDecompressor(limit: .ratio(1000)),
            handler,
        ]
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes `exchange`'s request; its answer ends it.
    func run(_ exchange: Exchange) {
        head = nil
        body = []
        answered = false
        sawBody = false
        error = nil
        guard let context, isUsable else {
            // Closed meanwhile: as a connection closed before answering.
            connectionEnded(for: exchange, error: nil)
            return
        }
        self.exchange = exchange
        exchange.connection = self
        let request = exchange.request
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headers.count + 4)
        if !request.headers.contains(name: "host") { headers.add(name: "Host", value: exchange.target.hostHeader) }
        headers.add(contentsOf: request.headers)
        if let body = request.body {
            headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        } else if request.method == .POST || request.method == .PUT || request.method == .PATCH {
            headers.replaceOrAdd(name: "Content-Length", value: "0")
        }
        var uri = exchange.target.path
        if let proxy {
            uri = exchange.target.absoluteForm
            if let authorization = proxy.authorization { headers.replaceOrAdd(name: "Proxy-Authorization", value: authorization) }
        }
        requestCloses = headers[canonicalForm: "connection"].contains { $0.lowercased() == "close" }
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: request.method, uri: uri, headers: headers))), promise: nil)
        if let body = request.body, !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        written.futureResult.assumeIsolated().whenFailure { [self] error in
            guard self.exchange === exchange else { return }
            self.error = self.error ?? error
            close()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard let exchange else {
            // Something unasked on an idle connection: it cannot be trusted with the next request.
            close()
            return
        }
        answered = true
        switch part {
        case .head(let head):
            self.head = head
            if exchange.phase != .exchanging { exchange.phase = .exchanging }
            limit = (200..<300).contains(head.status.code) ? exchange.request.bodyLimit : exchange.request.otherBodyLimit
            if !limit.truncating, let length = head.headers.first(name: "content-length").flatMap(Int.init), length > limit.bytes {
                complete(body: nil, reusable: false)
            }
        case .body(let buffer):
            guard head != nil else { return }
            sawBody = true
            if body.count + buffer.readableBytes > limit.bytes {
                if limit.truncating {
                    body.append(contentsOf: buffer.readableBytesView.prefix(limit.bytes - body.count))
                    complete(body: body, reusable: false)
                } else {
                    complete(body: nil, reusable: false)
                }
                return
            }
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            let reusable = head.isKeepAlive && !requestCloses && isOpen
            complete(body: body, reusable: reusable)
        }
    }

    /// The answer is complete (or as complete as it will be): the request ends with it, and the connection
    /// goes back to the pool or is closed.
    private func complete(body: [UInt8]?, reusable: Bool) {
        guard let exchange, let head else { return }
        self.exchange = nil
        self.head = nil
        self.body = []
        exchange.connection = nil
        if reusable {
            connections.release(self)
        } else {
            close()
        }
        exchange.finish(.success(HTTP1Response(status: head.status, headers: head.headers, body: body)))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls, let exchange, exchange.phase == .handshaking {
            exchange.phase = .exchanging
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A server that closes without TLS's close_notify, after an answer delimited by the close itself:
        // the close tells the end of the answer (or that it ended too soon).
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls { return }
        // An answer with no body that says `Content-Encoding` (a HEAD's, a 304's): the decompressor finds
        // nothing to decompress and calls that truncated. There is nothing wrong with it.
        if let decompression = error as? NIOHTTPDecompression.ExtraDecompressionError, decompression == .truncatedData,
            exchange != nil, head != nil, !sawBody
        {
            return
        }
        if self.error == nil { self.error = error }
        close()
    }

    func channelInactive(context: ChannelHandlerContext) {
        isOpen = false
        if let exchange {
            self.exchange = nil
            exchange.connection = nil
            connectionEnded(for: exchange, error: error)
        } else {
            connections.remove(self)
        }
        context.fireChannelInactive()
    }

    /// The connection closed under a request before its answer was complete: retried once on a new
    /// connection when none of the answer came over a reused one, else the request's failure.
    private func connectionEnded(for exchange: Exchange, error: (any Error)?) {
        if exchange.reused, !answered, !exchange.retried, exchange.request.isIdempotent, !exchange.isFinished {
            exchange.retryOnNewConnection()
            return
        }
        exchange.finish(.failure(error ?? HTTP1ClientError.remoteConnectionClosed))
    }

    /// The request ended before its answer did (cancelled, out of time): the connection goes with it.
    func abandon(_ exchange: Exchange) {
        guard self.exchange === exchange else { return }
        self.exchange = nil
        close()
    }

    /// Open, as far as this end knows.
    var isUsable: Bool { isOpen && context?.channel.isActive == true }

    func close() {
        guard isOpen, let context else { return }
        isOpen = false
        context.close(promise: nil)
    }
}

/// Asks an http proxy for a tunnel to an https origin (`CONNECT host:port`), then takes itself out of the
/// pipeline so that TLS goes through the tunnel.
final class ConnectTunnelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The proxy's answer to CONNECT has no body; a head longer than this is not an answer.
    static let headLimit = 16 << 10

    private let target: HTTP1Target
    private let proxy: ProxySettings.Proxy
    private var onEnd: ((Result<Void, any Error>) -> Void)?
    private var received: [UInt8] = []

    init(target: HTTP1Target, proxy: ProxySettings.Proxy, onEnd: @escaping (Result<Void, any Error>) -> Void) {
        self.target = target
        self.proxy = proxy
        self.onEnd = onEnd
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let authority = "\(target.origin.host.contains(":") ? "[\(target.origin.host)]" : target.origin.host):\(target.origin.port)"
        var head = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let authorization = proxy.authorization { head += "Proxy-Authorization: \(authorization)\r\n" }
        head += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: head)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard onEnd != nil else { return }
        var buffer = unwrapInboundIn(data)
        received += buffer.readBytes(length: buffer.readableBytes) ?? []
        guard let headEnd = received.firstRange(of: [13, 10, 13, 10]) else {
            if received.count > Self.headLimit { end(context, .failure(HTTP1ClientError.proxyRefused(host: proxy.description, status: 0))) }
            return
        }
        let statusLine = received[..<headEnd.lowerBound].split(separator: 13).first ?? []
        let fields = statusLine.split(separator: 32)
        let status = fields.count >= 2 ? Int(String(decoding: fields[1], as: UTF8.self)) ?? 0 : 0
        guard fields.first.map({ $0.starts(with: Array("HTTP/1.".utf8)) }) == true, (200..<300).contains(status) else {
            end(context, .failure(HTTP1ClientError.proxyRefused(host: proxy.description, status: status)))
            return
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        end(context, .success(()))
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(context, .failure(HTTP1ClientError.proxyRefused(host: proxy.description, status: 0)))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(context, .failure(error))
    }

    private func end(_ context: ChannelHandlerContext, _ result: Result<Void, any Error>) {
        guard let onEnd else { return }
        self.onEnd = nil
        onEnd(result)
    }
}
