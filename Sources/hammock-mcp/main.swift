import ArgumentParser
import Foundation
import HammockClient
import HammockConfig
import HammockCore
import HammockJSON
import MCP
import Synchronization

/// `hammock mcp CONFIG` (`hammock-mcp`): a Model Context Protocol server on stdio over the configuration's
/// shared engine (docs/mcp.md). It attaches as `hammock attach` does (starting the engine when none runs),
/// so an agent reads the states every bar reads: a resource per source and view, updated through
/// subscriptions, and a tool per control op that returns once hammock acknowledged it.
///
/// A program of its own: the MCP SDK needs Foundation, which the `hammock` binary keeps out.
@main
struct HammockMCP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hammock-mcp",
        abstract: "Serve a configuration's sources and views to an AI agent over the Model Context Protocol (stdio).",
        discussion: """
            Resources hammock://source/ID and hammock://view/ID (the state as hammock writes it, JSON), with \
            subscriptions; tools get, load, loadIfNeeded, retry, override, wipe, more. Attaches to the \
            configuration's shared engine, and starts it when none runs, as `hammock attach` does. See docs/mcp.md.
            """)

    @Argument(help: "The configuration file.")
    var config: String

    @Option(help: "The engine's socket (default: the configuration's own).")
    var socket: String?

    @Flag(help: "Fail when no engine serves the configuration, rather than starting one.")
    var noStart = false

    func run() async throws {
        let hammock: Hammock
        do {
            hammock = try await Hammock.attach(
                configuration: config, socket: socket, arguments: noStart ? ["--no-start"] : [], forwardingStderr: true)
        } catch {
            FileHandle.standardError.write(Data("hammock-mcp: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let door = MCPDoor(hammock: hammock, descriptions: Descriptions(configuration: config))
        let server = Server(
            name: "hammock", version: hammockClientVersion,
            capabilities: .init(resources: .init(subscribe: true, listChanged: true), tools: .init(listChanged: false)))
        await door.register(on: server)
        try await server.start(transport: StdioTransport())
        // Until the agent closes stdin, or the engine ends.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await server.waitUntilCompleted() }
            group.addTask { await door.notifyUpdates(through: server) }
            group.addTask { await door.notifyListChanges(through: server) }
            group.addTask { _ = await hammock.waitUntilEnded() }
            await group.next()
            group.cancelAll()
        }
        await server.stop()
        await hammock.stop()
        if let reason = await hammock.byeReason {
            FileHandle.standardError.write(Data("hammock-mcp: the engine stopped (\(reason))\n".utf8))
        }
    }
}

/// hammock-mcp's own version, as the client library knows it.
let hammockClientVersion = "0.1.0"

/// What the configuration says of each source and view, for the resources' descriptions. Read here only for
/// that: the engine reads and checks the configuration itself, and a file this cannot read gives plain
/// descriptions. No option's value is told (one may hold a secret).
struct Descriptions: Sendable {
    private var sources: [String: String] = [:]
    private var views: [String: String] = [:]

    init(configuration path: String) {
        guard case .success(let loaded) = ConfigurationLoader(kindIsAvailable: { _ in true }).load(file: path) else { return }
        for source in loaded.configuration.sources {
            var text = "hammock source \(source.id.rawValue): kind \(source.kind.rawValue)"
            if let refresh = source.refresh { text += ", refreshed every \(refresh.humanReadable)" }
            sources[source.id.rawValue] = text
        }
        for view in loaded.configuration.views {
            views[view.id.rawValue] = "hammock view \(view.id.rawValue): merges \(view.sources.map(\.rawValue).joined(separator: ", "))"
        }
    }

    func of(_ subject: LineSubject) -> String {
        switch subject {
        case .source(let id): sources[id] ?? "hammock source \(id)"
        case .view(let id): views[id] ?? "hammock view \(id)"
        }
    }
}

/// The MCP side: resources, subscriptions and tools over one attached engine.
final class MCPDoor: Sendable {
    let hammock: Hammock
    let descriptions: Descriptions
    /// The resources the client subscribed to.
    private let subscribed = Mutex<Set<String>>([])
    /// Subscribed resources that changed and have not been told of yet.
    private let unannounced = Mutex<Set<String>>([])

    /// A subscribed resource is told of at most this often; changes in between are told once, after.
    static let minimumUpdateInterval: Duration = .milliseconds(250)

    init(hammock: Hammock, descriptions: Descriptions) {
        self.hammock = hammock
        self.descriptions = descriptions
    }

    static func uri(_ subject: LineSubject) -> String {
        switch subject {
        case .source(let id): "hammock://source/\(id)"
        case .view(let id): "hammock://view/\(id)"
        }
    }

    static func subject(_ uri: String) -> LineSubject? {
        if uri.hasPrefix("hammock://source/") { return .source(String(uri.dropFirst("hammock://source/".count))) }
        if uri.hasPrefix("hammock://view/") { return .view(String(uri.dropFirst("hammock://view/".count))) }
        return nil
    }

    private var subjects: [LineSubject] {
        let ids = hammock.ids ?? EngineIDs(sources: [], views: [])
        return ids.sources.map { .source($0) } + ids.views.map { .view($0) }
    }

    func register(on server: Server) async {
        await server.withMethodHandler(ListResources.self) { [self] _ in
            let resources = subjects.map { subject in
                Resource(
                    name: Self.name(subject), uri: Self.uri(subject), description: descriptions.of(subject),
                    mimeType: "application/json")
            }
            return .init(resources: resources, nextCursor: nil)
        }
        await server.withMethodHandler(ReadResource.self) { [self] params in
            guard let subject = Self.subject(params.uri), subjects.contains(subject) else {
                throw MCPError.invalidParams("no such resource: \(params.uri) (hammock://source/ID or hammock://view/ID of \(subjectList))")
            }
            let text = await hammock.latestLine(subject).map { $0.jsonString } ?? "null"
            return .init(contents: [.text(text, uri: params.uri, mimeType: "application/json")])
        }
        await server.withMethodHandler(ResourceSubscribe.self) { [self] params in
            guard let subject = Self.subject(params.uri), subjects.contains(subject) else {
                throw MCPError.invalidParams("no such resource: \(params.uri)")
            }
            subscribed.withLock { _ = $0.insert(params.uri) }
            return .init()
        }
        await server.withMethodHandler(ResourceUnsubscribe.self) { [self] params in
            subscribed.withLock { _ = $0.remove(params.uri) }
            return .init()
        }
        await server.withMethodHandler(ListTools.self) { _ in .init(tools: Self.tools) }
        await server.withMethodHandler(CallTool.self) { [self] params in
            do {
                let states = try await call(params.name, params.arguments ?? [:])
                return .init(content: [.text(text: states, annotations: nil, _meta: nil)], isError: false)
            } catch let error as ToolError {
                return .init(content: [.text(text: error.message, annotations: nil, _meta: nil)], isError: true)
            } catch {
                return .init(content: [.text(text: "\(error)", annotations: nil, _meta: nil)], isError: true)
            }
        }
    }

    private var subjectList: String {
        subjects.map { Self.name($0) }.joined(separator: ", ")
    }

    private static func name(_ subject: LineSubject) -> String {
        switch subject {
        case .source(let id): "source \(id)"
        case .view(let id): "view \(id)"
        }
    }

    private func isSubscribed(_ uri: String) -> Bool {
        subscribed.withLock { $0.contains(uri) }
    }

    /// Tells the client of each subscribed resource's change (`notifications/resources/updated`), at most
    /// once per `minimumUpdateInterval` per resource: a change inside the interval is told at its end, once,
    /// however many came. Until the engine ends.
    func notifyUpdates(through server: Server) async {
        let changes = await hammock.lineChanges()
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                for await subject in changes {
                    let uri = Self.uri(subject)
                    guard isSubscribed(uri) else { continue }
                    unannounced.withLock { _ = $0.insert(uri) }
                    wake.yield()
                }
                wake.finish()
            }
            var lastTold: [String: ContinuousClock.Instant] = [:]
            for await _ in wakes {
                let now = ContinuousClock.now
                let due = unannounced.withLock { changed in
                    let due = changed.filter { uri in lastTold[uri].map { now - $0 >= Self.minimumUpdateInterval } ?? true }
                    changed.subtract(due)
                    return due
                }
                for uri in due.sorted() {
                    lastTold[uri] = now
                    try? await server.notify(ResourceUpdatedNotification.message(.init(uri: uri)))
                }
                // What changed too soon after its last notice is told when its interval ends.
                let waiting = unannounced.withLock { $0 }
                if let soonest = waiting.compactMap({ lastTold[$0] }).min() {
                    group.addTask {
                        try? await Task.sleep(until: soonest + Self.minimumUpdateInterval, clock: .continuous)
                        wake.yield()
                    }
                }
            }
            group.cancelAll()
        }
    }

    /// Tells the client the list of resources changed (`notifications/resources/list_changed`) when a reload
    /// adds or removes sources or views.
    func notifyListChanges(through server: Server) async {
        var last = hammock.ids
        do {
            for try await ids in hammock.idChanges where ids != nil && ids != last {
                last = ids
                try? await server.notify(ResourceListChangedNotification.message())
            }
        } catch {
            return  // the engine ended
        }
    }

    // MARK: Tools

    struct ToolError: Error {
        let message: String
    }

    static let tools: [Tool] = {
        let target: Value = .object([
            "type": "object",
            "properties": .object([
                "source": .object(["type": "string", "description": "a source's id"]),
                "view": .object(["type": "string", "description": "a view's id"]),
            ]),
        ])
        func op(_ name: String, _ description: String) -> Tool {
            Tool(name: name, description: description, inputSchema: target)
        }
        return [
            Tool(
                name: "get", description: "The current state of sources and views, as hammock writes them (JSON lines by id).",
                inputSchema: .object([
                    "type": "object",
                    "properties": .object([
                        "sources": .object(["type": "array", "items": .object(["type": "string"])]),
                        "views": .object(["type": "array", "items": .object(["type": "string"])]),
                    ]),
                ]), annotations: .init(readOnlyHint: true)),
            op("load", "Load a source (or every source of a view) now; returns its state once hammock has started the load."),
            op("loadIfNeeded", "Load a source (or a view's sources) unless its data is fresh or a load is in flight."),
            op("retry", "Load again what failed in a source or a view."),
            op("wipe", "Forget a source's (or a view's sources') content and error, as if it had never loaded."),
            Tool(
                name: "override", description: "Set a source's content from here (until its next load).",
                inputSchema: .object([
                    "type": "object",
                    "properties": .object([
                        "source": .object(["type": "string"]),
                        "content": .object(["description": "any JSON value"]),
                    ]),
                    "required": .array(["source", "content"]),
                ])),
            Tool(
                name: "more",
                description: "Load the next pages of a lazily paginated source (its meta says hasMore); returns its state once they are in.",
                inputSchema: .object([
                    "type": "object",
                    "properties": .object([
                        "source": .object(["type": "string"]),
                        "count": .object(["type": "integer", "minimum": 1, "maximum": 1000, "description": "pages more (default 1)"]),
                    ]),
                    "required": .array(["source"]),
                ])),
        ]
    }()

    /// Carries out a tool: its text is the JSON of the states it touched, after hammock's ack.
    func call(_ name: String, _ arguments: [String: Value]) async throws -> String {
        switch name {
        case "get":
            let sources = arguments["sources"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let views = arguments["views"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let asked = sources.map { LineSubject.source($0) } + views.map { LineSubject.view($0) }
            return try await lines(asked.isEmpty ? subjects : asked)
        case "load", "loadIfNeeded", "retry", "wipe":
            let subject = try target(arguments)
            let controlTarget: ControlTarget =
                switch subject {
                case .source(let id): .source(SourceID(id))
                case .view(let id): .view(ViewID(id))
                }
            let command: ControlCommand =
                switch name {
                case "load": .load(controlTarget)
                case "loadIfNeeded": .loadIfNeeded(controlTarget)
                case "retry": .retry(controlTarget)
                default: .wipe(controlTarget)
                }
            try await perform(command)
            return try await lines([subject])
        case "override":
            guard let source = arguments["source"]?.stringValue, let content = arguments["content"] else {
                throw ToolError(message: "override takes source (an id) and content (any JSON value)")
            }
            let json = try JSONValue(parsing: Array(try JSONEncoder().encode(content)))
            try await perform(.override(source: SourceID(source), content: json))
            return try await lines([.source(source)])
        case "more":
            guard let source = arguments["source"]?.stringValue else { throw ToolError(message: "more takes source (an id) and count (pages, default 1)") }
            let count = arguments["count"].map { $0.intValue ?? 0 } ?? 1
            guard (1...ControlCommand.mostPagesAtOnce).contains(count) else {
                throw ToolError(message: "more's count is a whole number from 1 to \(ControlCommand.mostPagesAtOnce)")
            }
            try await perform(.more(source: SourceID(source), count: count))
            return try await lines([.source(source)])
        default:
            throw ToolError(message: "no tool \(name); hammock's tools: get, load, loadIfNeeded, retry, override, wipe, more")
        }
    }

    private func target(_ arguments: [String: Value]) throws -> LineSubject {
        switch (arguments["source"]?.stringValue, arguments["view"]?.stringValue) {
        case (let source?, nil): return .source(source)
        case (nil, let view?): return .view(view)
        default: throw ToolError(message: "name one source (\"source\": ID) or one view (\"view\": ID)")
        }
    }

    private func perform(_ command: ControlCommand) async throws {
        do {
            try await hammock.perform(command)
        } catch let error as HammockError {
            throw ToolError(message: "\(error)")
        }
    }

    /// `{"sources":{ID: line},"views":{ID: line}}` of `asked`; an id hammock does not have is an error.
    private func lines(_ asked: [LineSubject]) async throws -> String {
        let known = Set(subjects)
        let unknown = asked.filter { !known.contains($0) }
        guard unknown.isEmpty else {
            throw ToolError(message: "no \(unknown.map(Self.name).joined(separator: ", ")) (hammock has \(subjectList))")
        }
        var sources: JSONObject = [:]
        var views: JSONObject = [:]
        for subject in asked {
            let line = await hammock.latestLine(subject) ?? .null
            switch subject {
            case .source(let id): sources[id] = line
            case .view(let id): views[id] = line
            }
        }
        var result: JSONObject = [:]
        if !sources.isEmpty { result["sources"] = .object(sources) }
        if !views.isEmpty { result["views"] = .object(views) }
        return JSONValue.object(result).jsonString
    }
}
