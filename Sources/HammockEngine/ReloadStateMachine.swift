import HammockConfig
import HammockCore
import HammockPluginHost

/// The reload protocol (SIGHUP, `{"op":"reload"}`, a change `--watch-config` saw) as decisions: what to do
/// when a reload is asked for, when the configuration has been read again, and when the plugins have said
/// what they think of it. Pure, like `EngineCore` and `PluginSupervisor`: every input returns the actions to
/// carry out, in order; nothing here reads a file, starts a plugin or holds a loader. Loaders are I/O
/// objects, so the machine names them by kind and role (`Role`) and `Engine.serve` holds them.
///
/// The rules:
/// - A reload reads the configuration off the loop, then has the changed sources checked by their plugins
///   off the loop, then is committed or refused; the loop goes on taking inputs meanwhile.
/// - A reload asked for while one runs is wanted once more, however many times it is asked for: one more
///   runs after the running one ends, and answers every control line that asked for it meanwhile. Those
///   answers are bounded (`maximumWaitingAnswers`), so that a flood of reload lines with an id each cannot
///   grow them while a plugin takes its time: the lines over the bound are refused at once.
/// - The plugins check the new configuration's changed sources before any of it is in force. A kind that is
///   new, or whose plugin command changed, is checked by a fresh loader, which serves it once the reload
///   holds; a kind whose running plugin stays is checked by a loader of its own (a checker), since checking
///   configures a plugin and the running one must not serve options the reload may yet refuse.
/// - A file that does not read is refused; the part of it that did read (`ConfigurationError.partial`) is
///   checked by its plugins first, so that one refusal reports every problem, as `hammock run` does at start.
/// - A refusal retires the loaders the reload made and answers its control lines with the reason; the
///   running configuration goes on untouched. A commit retires the checkers, puts each fresh loader in the
///   place of the running one of its kind, puts the configuration in force, retires the loaders of the kinds
///   it no longer uses, and only then acknowledges: a consumer that reads the ack has read what the reload did.
struct ReloadStateMachine: Sendable {
    /// How many control lines may wait for the reload after the running one.
    static let maximumWaitingAnswers = 1000

    /// The part a loader plays in the reload.
    enum Role: Sendable, Hashable {
        /// Serves its kind's sources now.
        case running
        /// Made for the configuration being checked (a new kind, a changed plugin command): it checks the
        /// kind's sources, then serves them if the reload holds.
        case fresh
        /// Made only to check the changed sources of a kind whose running loader stays.
        case checker
    }

    /// What a check of the plugins leads to once they have answered.
    enum Outcome: Sendable {
        /// The configuration read: their answers decide (`checked(_:rules:validation:)`).
        case commitUnlessRefused
        /// The file has problems of its own: it is refused with the plugins' problems joined to them
        /// (`checkedRefusal(_:validation:)`).
        case refuse(ConfigurationError)
    }

    enum Action: Sendable {
        /// systemd's `RELOADING=1` (`ServiceNotifier.reloadStarted`).
        case notifyStarted
        /// Read the configuration again, off the loop; `read(_:origins:)` takes the outcome.
        case read
        /// Redact these from everything hammock writes from now on, before anything (a plugin's complaint, a
        /// log line) can quote one of them.
        case addSecrets(Set<String>)
        /// `--watch-config` watches exactly these files.
        case watch([ConfigurationFiles])
        /// Make a loader of `kind`, started from `origin`, to play `role` (`.fresh` or `.checker`).
        case makeLoader(kind: Kind, origin: PluginOrigin, role: Role)
        /// Ask the plugins, off the loop, what they think of `sources` of `configuration`: each kind's
        /// sources go to its loader in the role `loaders` gives (a kind not named there is not checked).
        /// The answers come back to `checked` or `checkedRefusal`, as `outcome` says.
        case check(
            sources: [SourceDefinition], of: LoadedConfiguration, loaders: [Kind: Role], outcome: Outcome)
        /// Shut the loader of `kind` in `role` down, without waiting for it on the loop (the stop waits).
        case retire(kind: Kind, role: Role)
        /// The fresh loader of `kind` becomes its running one.
        case promote(kind: Kind)
        /// The log's notice that `file` is reloaded.
        case logReloaded(file: String)
        /// Put `configuration` in force: the output's views, then the core learns `rules` (first, so that
        /// its templated sources load at once) and is reconfigured, the sources of `replacingKinds` moving
        /// to their new loaders.
        case reconfigure(LoadedConfiguration, rules: [Kind: TemplateRules], replacingKinds: Set<Kind>)
        /// Acknowledge these control lines: the reload they asked for is in force.
        case acknowledge([ControlID])
        /// Log each problem of the refused configuration.
        case logRefusal(ConfigurationError)
        /// Answer these control lines with an error line of `message` each (`OutputLine.refusals`: with none,
        /// one error line without an id).
        case refuse([ControlID], message: String)
        /// The reload is over: `inForce` holds the sources of the configuration now in force, nil when it
        /// was refused (for systemd's `READY=1` and the metrics).
        case ended(inForce: [SourceDefinition]?)
    }

