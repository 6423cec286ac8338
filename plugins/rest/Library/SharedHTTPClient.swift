import HammockPluginKit
import NIOCore
import NIOPosix
import Synchronization

/// The one HTTP client of a plugin (`RESTPlugin.plugin` makes it), made at the first request and whose idle
/// connections are closed when the plugin stops.
///
/// Its proxies come from the environment, read once when this is made (at the plugin's start), as does
/// `SSL_CERT_FILE`, a PEM file of certificates to trust instead of the system's roots.
final class SharedHTTPClient: Sendable {
    private let state = Mutex<HTTP1Client?>(nil)
    let group: MultiThreadedEventLoopGroup
    let proxies: ProxySettings
    let trustedCertificates: String?

    init(group: MultiThreadedEventLoopGroup = .singleton, environment: [String: String]? = nil) {
        self.group = group
        var problems: [String] = []
        if let environment {
            proxies = ProxySettings(environment: environment, problems: &problems)
            trustedCertificates = environment["SSL_CERT_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        } else {
            proxies = ProxySettings.fromEnvironment(problems: &problems)
            trustedCertificates = getenv("SSL_CERT_FILE").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        loops = group.makeIterator().map(LoadLoop.init)
        for problem in problems { pluginLog(problem) }
        // Said once, so that a request that goes elsewhere than its URL says is explained; never the
        // proxy's credentials.
        if proxies.http != nil || proxies.https != nil { pluginLog("proxies from the environment: \(proxies)") }
    }

    func get() -> HTTP1Client {
        state.withLock { client in
            if let client { return client }
            let made = HTTP1Client(group: group, proxies: proxies, trustedCertificates: trustedCertificates)
            client = made
            return made
        }
    }

    /// One per event loop of the client's group, handed out in turn: each source keeps one, so the sources'
    /// loads (and their connections) spread over the loops.
    private let loops: [LoadLoop]
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
        await client?.shutdown()
    }
}

/// An event loop of the client, as the loads of the sources given it use it: the executor their tasks
/// prefer (their requests start on it and their answers come back on it), and the one timer for their
/// deadlines.
struct LoadLoop: Sendable {
    let executor: EventLoopTaskExecutor
    let deadlines: LoadDeadlines

    var eventLoop: any EventLoop { executor.eventLoop }

    init(_ eventLoop: any EventLoop) {
        executor = EventLoopTaskExecutor(eventLoop)
        deadlines = LoadDeadlines(eventLoop: eventLoop)
    }
}
