import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginHost
import HammockProtocol
import HammockSystem

/// Drives any plugin through the protocol, as the engine would, and says where it breaks it:
/// `hammock plugin check -- COMMAND [ARGS...]`.
///
/// The checks run in order on one plugin process; each prints as it finishes. A check that cannot run
/// because the plugin is gone (or never shook hands) is skipped, not failed: the check that saw it go
/// has already failed.
public enum PluginConformance {
    public struct Settings: Sendable {
        public var command: [String]
        /// The kind the plugin must serve; any, when nil.
        public var kind: String?
        /// Options the plugin accepts for a source of that kind.
        public var options: JSONObject
        /// The `timeout` sent with each load; an answer may take this long plus 2 s.
        public var loadTimeout: Duration
        /// Wait this long for a push from the configured source; no push check when nil.
        public var expectPush: Duration?

        public init(
            command: [String], kind: String? = nil, options: JSONObject, loadTimeout: Duration = .seconds(5),
            expectPush: Duration? = nil
        ) {
            self.command = command
            self.kind = kind
            self.options = options
            self.loadTimeout = loadTimeout
            self.expectPush = expectPush
        }
    }

    public struct Result: Sendable, CustomStringConvertible {
        public enum Verdict: String, Sendable { case ok, fail = "FAIL", skip }
        public let verdict: Verdict
        public let name: String
        public let detail: String

        /// `ok   handshake: ...`, `FAIL load: expected ..., got ...`, `skip push: ...`.
        public var description: String {
            verdict.rawValue + String(repeating: " ", count: max(1, 5 - verdict.rawValue.count)) + name + (detail.isEmpty ? "" : ": " + detail)
        }
    }

    static let handshakeTimeout: Duration = .seconds(5)
    static let answerTimeout: Duration = .seconds(5)
    static let shutdownGrace: Duration = .seconds(2)
    /// How long to keep listening for a second answer to a load that was already answered.
    static let secondAnswerWait: Duration = .milliseconds(500)
    static let unknownKey = "hammockConformanceUnknownKey"
    static let validSource = "conformance-valid"
    static let invalidSource = "conformance-invalid"
    static let unconfiguredSource = "conformance-unconfigured"

    /// Runs every check and returns the results, calling `report` with each as soon as it is known.
    public static func run(_ settings: Settings, report: @escaping @Sendable (Result) -> Void = { _ in }) async -> [Result] {
        guard !settings.command.isEmpty else {
            let result = Result(verdict: .fail, name: "start", detail: "no command given")
            report(result)
            return [result]
        }
        let session = PluginSession(command: settings.command)
        // The plugin runs beside the checks, and is gone when they return.
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { await session.serve() }
            var checker = Checker(settings: settings, report: report, session: session)
            await checker.runAll()
            session.kill()
            return checker.results
        }
    }
}

// MARK: - The checks

private struct Checker {
    typealias Result = PluginConformance.Result
    let settings: PluginConformance.Settings
    let report: @Sendable (Result) -> Void
    var results: [Result] = []
    /// Why the remaining checks cannot run (no handshake, the plugin exited).
    var blocked: String?
    /// What the hello said of its kinds' options.
    var optionsSchema: [String: JSONValue] = [:]
    let session: PluginSession

    init(settings: PluginConformance.Settings, report: @escaping @Sendable (Result) -> Void, session: PluginSession) {
        self.settings = settings
        self.report = report
        self.session = session
    }

    mutating func record(_ verdict: Result.Verdict, _ name: String, _ detail: String = "") {
        let result = Result(verdict: verdict, name: name, detail: detail)
        results.append(result)
        report(result)
    }

    /// Runs `body` unless an earlier failure makes it pointless.
    mutating func check(_ name: String, _ body: (inout Checker) async -> Void) async {
        if let blocked {
            record(.skip, name, blocked)
            return
        }
        await body(&self)
    }

    mutating func runAll() async {
        await check("handshake") { await $0.handshake() }
        await check("options schema") { $0.checkOptionsSchema() }
        await check("configure valid") { await $0.configureValid() }
        await check("configure invalid") { await $0.configureInvalid() }
        await check("load") { await $0.load() }
        await check("cancel") { await $0.cancel() }
        await check("load unconfigured") { await $0.loadUnconfigured() }
        await check("push") { await $0.push() }
        await check("shutdown") { await $0.shutdown() }
        await protocolLines()
    }

    // MARK: Each check