    /// The configuration in force.
    private(set) var current: LoadedConfiguration
    /// The origin of each kind's running loader (a kind whose plugin was not found has none).
    private(set) var running: [Kind: PluginOrigin]

    private struct Reload {
        /// The control lines it answers: acknowledged once it is in force, refused with it.
        var replyingTo: [ControlID]
        /// The fresh loaders it made, by kind, with their origins.
        var fresh: [Kind: PluginOrigin] = [:]
        /// The kinds it made a checker for.
        var checkers: Set<Kind> = []
    }

    /// The reload under way.
    private var reload: Reload?
    /// Another reload was asked for while one ran, and the control lines it answers.
    private var wanted: [ControlID]?

    var isRunning: Bool { reload != nil }

    /// - Parameter running: the origin of each kind's loader at start.
    init(current: LoadedConfiguration, running: [Kind: PluginOrigin]) {
        self.current = current
        self.running = running
    }

    /// The message that refuses a reload line over `maximumWaitingAnswers`.
    static let overflowMessage =
        "reload refused: \(maximumWaitingAnswers) reload requests already wait for the running reload; send it again once it is answered"

    /// The message that refuses the control lines of a refused reload.
    static func refusalMessage(_ error: ConfigurationError) -> String {
        "reload failed, the running configuration goes on:\n\(error.description)"
    }

    // MARK: Inputs

    /// A reload is asked for, by the control lines `ids` (none for a signal or a watched file).
    mutating func requested(replyingTo ids: [ControlID] = []) -> [Action] {
        guard reload == nil else {
            let waiting = wanted ?? []
            let room = max(0, Self.maximumWaitingAnswers - waiting.count)
            wanted = waiting + ids.prefix(room)
            let over = Array(ids.dropFirst(room))
            return over.isEmpty ? [] : [.refuse(over, message: Self.overflowMessage)]
        }
        reload = Reload(replyingTo: ids)
        return [.notifyStarted, .read]
    }

    /// The configuration was read again. `origins`: what would start each kind of the configuration that
    /// read (the whole one, or the part of a failed one), for the kinds whose plugin is found.
    mutating func read(
        _ result: Result<LoadedConfiguration, ConfigurationError>, origins: [Kind: PluginOrigin]
    ) -> [Action] {
        guard reload != nil else { return [] }
        switch result {
        case .failure(let error):
            // Still the running configuration's files, and those of the bad edit: its fix reloads.
            var actions: [Action] = [.addSecrets(error.secrets), .watch([current.files, error.readFrom])]
            guard let partial = error.partial else { return actions + refuse(error) }
            actions += prepareCheck(of: partial, origins: origins, outcome: .refuse(error))
            return actions
        case .success(let next):
            return [.addSecrets(next.configuration.secrets)]
                + prepareCheck(of: next, origins: origins, outcome: .commitUnlessRefused)
        }
    }

