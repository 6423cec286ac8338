import HammockConfig
import HammockCore
import HammockJSON
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// The reload protocol as pure decisions: reloads asked for, the configuration read, the plugins' answers in;
/// the actions out, compared in full and in order. No process, file, plugin, task or sleep: each test is a
/// sequence of calls on one `ReloadStateMachine`.
@Suite struct ReloadStateMachineTests {
    typealias Action = ReloadStateMachine.Action

    static let http = PluginOrigin.command(["hammock-plugin-http"])
    static let file = PluginOrigin.command(["hammock-plugin-file"])
    static let exec = PluginOrigin.command(["hammock-plugin-exec"])

    static func configuration(
        _ name: String, _ sources: [SourceDefinition], secrets: Set<String> = []
    ) -> LoadedConfiguration {
        LoadedConfiguration(
            configuration: Configuration(sources: sources, secrets: secrets), file: name,
            files: ConfigurationFiles(files: [name, name + ".d/part.yaml"]))
    }

    static let a = SourceDefinition(id: "a", kind: "http", options: ["url": "http://one"])
    static let b = SourceDefinition(id: "b", kind: "file", options: ["path": "/b"])
    /// Running: `a` of kind http, `b` of kind file, each kind served by its plugin.
    static let running = configuration("running.yaml", [a, b])

    static func machine() -> ReloadStateMachine {
        ReloadStateMachine(current: running, running: ["http": http, "file": file])
    }

    /// A reload that read: `a`'s options changed, `b` removed, `c` added of a new kind.
    static let next = configuration(
        "next.yaml",
        [
            SourceDefinition(id: "a", kind: "http", options: ["url": "http://two"]),
            SourceDefinition(id: "c", kind: "exec", options: ["command": "date"]),
        ], secrets: ["s3cret"])
    static let nextOrigins: [Kind: PluginOrigin] = ["http": http, "exec": exec]

    static func ids(_ names: String...) -> [ControlID] { names.map { .string($0) } }

    static func problem(_ line: Int, _ message: String) -> Diagnostic {
        Diagnostic(.init(line: line, column: 5), message)
    }

    static let refused = ReloadStateMachine.refusalMessage

    /// A machine with a reload of `next` under way, asked for by `r1`, read and being checked.
    static func checkingNext() -> ReloadStateMachine {
        var machine = machine()
        _ = machine.requested(replyingTo: ids("r1"))
        _ = machine.read(.success(next), origins: nextOrigins)
        return machine
    }

    static let commitOfNext = [
        "log reloaded next.yaml",
        "retire checker http",
        "promote exec",
        "watch next.yaml next.yaml.d/part.yaml",
        "reconfigure next.yaml rules [exec] replacing [exec]",
        "retire running file",
        "ack r1",
        "ended [a, c]",
    ]

    // MARK: Read, check, commit