    mutating func handshake() async {
        session.send(.hello(protocol: pluginProtocolVersion))
        let expected = "a \"hello\" with protocol 1, a non-empty list of kinds and a version within 5 s"
        guard let line = await wait("handshake", for: expected, within: PluginConformance.handshakeTimeout, { _ in true }) else {
            blocked = "no handshake"
            return
        }
        guard case .hello(let version, let kinds, let pluginVersion, _, _, let optionsSchema) = line.message else {
            record(.fail, "handshake", "expected \(expected), got \(line.excerpt)")
            blocked = "no handshake"
            return
        }
        self.optionsSchema = optionsSchema
        var problems: [String] = []
        if version != pluginProtocolVersion { problems.append("protocol \(version), not 1") }
        if line.json["version"]?.stringValue?.isEmpty != false { problems.append("no \"version\" string") }
        if let kind = settings.kind, !kinds.contains(kind) { problems.append("kind \"\(kind)\" is not among its kinds") }
        if problems.isEmpty {
            record(.ok, "handshake", "protocol \(version), kinds \(kinds.joined(separator: ", ")), version \(pluginVersion)")
        } else {
            record(.fail, "handshake", "expected \(expected), got \(line.excerpt) (\(problems.joined(separator: "; ")))")
            blocked = "no usable handshake"
        }
    }

    /// Each kind's `optionsSchema` must be a well-formed JSON Schema (as far as `JSONSchemaCheck` sees), since
    /// `hammock schema` hands it to editors as it is.
    mutating func checkOptionsSchema() {
        guard !optionsSchema.isEmpty else {
            record(.skip, "options schema", "the hello gives no \"optionsSchema\" (editors will accept any options)")
            return
        }
        var problems: [String] = []
        for (kind, schema) in optionsSchema.sorted(by: { $0.key < $1.key }) {
            var found = JSONSchemaCheck.problems(in: schema)
            // `hammock schema` refuses references it cannot place (see `JSONSchemaReferences`): said here first.
            if found.isEmpty { found = JSONSchemaReferences.problems(in: schema) }
            for problem in found {
                problems.append("optionsSchema.\(kind)\(problem.pointer.tokens.isEmpty ? "" : " at \(problem.pointer)"): \(problem.message)")
            }
        }
        if problems.isEmpty {
            record(.ok, "options schema", "well-formed for \(optionsSchema.keys.sorted().joined(separator: ", "))")
        } else {
            record(.fail, "options schema", problems.joined(separator: "; ") + "; see https://json-schema.org/draft/2020-12")
        }
    }

    mutating func configureValid() async {
        let source = PluginConformance.validSource
        session.send(.configure(source: source, options: .object(settings.options)))
        let expected = "\"configured\" for \"\(source)\" (options \(JSONValue.object(settings.options).jsonString))"
        guard let line = await wait("configure valid", for: expected, within: PluginConformance.answerTimeout, { $0.isConfigureAnswer(for: source) }) else { return }
        if case .configured = line.message {
            record(.ok, "configure valid")
        } else {
            record(.fail, "configure valid", "expected \(expected), got \(line.excerpt); pass options it accepts with --options")
        }
    }

    mutating func configureInvalid() async {
        let source = PluginConformance.invalidSource
        let key = PluginConformance.unknownKey
        var options = settings.options
        options[key] = 1
        session.send(.configure(source: source, options: .object(options)))
        let expected = "\"invalid\" with path /\(key)"
        guard let line = await wait("configure invalid", for: expected, within: PluginConformance.answerTimeout, { $0.isConfigureAnswer(for: source) }) else { return }
        if case .invalid(_, let problems) = line.message, problems.contains(where: { $0.pointer.description == "/" + key }) {
            record(.ok, "configure invalid", "an unknown key is refused at /\(key)")
        } else {
            record(.fail, "configure invalid", "expected \(expected), got \(line.excerpt)")
        }
    }

    mutating func load() async {
        let id = 1
        session.send(loadMessage(PluginConformance.validSource, id: id))
        let within = settings.loadTimeout + .seconds(2)
        let expected = "one answer (newData, notModified or error) for load \(id) within \(within.humanReadable)"
        guard let line = await wait("load", for: expected, within: within, { $0.loadID == id }) else { return }
        switch line.message {
        case .newData(id, _, _, _, _), .notModified(id), .error(id, _, _):
            record(.ok, "load", "answered with \(line.type)")
        default:
            record(.fail, "load", "expected \(expected), got \(line.excerpt)")
        }
    }

    mutating func cancel() async {
        let id = 2
        session.send(loadMessage(PluginConformance.validSource, id: id))
        session.send(.cancel(id: id))
        let within = settings.loadTimeout + .seconds(2)
        let expected = "exactly one of \"cancelled\" or an answer for load \(id)"
        guard await wait("cancel", for: "\(expected) within \(within.humanReadable)", within: within, { $0.loadID == id }) != nil else { return }
        // The first one came; a second one may still be on its way.
        try? await Task.sleep(for: PluginConformance.secondAnswerWait)
        let about = await session.allLines.filter { $0.loadID == id }
        if about.count == 1 {
            record(.ok, "cancel", "answered with \(about[0].type)")
        } else {
            record(.fail, "cancel", "expected \(expected), got \(about.count): " + about.map(\.excerpt).joined(separator: ", "))
        }
    }

