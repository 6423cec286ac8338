import HammockHTTP

/// `--metrics HOST:PORT`: serves `EngineMetrics` in Prometheus's text format at `GET /metrics`, over
/// `HTTPServer` (its own event-loop thread, its bounds on clients).
public final class MetricsServer: Sendable {
    private let server: HTTPServer
    /// Where it listens: the port the system chose for port 0.
    public var address: String { server.address }

    /// The route, for a server that serves more than the metrics (`--http`).
    public static func route(_ metrics: EngineMetrics) -> HTTPServer.Route {
        HTTPServer.Route("/metrics") { _ in
            HTTPServer.Answer(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.scrape())
        }
    }

    /// Binds `address` at once, so that an address not of this machine or a port in use stops hammock before
    /// it starts.
    public static func start(_ address: MetricsAddress, metrics: EngineMetrics) async throws(HTTPServer.Failure) -> MetricsServer {
        MetricsServer(server: try await HTTPServer.start(address, option: "--metrics", routes: [route(metrics)]))
    }

    private init(server: HTTPServer) {
        self.server = server
    }

    public func shutdown() async {
        await server.shutdown()
    }
}

/// Where `--metrics` listens (`HTTPAddress`).
public typealias MetricsAddress = HTTPAddress