    /// The plugins answered for the changed sources of `next`, a configuration that read; `rules` are the
    /// template rules of its kinds, from the loaders that checked it.
    mutating func checked(
        _ next: LoadedConfiguration, rules: [Kind: TemplateRules], validation: Engine.PluginValidation
    ) -> [Action] {
        guard let reload else { return [] }
        if !validation.optionProblems.isEmpty {
            return [.watch([current.files, next.files])]
                + refuse(ConfigurationError(file: next.file, diagnostics: validation.optionProblems))
        }
        var actions: [Action] = [.logReloaded(file: next.file)]
        actions += reload.checkers.sorted().map { .retire(kind: $0, role: .checker) }
        for (kind, origin) in reload.fresh.sorted(by: { $0.key < $1.key }) {
            if running[kind] != nil { actions.append(.retire(kind: kind, role: .running)) }
            actions.append(.promote(kind: kind))
            running[kind] = origin
        }
        current = next
        actions.append(.watch([next.files]))
        actions.append(.reconfigure(next, rules: rules, replacingKinds: Set(reload.fresh.keys)))
        let kinds = Set(next.configuration.kinds)
        for kind in running.keys.sorted() where !kinds.contains(kind) {
            running[kind] = nil
            actions.append(.retire(kind: kind, role: .running))
        }
        // After what `reconfigure` wrote: a consumer that reads the ack has read what the reload did.
        if !reload.replyingTo.isEmpty { actions.append(.acknowledge(reload.replyingTo)) }
        return actions + ended(inForce: next.configuration.sources)
    }

    /// The plugins answered for the part of a configuration that did not read: it is refused with their
    /// problems and its own together.
    mutating func checkedRefusal(_ error: ConfigurationError, validation: Engine.PluginValidation) -> [Action] {
        guard reload != nil else { return [] }
        return refuse(error.adding(pluginProblems: validation.optionProblems))
    }

    // MARK: Steps

    /// The loaders that check `next`'s changed sources, and the check: the running loaders, a fresh one for
    /// a new kind or a changed plugin command, and a checker for a kind whose sources changed.
    private mutating func prepareCheck(
        of next: LoadedConfiguration, origins: [Kind: PluginOrigin], outcome: Outcome
    ) -> [Action] {
        var actions: [Action] = []
        var checking = running.mapValues { _ in Role.running }
        for kind in next.configuration.kinds {
            let origin = origins[kind]
            if let origin, running[kind] == origin { continue }
            // A new kind, or a kind whose plugin command changed: a fresh loader checks the new sources
            // while the running one goes on serving the old. A kind whose plugin is not found any more is
            // not checked, and its running loader (if any) stays.
            if let origin {
                reload?.fresh[kind] = origin
                checking[kind] = .fresh
                actions.append(.makeLoader(kind: kind, origin: origin, role: .fresh))
            } else {
                checking[kind] = nil
            }
        }
        let changed = next.configuration.sources.filter { source in
            current.configuration.sources.first { $0.id == source.id } != source
        }
        var seen = Set<Kind>()
        for kind in changed.map(\.kind) where seen.insert(kind).inserted && checking[kind] == .running {
            reload?.checkers.insert(kind)
            checking[kind] = .checker
            actions.append(.makeLoader(kind: kind, origin: running[kind]!, role: .checker))
        }
        actions.append(.check(sources: changed, of: next, loaders: checking, outcome: outcome))
        return actions
    }

    /// Refuses the reload under way: its loaders retired, its control lines answered with `error`.
    private mutating func refuse(_ error: ConfigurationError) -> [Action] {
        guard let reload else { return [] }
        var actions: [Action] = reload.fresh.keys.sorted().map { .retire(kind: $0, role: .fresh) }
        actions += reload.checkers.sorted().map { .retire(kind: $0, role: .checker) }
        actions += ended(inForce: nil)
        // With no control line to answer (a signal, a watched file), one error line without an id says it.
        return actions + [.logRefusal(error), .refuse(reload.replyingTo, message: Self.refusalMessage(error))]
    }

    /// Ends the reload under way, and starts the one wanted after it.
    private mutating func ended(inForce sources: [SourceDefinition]?) -> [Action] {
        reload = nil
        guard let next = wanted else { return [.ended(inForce: sources)] }
        wanted = nil
        return [.ended(inForce: sources)] + requested(replyingTo: next)
    }
}
