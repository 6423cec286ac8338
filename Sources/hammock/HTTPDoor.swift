import ArgumentParser
import FoundationEssentials
import Glibc
import HammockCore
import HammockEngine
import HammockHTTP
import HammockJSON
import HammockMetrics
import Logging
import Synchronization

/// `--http`, `--http-token` and `--http-cors`, on `run` and `serve`.
struct HTTPArguments: ParsableArguments {
    @Option(help: "Serve the engine over HTTP at HOST:PORT (e.g. 127.0.0.1:8080): states, server-sent events, control, /healthz, /readyz, /metrics. See docs/http.md.")
    var http: String?

    @Option(name: .customLong("http-token"), help: "A file (mode 0600) holding the token every HTTP request must carry as Authorization: Bearer; needed to listen on an address other machines reach.")
    var httpToken: String?

    @Option(name: .customLong("http-cors"), help: "An origin whose web pages may call the HTTP door (e.g. http://localhost:3000; * for any). Repeatable.")
    var httpCORS: [String] = []

    /// The door asked for, checked before anything starts; nil without `--http`.
    func settings() throws -> HTTPDoor.Settings? {
        guard let http else {
            if httpToken != nil { throw usageError("--http-token guards the HTTP door; add --http HOST:PORT") }
            if !httpCORS.isEmpty { throw usageError("--http-cors applies to the HTTP door; add --http HOST:PORT") }
            return nil
        }
        guard let address = HTTPAddress(http) else {
            throw usageError("--http \"\(http)\" is not HOST:PORT; for example --http 127.0.0.1:8080")
        }
        let token = try httpToken.map(HTTPDoor.readToken)
        guard address.isLoopback || token != nil else {
            throw usageError(
                "--http \(http) is reachable from other machines: add --http-token FILE (a token every request must carry), or listen on 127.0.0.1")
        }
        for origin in httpCORS where origin != "*" && !(origin.hasPrefix("http://") || origin.hasPrefix("https://")) {
            throw usageError("--http-cors \"\(origin)\" is not an origin; write it as a page's address says it, e.g. http://localhost:3000, or * for any")
        }
        return HTTPDoor.Settings(
            address: address,
            policy: HTTPServer.Policy(token: token, requiresLoopbackHost: address.isLoopback && token == nil, allowedOrigins: httpCORS))
    }
}

/// The engine over HTTP (docs/http.md): its states (`GET /v1/sources`, `/v1/views`), their changes as
/// server-sent events (`/v1/events`), control lines (`POST /v1/control`), health (`/healthz`, `/readyz`) and
/// metrics (`/metrics`). Each reader is a consumer of the engine as a socket client is (`Engine.openStream`):
/// the same lines, redacted the same way, and what it watches loads. Health is asked of the loop itself
/// (`Engine.ask`): a loop that does not answer within `answerTimeout` is unhealthy, whatever the process does.
enum HTTPDoor {
    struct Settings {
        let address: HTTPAddress
        let policy: HTTPServer.Policy
    }

    /// Connections at once: scrapers, dashboards' polls, and event streams, which a flood does not close.
    static let maximumConnections = 64
    /// How long a health check waits for the loop.
    static let answerTimeout: Duration = .seconds(2)
    /// How long a read or a control line waits for the engine's answer.
    static let readTimeout: Duration = .seconds(10)
    /// How long a `more` waits: its answer comes once the pages are in, after as many requests as it asks.
    static let moreTimeout: Duration = .seconds(120)