    @Test func aReloadReadsThenHasTheChangedSourcesCheckedThenCommits() {
        var machine = Self.machine()
        #expect(machine.requested(replyingTo: Self.ids("r1")).summary == ["notify started", "read"])
        #expect(machine.isRunning)
        // The secrets first; a fresh loader for the new kind, a checker for the kind whose running plugin stays;
        // the unchanged kind's running loader is named too (it has no changed source to check).
        #expect(
            machine.read(.success(Self.next), origins: Self.nextOrigins).summary == [
                "secrets [s3cret]",
                "make fresh exec hammock-plugin-exec",
                "make checker http hammock-plugin-http",
                "check [a, c] of next.yaml with [exec: fresh, file: running, http: checker], then commit unless refused",
            ])
        #expect(machine.current.file == "running.yaml")
        // Checkers retired, fresh loaders in place, the configuration in force, removed kinds retired, then the ack.
        #expect(
            machine.checked(Self.next, rules: ["exec": TemplateRules()], validation: .init()).summary
                == Self.commitOfNext)
        #expect(!machine.isRunning)
        #expect(machine.current.file == "next.yaml")
        #expect(machine.running == ["http": Self.http, "exec": Self.exec])
    }

    @Test func aChangedPluginCommandGetsAFreshLoaderThatReplacesTheRunningOneAtTheCommit() {
        var machine = Self.machine()
        _ = machine.requested()
        let moved = PluginOrigin.command(["/opt/http-plugin"])
        let next = Self.configuration("next.yaml", [Self.a, Self.b])
        // No source changed: the fresh loader is made (and checks nothing), no checker.
        #expect(
            machine.read(.success(next), origins: ["http": moved, "file": Self.file]).summary == [
                "secrets []",
                "make fresh http /opt/http-plugin",
                "check [] of next.yaml with [file: running, http: fresh], then commit unless refused",
            ])
        // The running loader of the kind is retired just before the fresh one takes its place.
        #expect(
            machine.checked(next, rules: [:], validation: .init()).summary == [
                "log reloaded next.yaml",
                "retire running http",
                "promote http",
                "watch next.yaml next.yaml.d/part.yaml",
                "reconfigure next.yaml rules [] replacing [http]",
                "ended [a, b]",
            ])
        #expect(machine.running == ["http": moved, "file": Self.file])
    }

    @Test func aKindWhosePluginIsNotFoundIsNotCheckedAndItsRunningLoaderStays() {
        var machine = Self.machine()
        _ = machine.requested()
        let next = Self.configuration(
            "next.yaml", [SourceDefinition(id: "a", kind: "http", options: ["url": "http://two"]), Self.b])
        #expect(
            machine.read(.success(next), origins: ["file": Self.file]).summary == [
                "secrets []",
                "check [a] of next.yaml with [file: running], then commit unless refused",
            ])
        #expect(machine.checked(next, rules: [:], validation: .init()).summary.contains("retire running http") == false)
        #expect(machine.running == ["http": Self.http, "file": Self.file])
    }

    // MARK: Refusals

    @Test func aPluginsRefusalRetiresWhatTheReloadMadeAndAnswersWithEveryProblem() {
        var machine = Self.checkingNext()
        let problems = [Self.problem(3, "source \"a\": url: not a URL")]
        #expect(
            machine.checked(Self.next, rules: [:], validation: .init(optionProblems: problems)).summary == [
                // The running configuration's files, and those of the refused one: its fix reloads.
                "watch running.yaml running.yaml.d/part.yaml next.yaml next.yaml.d/part.yaml",
                "retire fresh exec",
                "retire checker http",
                "ended nil",
                "log refusal next.yaml:3:5: source \"a\": url: not a URL",
                "refuse r1: " + Self.refused(ConfigurationError(file: "next.yaml", diagnostics: problems)),
            ])
        #expect(!machine.isRunning)
        #expect(machine.current.file == "running.yaml")
        #expect(machine.running == ["http": Self.http, "file": Self.file])
        #expect(
            Self.refused(ConfigurationError(file: "next.yaml", diagnostics: problems))
                == "reload failed, the running configuration goes on:\nnext.yaml:3:5: source \"a\": url: not a URL")
    }

    @Test func aFileThatDoesNotReadAtAllIsRefusedAtOnce() {
        var machine = Self.machine()
        _ = machine.requested(replyingTo: Self.ids("r1", "r2"))
        let error = ConfigurationError(
            file: "running.yaml", diagnostics: [Self.problem(1, "not YAML")],
            readFrom: ConfigurationFiles(files: ["running.yaml", "broken.yaml"]))
        #expect(
            machine.read(.failure(error), origins: [:]).summary == [
                "secrets []",
                "watch running.yaml running.yaml.d/part.yaml running.yaml broken.yaml",
                "ended nil",
                "log refusal running.yaml:1:5: not YAML",
                "refuse r1 r2: reload failed, the running configuration goes on:\nrunning.yaml:1:5: not YAML",
            ])
        #expect(!machine.isRunning)
    }

    @Test func theReadPartOfAFileWithProblemsIsCheckedByItsPluginsAndRefusedWithTheirProblemsJoined() {
        var machine = Self.machine()
        _ = machine.requested()
        let partial = Self.configuration(
            "running.yaml", [SourceDefinition(id: "a", kind: "http", options: ["url": "ftp://x"]), Self.b],
            secrets: ["token"])
        let error = ConfigurationError(
            file: "running.yaml", diagnostics: [Self.problem(9, "source \"d\": unknown key")], partial: partial)
        // The part that read is checked with its secrets known; nothing is refused before the plugins answer.
        #expect(
            machine.read(.failure(error), origins: ["http": Self.http, "file": Self.file]).summary == [
                "secrets [token]",
                "watch running.yaml running.yaml.d/part.yaml running.yaml running.yaml.d/part.yaml",
                "make checker http hammock-plugin-http",
                "check [a] of running.yaml with [file: running, http: checker], then refuse",
            ])
        #expect(machine.isRunning)
        let pluginProblem = Self.problem(4, "source \"a\": url: not http")
        // Signalled, not asked by a control line: one error line without an id says it.
        #expect(
            machine.checkedRefusal(error, validation: .init(optionProblems: [pluginProblem])).summary == [
                "retire checker http",
                "ended nil",
                "log refusal running.yaml:4:5: source \"a\": url: not http | running.yaml:9:5: source \"d\": unknown key",
                "refuse (no id): reload failed, the running configuration goes on:\nrunning.yaml:4:5: source \"a\": url: not http\nrunning.yaml:9:5: source \"d\": unknown key",
            ])
        #expect(!machine.isRunning)
        #expect(machine.current.file == "running.yaml")
    }

    // MARK: Reloads asked for while one runs

    @Test func reloadsAskedForWhileOneRunsQueueExactlyOneMoreThatAcksTheirIDs() {
        var machine = Self.checkingNext()
        #expect(machine.requested(replyingTo: Self.ids("r2", "r3")).isEmpty)
        #expect(machine.requested().isEmpty)
        #expect(machine.requested(replyingTo: Self.ids("r4")).isEmpty)
        // The running reload acks only its own line; the one after starts as it ends.
        #expect(
            machine.checked(Self.next, rules: ["exec": TemplateRules()], validation: .init()).summary
                == Self.commitOfNext + ["notify started", "read"])
        #expect(machine.isRunning)
        _ = machine.read(.success(Self.next), origins: Self.nextOrigins)
        // Nothing changed since: nothing to check, nothing made.
        #expect(
            machine.checked(Self.next, rules: [:], validation: .init()).summary == [
                "log reloaded next.yaml",
                "watch next.yaml next.yaml.d/part.yaml",
                "reconfigure next.yaml rules [] replacing []",
                "ack r2 r3 r4",
                "ended [a, c]",
            ])
        // However many were asked for, one more ran.
        #expect(!machine.isRunning)
    }

    @Test func theLinesThatWaitAreRefusedTogetherWithTheReloadAfter() {
        var machine = Self.checkingNext()
        _ = machine.requested(replyingTo: Self.ids("r2"))
        _ = machine.requested(replyingTo: Self.ids("r3"))
        // The running one is refused by a plugin: the one after starts as it ends, and its own line is refused.
        let bad = [Self.problem(3, "bad")]
        #expect(
            machine.checked(Self.next, rules: [:], validation: .init(optionProblems: bad)).summary == [
                "watch running.yaml running.yaml.d/part.yaml next.yaml next.yaml.d/part.yaml",
                "retire fresh exec",
                "retire checker http",
                "ended nil",
                "notify started",
                "read",
                "log refusal next.yaml:3:5: bad",
                "refuse r1: " + Self.refused(ConfigurationError(file: "next.yaml", diagnostics: bad)),
            ])
        #expect(machine.isRunning)
        let error = ConfigurationError(file: "running.yaml", diagnostics: [Self.problem(2, "worse")])
        #expect(
            machine.read(.failure(error), origins: [:]).summary.last
                == "refuse r2 r3: reload failed, the running configuration goes on:\nrunning.yaml:2:5: worse")
        #expect(!machine.isRunning)
    }

    @Test func atMostAThousandLinesWaitAndTheRestAreRefusedAtOnce() {
        var machine = Self.checkingNext()
        let waiting = (1...999).map { ControlID.string("w\($0)") }
        #expect(machine.requested(replyingTo: waiting).isEmpty)
        // The 1000th fits; the 1001st and after are refused at once, with the message of before.
        let over = machine.requested(replyingTo: Self.ids("w1000", "w1001", "w1002"))
        #expect(over.summary == ["refuse w1001 w1002: " + ReloadStateMachine.overflowMessage])
        #expect(
            ReloadStateMachine.overflowMessage
                == "reload refused: 1000 reload requests already wait for the running reload; send it again once it is answered")
        #expect(machine.requested(replyingTo: Self.ids("w1003")).summary == ["refuse w1003: " + ReloadStateMachine.overflowMessage])
        // A reload without a line still counts as wanted, and costs no room.
        #expect(machine.requested().isEmpty)
        _ = machine.checked(Self.next, rules: [:], validation: .init())
        _ = machine.read(.success(Self.next), origins: Self.nextOrigins)
        let acks = machine.checked(Self.next, rules: [:], validation: .init()).compactMap { action -> [ControlID]? in
            if case .acknowledge(let ids) = action { ids } else { nil }
        }
        #expect(acks == [waiting + Self.ids("w1000")])
    }
}

