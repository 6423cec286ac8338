import AsyncHTTPClient
import NIOCore
import Synchronization

/// The one HTTP client of a plugin (`RESTPlugin.plugin` makes it), made at the first request and shut down
/// when the plugin stops (an HTTPClient must be shut down before it goes away).
final class SharedHTTPClient: Sendable {
    private let state = Mutex<HTTPClient?>(nil)

    func get() -> HTTPClient {
        state.withLock { client in
            if let client { return client }
            let made = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: Self.configuration)
            client = made
            return made
        }
    }

    /// One per event loop of the client's group, handed out in turn: each source keeps one, so the sources'
    /// loads spread over the loops as the group's connections do.
    private let loops = HTTPClient.defaultEventLoopGroup.makeIterator().map(LoadLoop.init)
    private let nextLoop = Atomic<Int>(0)

    func loop() -> LoadLoop {
        let index = UInt(bitPattern: nextLoop.wrappingAdd(1, ordering: .relaxed).oldValue)
        return loops[Int(index % UInt(loops.count))]
    }

    func shutdown() async {
        let client = state.withLock { client in
            defer { client = nil }
            return client
        }
        try? await client?.shutdown()
    }

    static var configuration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        // Redirects are followed by the source itself: it honours `followRedirects` per source and drops
        // credentials when a redirect leaves the origin.
        configuration.redirectConfiguration = .disallow
        // Fail at once with the real cause (refused, unknown host) instead of retrying until the deadline:
        // the engine retries with backoff and shows the user why.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = HTTPClient.Configuration.Timeout(connect: .seconds(10))
        configuration.httpVersion = .automatic
        // Only when a source asks for it with an Accept-Encoding header; maxBytes counts decompressed bytes.
        configuration.decompression = .enabled(limit: .ratio(1000))
        return configuration
    }
}

/// An event loop of the client, as the loads of the sources given it use it: the executor their tasks
/// prefer, and the one timer for their deadlines.
struct LoadLoop: Sendable {
    let executor: EventLoopTaskExecutor
    let deadlines: LoadDeadlines

    init(_ eventLoop: any EventLoop) {
        executor = EventLoopTaskExecutor(eventLoop)
        deadlines = LoadDeadlines(eventLoop: eventLoop)
    }
}