    /// The token in `path`, trimmed: a file other users can read is refused, as an empty one is.
    static func readToken(_ path: String) throws -> [UInt8] {
        var status = stat()
        guard stat(path, &status) == 0, let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw usageError("--http-token \(path): cannot read it (\(String(cString: strerror(errno))))")
        }
        guard status.st_mode & 0o077 == 0 else {
            throw usageError("--http-token \(path): other users can read it (mode \(String(status.st_mode & 0o777, radix: 8))); chmod 600 \(path)")
        }
        let token = text.trimmingWhitespace()
        guard !token.isEmpty, !token.contains(where: { $0.isWhitespace }) else {
            throw usageError("--http-token \(path): the file must hold one token on one line")
        }
        return Array(token.utf8)
    }

    /// Listens at once (a port in use stops hammock before any plugin starts) and answers for `engine`.
    static func start(_ settings: Settings, engine: Engine, metrics: EngineMetrics?, logger: Logger) async throws -> HTTPServer {
        do {
            let server = try await HTTPServer.start(
                settings.address, option: "--http", routes: routes(engine, metrics: metrics), policy: settings.policy,
                maximumConnections: maximumConnections)
            logger.notice("serving HTTP at http://\(server.address)/ (/v1/sources, /v1/views, /v1/events, /v1/control, /healthz, /readyz, /metrics)")
            return server
        } catch {
            logger.critical("\(error)")
            throw ExitCode(2)
        }
    }

    static func routes(_ engine: Engine, metrics: EngineMetrics?) -> [HTTPServer.Route] {
        var routes = [
            HTTPServer.Route("/v1/sources") { _ in
                await states(engine, Subscription(sources: nil, views: []))
            },
            HTTPServer.Route("/v1/sources/*") { request in
                await state(engine, Subscription(sources: [SourceID(request.rest ?? "")], views: []))
            },
            HTTPServer.Route("/v1/views") { _ in
                await states(engine, Subscription(sources: [], views: nil))
            },
            HTTPServer.Route("/v1/views/*") { request in
                await state(engine, Subscription(sources: [], views: [ViewID(request.rest ?? "")]))
            },
            HTTPServer.Route("/v1/events", methods: [.GET]) { request in
                await events(engine, request)
            },
            HTTPServer.Route("/v1/control", methods: [.POST]) { request in
                .answer(await control(engine, request.body))
            },
            HTTPServer.Route("/healthz") { _ in
                guard case .alive(let sources, let watched) = await engine.ask(.health, timeout: answerTimeout) else {
                    return .json(503, #"{"status":"unresponsive","error":"the engine's loop did not answer within \#(answerTimeout)"}"#)
                }
                return .json(200, #"{"status":"ok","sources":\#(sources),"watched":\#(watched)}"#)
            },
            HTTPServer.Route("/readyz") { request in
                let views = request.query["views"].map { $0.split(separator: ",").map { ViewID(String($0)) } }
                switch await engine.ask(.readiness(views: views), timeout: answerTimeout) {
                case .waiting(let ids) where ids.isEmpty:
                    return .json(200, #"{"ready":true}"#)
                case .waiting(let ids):
                    return .json(503, #"{"ready":false,"waiting":\#(list(ids.map(\.rawValue)))}"#)
                case .unknownViews(let ids):
                    return .json(404, #"{"error":"no such view","views":\#(list(ids.map(\.rawValue)))}"#)
                case .alive, nil:
                    return .json(503, #"{"ready":false,"error":"the engine's loop did not answer within \#(answerTimeout)"}"#)
                }
            },
        ]
        if let metrics { routes.append(MetricsServer.route(metrics)) }
        return routes
    }

    // MARK: States

    /// The snapshot of `subscription`: its `source` and `view` lines, or the answer that refuses it.
    private static func snapshot(_ engine: Engine, _ subscription: Subscription) async -> Snapshot {
        let stream = engine.openStream(subscription)
        defer { stream.close() }
        switch await untilSnapshotEnds(stream) {
        case .whole(let events): return .lines(events.filter { $0.type == "source" || $0.type == "view" })
        case .refused(let message): return .refused(.json(404, #"{"error":\#(JSONValue.string(message).jsonString)}"#))
        case .noAnswer: return .refused(unresponsive)
        }
    }

    /// The states asked for, or the answer that says why not.
    private enum Snapshot {
        case lines([EngineEvent])
        case refused(HTTPServer.Answer)
    }

    private static let unresponsive = HTTPServer.Answer.json(
        503, #"{"error":"the engine did not answer within \#(readTimeout) (it is stopping, or its loop is stuck)"}"#)

    /// One id's line, as it would be written (404 for an id the configuration does not have).
    private static func state(_ engine: Engine, _ subscription: Subscription) async -> HTTPServer.Answer {
        switch await snapshot(engine, subscription) {
        case .lines(let events):
            guard let event = events.first else { return unresponsive }
            return HTTPServer.Answer(status: 200, contentType: "application/json", body: event.json + [UInt8(ascii: "\n")])
        case .refused(let answer): return answer
        }
    }

    /// Every id's line, in an object by id, in the configuration's order.
    private static func states(_ engine: Engine, _ subscription: Subscription) async -> HTTPServer.Answer {
        switch await snapshot(engine, subscription) {
        case .lines(let events):
            var body: [UInt8] = Array("{".utf8)
            for (index, event) in events.enumerated() {
                if index > 0 { body.append(UInt8(ascii: ",")) }
                body += Array(JSONValue.string(event.id ?? "").jsonString.utf8) + [UInt8(ascii: ":")] + event.json
            }
            body += Array("}\n".utf8)
            return HTTPServer.Answer(status: 200, contentType: "application/json", body: body)
        case .refused(let answer): return answer
        }
    }

    private enum SnapshotEnd {
        /// Everything up to and with the `ack` that ends the snapshot.
        case whole([EngineEvent])
        /// The subscription named what the configuration does not have: the engine's message.
        case refused(String)
        case noAnswer
    }

    /// Reads `stream` up to the end of its snapshot, for at most `readTimeout`.
    private static func untilSnapshotEnds(_ stream: EngineStream) async -> SnapshotEnd {
        let timer = Task {
            guard (try? await Task.sleep(for: readTimeout)) != nil else { return }
            stream.close()
        }
        defer { timer.cancel() }
        var events: [EngineEvent] = []
        while let batch = await stream.next() {
            for event in batch {
                events.append(event)
                switch event.type {
                case "ack" where event.id == EngineStream.snapshotID: return .whole(events)
                case "error": return .refused(message(of: event))
                default: continue
                }
            }
        }
        return .noAnswer
    }

    private static func message(of event: EngineEvent) -> String {
        (try? JSONValue(parsing: event.json))?["message"]?.stringValue ?? "refused"
    }

    // MARK: Events

    /// `GET /v1/events?sources=a,b&views=v`: server-sent events, one per line, after the snapshot of what was
    /// asked (only what changed after `Last-Event-ID`, when the engine still knows it).
    private static func events(_ engine: Engine, _ request: HTTPServer.Request) async -> HTTPServer.Reply {
        func ids(_ name: String) -> [String]? {
            request.query[name].map { $0.split(separator: ",", omittingEmptySubsequences: true).map(String.init) }
        }
        let (sources, views) = (ids("sources"), ids("views"))
        let subscription =
            sources == nil && views == nil
            ? Subscription.everything
            : Subscription(sources: Set((sources ?? []).map { SourceID($0) }), views: Set((views ?? []).map { ViewID($0) }))
        let lastEventID = request.headers.first(name: "Last-Event-ID") ?? request.query["lastEventId"]
        let stream = engine.openStream(subscription, resumeAfter: lastEventID.flatMap { Int($0) })
        switch await untilSnapshotEnds(stream) {
        case .whole(let first):
            return .events(EventSource(stream: stream, first: first))
        case .refused(let message):
            stream.close()
            return .answer(.json(404, #"{"error":\#(JSONValue.string(message).jsonString)}"#))
        case .noAnswer:
            stream.close()
            return .answer(unresponsive)
        }
    }

    /// An engine stream as server-sent events: `id:` (a line a stream can resume after), `event:` its type,
    /// `data:` the line.
    private final class EventSource: HTTPServer.EventSource {
        private let stream: EngineStream
        private let first: Mutex<[EngineEvent]?>

        init(stream: EngineStream, first: [EngineEvent]) {
            self.stream = stream
            self.first = Mutex(first)
        }

        func next() async -> [UInt8]? {
            if let first = first.withLock({ first in defer { first = nil }; return first }) { return Self.format(first) }
            return await stream.next().map(Self.format)
        }

        func close() { stream.close() }

        static func format(_ events: [EngineEvent]) -> [UInt8] {
            var bytes: [UInt8] = []
            for event in events {
                if event.isResumable { bytes += Array("id: \(event.number)\n".utf8) }
                bytes += Array("event: \(event.type)\ndata: ".utf8)
                bytes += event.json
                bytes += Array("\n\n".utf8)
            }
            return bytes
        }
    }

    // MARK: Control

    /// `POST /v1/control` with one control line: its `ack` (200) or `error` (400), as the line's sender reads
    /// it. A line without an `id` is given one, so that its answer comes back, and answered without it.
    private static func control(_ engine: Engine, _ body: [UInt8]) async -> HTTPServer.Answer {
        var line = body
        while let last = line.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") {
            line.removeLast()
        }
        guard !line.contains(UInt8(ascii: "\n")), case .object(var object)? = try? JSONValue(parsing: line) else {
            return .json(400, #"{"error":"the body is one control line, a JSON object such as {\"op\":\"load\",\"source\":\"weather\"} (docs/protocol.md, Control)"}"#)
        }
        let givenID = object["id"] != nil
        if !givenID {
            object["id"] = .string("http")
            line = Array(JSONValue.object(object).jsonString.utf8)
        }
        let stream = engine.openStream(Subscription(sources: [], views: []))
        defer { stream.close() }
        guard case .whole = await untilSnapshotEnds(stream) else { return unresponsive }
        stream.send(controlLine: line)
        let waitsFor = object["op"] == "more" ? moreTimeout : readTimeout
        let timer = Task {
            guard (try? await Task.sleep(for: waitsFor)) != nil else { return }
            stream.close()
        }
        defer { timer.cancel() }
        while let batch = await stream.next() {
            guard let answer = batch.first(where: { $0.type == "ack" || $0.type == "error" }) else { continue }
            var json = answer.json
            if !givenID, case .object(var written)? = try? JSONValue(parsing: json) {
                written.removeValue(forKey: "id")
                json = Array(JSONValue.object(written).jsonString.utf8)
            }
            return HTTPServer.Answer(status: answer.type == "ack" ? 200 : 400, contentType: "application/json", body: json + [UInt8(ascii: "\n")])
        }
        return unresponsive
    }

    private static func list(_ texts: [String]) -> String {
        JSONValue.array(texts.map { .string($0) }).jsonString
    }
}