extension [ReloadStateMachine.Action] {
    /// A short, comparable description of each action.
    var summary: [String] { map(\.summary) }
}

extension ReloadStateMachine.Action {
    var summary: String {
        func names(_ ids: [ControlID]) -> String {
            ids.isEmpty ? "(no id)" : ids.map { if case .string(let name) = $0 { name } else { $0.description } }.joined(separator: " ")
        }
        func name(_ origin: PluginOrigin) -> String {
            switch origin {
            case .builtIn: "built-in"
            case .command(let command): command.joined(separator: " ")
            }
        }
        switch self {
        case .notifyStarted: return "notify started"
        case .read: return "read"
        case .addSecrets(let secrets): return "secrets [\(secrets.sorted().joined(separator: ", "))]"
        case .watch(let files): return "watch " + files.flatMap { $0.files + $0.directories }.joined(separator: " ")
        case .makeLoader(let kind, let origin, let role): return "make \(role) \(kind) \(name(origin))"
        case .check(let sources, let configuration, let loaders, let outcome):
            let roles = loaders.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
            let then = if case .refuse = outcome { "refuse" } else { "commit unless refused" }
            return "check [\(sources.map(\.id.rawValue).joined(separator: ", "))] of \(configuration.file) with [\(roles)], then \(then)"
        case .retire(let kind, let role): return "retire \(role) \(kind)"
        case .promote(let kind): return "promote \(kind)"
        case .logReloaded(let file): return "log reloaded \(file)"
        case .reconfigure(let next, let rules, let replacing):
            return "reconfigure \(next.file) rules [\(rules.keys.sorted().map(\.rawValue).joined(separator: ", "))] replacing [\(replacing.sorted().map(\.rawValue).joined(separator: ", "))]"
        case .acknowledge(let ids): return "ack \(names(ids))"
        case .logRefusal(let error):
            return "log refusal " + error.diagnostics.map { $0.formatted(file: error.file) }.joined(separator: " | ")
        case .refuse(let ids, let message): return "refuse \(names(ids)): \(message)"
        case .ended(let sources): return "ended " + (sources.map { "[\($0.map(\.id.rawValue).joined(separator: ", "))]" } ?? "nil")
        }
    }
}