    mutating func loadUnconfigured() async {
        let id = 3
        session.send(loadMessage(PluginConformance.unconfiguredSource, id: id))
        let expected = "an \"error\" answer for load \(id) of a source never configured"
        guard let line = await wait("load unconfigured", for: expected, within: PluginConformance.answerTimeout, { $0.loadID == id }) else { return }
        if case .error(id, _, let error) = line.message {
            record(.ok, "load unconfigured", "error: \(error.message)")
        } else {
            record(.fail, "load unconfigured", "expected \(expected), got \(line.excerpt)")
        }
    }

    mutating func push() async {
        let source = PluginConformance.validSource
        guard let within = settings.expectPush else {
            let pushes = await session.allLines.filter { $0.pushSource != nil }.count
            record(.skip, "push", pushes == 0 ? "not asked for (--expect-push SECONDS)" : "not asked for; saw \(pushes) push(es)")
            return
        }
        let expected = "a push (newData or error with \"source\": \"\(source)\" and no id)"
        // A push may have come already, during the checks above.
        if let early = await session.allLines.first(where: { $0.pushSource == source }) {
            record(.ok, "push", "got \(early.type)")
            return
        }
        guard let line = await wait("push", for: "\(expected) within \(within.humanReadable)", within: within, { $0.pushSource == source }) else { return }
        record(.ok, "push", "got \(line.type)")
    }

    mutating func shutdown() async {
        let start = ContinuousClock.now
        session.send(.shutdown)
        session.closeInput()
        let grace = PluginConformance.shutdownGrace
        if let status = await session.waitForExit(timeout: grace) {
            let took = ContinuousClock.now - start
            record(.ok, "shutdown", "\(status) after \(took.humanReadable)")
        } else {
            session.kill()
            record(.fail, "shutdown", "expected an exit within \(grace.humanReadable) of shutdown and the end of its stdin, got a process still running; killed it")
        }
    }

    /// Every line was protocol; no load was answered twice; nothing answered a load never sent; pushes name
    /// a configured source. Runs even after a failure, over everything the plugin wrote.
    mutating func protocolLines() async {
        let lines = await session.allLines
        var problems: [String] = []
        for line in lines {
            if let error = line.error { problems.append("not protocol (\(error.message)): \(line.excerpt)") }
        }
        var answers: [Int: Int] = [:]
        for line in lines { if let id = line.loadID { answers[id, default: 0] += 1 } }
        for (id, count) in answers.sorted(by: { $0.key < $1.key }) {
            if !(1...3).contains(id) { problems.append("an answer for load \(id), which was never sent") }
            if count > 1 { problems.append("\(count) answers for load \(id)") }
        }
        let hellos = lines.filter { if case .hello = $0.message { true } else { false } }.count
        if hellos > 1 { problems.append("\(hellos) hellos") }
        for line in lines {
            if let source = line.pushSource, source != PluginConformance.validSource {
                problems.append("a push for \"\(source)\", which was not configured (or was invalid): \(line.excerpt)")
            }
        }
        if problems.isEmpty {
            record(.ok, "protocol", "\(lines.count) lines, all valid")
        } else {
            record(.fail, "protocol", problems.prefix(5).joined(separator: "; ") + (problems.count > 5 ? "; and \(problems.count - 5) more" : ""))
        }
    }

    // MARK: Helpers

    func loadMessage(_ source: String, id: Int) -> EngineMessage {
        .load(source: source, id: id, etag: nil, lastModified: nil, timeout: Double(settings.loadTimeout.milliseconds) / 1000)
    }

    /// Waits for the next line that `matches`; records a failure and returns nil on a line that is not
    /// protocol, an exit or a timeout (and blocks the remaining checks on an exit).
    mutating func wait(
        _ name: String, for expected: String, within timeout: Duration, _ matches: @escaping @Sendable (ReceivedLine) -> Bool
    ) async -> ReceivedLine? {
        switch await session.next(within: timeout, matches) {
        case .line(let line) where line.error != nil:
            record(.fail, name, "expected \(expected), got a line that is not protocol (\(line.error!.message)): \(line.excerpt)")
        case .line(let line):
            return line
        case .exited(let status):
            record(.fail, name, "expected \(expected), got nothing: the plugin \(status)\(await session.stderrExcerpt)")
            blocked = "the plugin \(status)"
        case .timedOut(let others):
            let seen = others.isEmpty ? "nothing" : "only " + others.prefix(3).map(\.excerpt).joined(separator: ", ")
            record(.fail, name, "expected \(expected), got \(seen) within \(timeout.humanReadable)")
        }
        return nil
    }
}
